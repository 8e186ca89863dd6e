"""Boundaries, damping, output switches and initial states from files, in real runs.

Free flight (a zero gravity field: U = 0, F = 0) has exact answers: straight lines, unfolded
by a periodic box or mirrored by a reflecting one, and v(t) = v0 * decay^n with damping.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from simrun.outputs import read_energy_csv, read_xyz
from simrun.scene import load_scene
from simrun.stepper import run_scene

REPO = Path(__file__).resolve().parents[1]
K = REPO / "kernels"
X0 = np.array([[0.5, 0.5], [0.2, 0.7], [0.9, 0.1]])
V0 = np.array([[1.3, -0.4], [-0.9, 0.25], [0.35, -2.05]])


def free_flight(tmp_path: Path, extra: str, steps: int = 100, dt: float = 0.01,
                integrator: str = "symplectic_euler") -> tuple[np.ndarray, np.ndarray]:
    """Run three free particles starting at X0 with V0; return the frames' x and v."""
    np.savez(tmp_path / "start.npz", x=X0, v=V0)
    scene = tmp_path / "free.yaml"
    scene.write_text(textwrap.dedent(f"""\
        version: 1
        precision: f64
        particles: {{count: 3, dim: 2}}
        initial: {{type: file, path: start.npz}}
        energy: [{{kernel: {K}/external.py:uniform_gravity, params: {{g: 0.0}}}}]
        integrator: {integrator}
        dt: {dt}
        steps: {steps}
        outputs: {{every: 1}}
        """) + extra)
    out = tmp_path / "out"
    assert run_scene(load_scene(scene, allow_outside=True), out).status == "ok"
    with np.load(out / "frames.npz") as frames:
        return frames["x"], frames["v"]


def test_periodic_box_wraps_particles_that_cross_it(tmp_path: Path) -> None:
    x, v = free_flight(tmp_path, "boundary: {type: periodic, low: [0, 0], high: [1, 1]}\n")
    t = 0.01 * np.arange(101)[:, None, None]
    unwrapped = X0 + V0 * t
    assert (unwrapped < 0).any() and (unwrapped >= 1).any()  # every side is crossed
    np.testing.assert_allclose(x, np.mod(unwrapped, 1.0), rtol=0, atol=1e-12)
    assert ((x >= 0) & (x < 1)).all()
    assert np.array_equal(v, np.broadcast_to(V0, v.shape))  # wrapping keeps the velocity
    jumps = np.abs(np.diff(x, axis=0)).max(axis=(0, 1))
    assert jumps.max() > 0.9  # a wrap is a jump across the box, not a bounce


def test_reflecting_walls_mirror_positions_and_reverse_velocities(tmp_path: Path) -> None:
    x, v = free_flight(tmp_path, "boundary: {type: reflect, low: [0, 0], high: [1, 1]}\n")
    t = 0.01 * np.arange(101)[:, None, None]
    folded = np.mod(X0 + V0 * t, 2.0)  # the unfolded straight line, folded into [0, 2)
    inside = folded <= 1.0
    np.testing.assert_allclose(x, np.where(inside, folded, 2.0 - folded), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(v, np.where(inside, V0, -V0))
    flips = (np.diff(np.sign(v), axis=0) != 0).sum(axis=0)
    assert flips[0, 0] == 1 and flips[2, 1] >= 1  # the walls at x = 1 and y = 0 were hit
    assert ((x >= 0) & (x <= 1)).all()


@pytest.mark.parametrize(("integrator", "per_step"), [
    ("symplectic_euler", lambda gamma, dt: 1 - gamma * dt),
    ("velocity_verlet", lambda gamma, dt: (1 - 0.5 * gamma * dt) ** 2),
])
def test_damping_slows_velocities_at_its_rate(tmp_path: Path, integrator: str,
                                              per_step) -> None:
    gamma, dt, steps = 2.0, 1e-3, 1000
    integ = f"{{type: {integrator}, damping: {gamma}}}"
    _x, v = free_flight(tmp_path, "", steps=steps, dt=dt, integrator=integ)
    np.testing.assert_allclose(v[-1], V0 * per_step(gamma, dt) ** steps, rtol=1e-9)
    # and the continuous dv/dt = -damping * v to first order in dt (Euler: gamma^2 dt T / 2)
    np.testing.assert_allclose(v[-1], V0 * np.exp(-gamma * steps * dt), rtol=2.5e-3)


def test_damping_drains_the_energy_of_an_oscillator(tmp_path: Path) -> None:
    def energy_ratio(damping: float) -> float:
        np.savez(tmp_path / "one.npz", x=np.zeros((1, 2)), v=np.array([[1.0, 0.0]]))
        scene = tmp_path / "spring.yaml"
        scene.write_text(textwrap.dedent(f"""\
            version: 1
            particles: {{count: 1}}
            initial: {{type: file, path: one.npz}}
            energy: [{{kernel: {K}/external.py:anchor, params: {{k: 1.0}}}}]
            integrator: {{type: velocity_verlet, damping: {damping}}}
            dt: 0.01
            steps: 2000
            """))
        out = tmp_path / f"spring-{damping}"
        run_scene(load_scene(scene, allow_outside=True), out)
        total = read_energy_csv(out / "energy.csv")["total"]
        assert (np.diff(total) <= 1e-4 * total[0]).all()  # never gains energy
        return float(total[-1] / total[0])

    assert energy_ratio(0.0) == pytest.approx(1.0, abs=1e-4)
    assert energy_ratio(0.1) == pytest.approx(np.exp(-0.1 * 20), rel=0.1)  # dE/dt = -g m v^2


def _gravity(tmp_path: Path, overrides: list[str], steps: int = 20) -> Path:
    out = tmp_path / "run"
    scene = load_scene(REPO / "scenes" / "gravity.yaml",
                       ["precision=f64", f"steps={steps}", "outputs.every=1", *overrides])
    run_scene(scene, out)
    return out


def test_recorded_forces_are_the_ones_that_moved_the_particles(tmp_path: Path) -> None:
    out = _gravity(tmp_path, ["outputs.forces=true"])
    with np.load(out / "frames.npz") as frames:
        assert set(frames.files) == {"step", "time", "x", "v", "f"}
        v, f = frames["v"], frames["f"]
    assert np.abs(f).max() > 1.0
    # symplectic Euler: v[n+1] = v[n] + dt * F(x[n]) / m, with m = 1
    np.testing.assert_allclose(np.diff(v, axis=0), 1e-5 * f[:-1], rtol=1e-9, atol=1e-12)
    xyz = read_xyz(out / "trajectory.xyz")
    np.testing.assert_allclose(xyz[3]["forces"][:, :2], f[3], rtol=1e-12)
    np.testing.assert_array_equal(xyz[3]["momenta"][:, :2], v[3])  # m = 1: momenta are v


def test_output_switches_leave_out_what_is_not_wanted(tmp_path: Path) -> None:
    out = _gravity(tmp_path, ["outputs.velocities=false", "outputs.energies=false",
                              "outputs.xyz=false"])
    with np.load(out / "frames.npz") as frames:
        assert set(frames.files) == {"step", "time", "x"}
    assert not (out / "energy.csv").exists() and not (out / "trajectory.xyz").exists()
    with np.load(out / "state.npz") as state:  # resuming still has the whole state
        assert {"x", "v", "step"} <= set(state.files)
    no_v = _gravity(tmp_path / "b", ["outputs.velocities=false"])
    assert "momenta" not in read_xyz(no_v / "trajectory.xyz")[0]
    no_x = _gravity(tmp_path / "c", ["outputs.positions=false"])
    with np.load(no_x / "frames.npz") as frames:
        assert "x" not in frames.files and frames["v"].shape == (21, 8, 2)
    assert not (no_x / "trajectory.xyz").exists()


def test_a_run_starts_from_an_extended_xyz_frame(tmp_path: Path) -> None:
    first = _gravity(tmp_path, [], steps=30)
    with np.load(first / "frames.npz") as frames:
        x_at_10, v_at_10 = frames["x"][10], frames["v"][10]
        x_last, v_last = frames["x"][-1], frames["v"][-1]
    xyz = first / "trajectory.xyz"
    for frame, x_want, v_want in ((10, x_at_10, v_at_10), (-1, x_last, v_last)):
        overrides = [f"initial={{type: file, path: {xyz}, frame: {frame}}}"]
        second = _gravity(tmp_path / f"from-{frame}", overrides, steps=2)
        with np.load(second / "frames.npz") as frames:
            assert np.array_equal(frames["x"][0], x_want)  # 17 digits: exact in f64
            assert np.array_equal(frames["v"][0], v_want)
