"""The step loop: energy conservation, resume bit for bit, NaN watch, boundaries, bad kernels."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from simrun.outputs import read_energy_csv
from simrun.scene import SceneError, load_scene
from simrun.scene.load import display_path
from simrun.scene.schema import Boundary
from simrun.stepper import SimulationError, check_scene, run_scene
from simrun.stepper.integrators import apply_boundary

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"


def energies(out: Path) -> np.ndarray:
    return read_energy_csv(out / "energy.csv")


def max_relative_drift(out: Path) -> float:
    total = energies(out)["total"]
    return float(np.abs(total - total[0]).max() / abs(total[0]))


def drift_of(scene: str, integrator: str, dt: float, duration: float, out: Path) -> float:
    steps = round(duration / dt)
    loaded = load_scene(SCENES / f"{scene}.yaml", [
        "precision=f64", f"integrator={integrator}", f"dt={dt}", f"steps={steps}",
        f"outputs.every={steps // 50}"])
    result = run_scene(loaded, out)
    assert result.status == "ok" and result.steps_done == steps
    return max_relative_drift(out)


# Stated tolerances: max |E(t) - E(0)| / |E(0)| over the run at the scene's dt (f64), and the
# integrator's order: halving dt divides the error by 2 (symplectic Euler) or 4 (Verlet).
@pytest.mark.parametrize(("scene", "integrator", "dt", "duration", "tolerance", "order"), [
    ("gravity", "symplectic_euler", 1e-5, 0.02, 1e-3, 1),
    ("gravity", "velocity_verlet", 1e-5, 0.02, 5e-6, 2),
    ("molecule", "symplectic_euler", 2e-3, 4.0, 1e-2, 1),
    ("molecule", "velocity_verlet", 2e-3, 4.0, 2e-4, 2),
])
def test_energy_is_conserved(tmp_path: Path, scene: str, integrator: str, dt: float,
                             duration: float, tolerance: float, order: int) -> None:
    coarse = drift_of(scene, integrator, dt, duration, tmp_path / "coarse")
    fine = drift_of(scene, integrator, dt / 2, duration, tmp_path / "fine")
    assert coarse < tolerance
    assert 2 ** order * 0.8 < coarse / fine < 2 ** order * 1.2


def test_gravity_particles_actually_move_and_attract(tmp_path: Path) -> None:
    scene = load_scene(SCENES / "gravity.yaml", ["steps=2000"])
    run_scene(scene, tmp_path)
    with np.load(tmp_path / "frames.npz") as frames:
        x = frames["x"]
    spread = [np.linalg.norm(f - f.mean(0), axis=1).mean() for f in (x[0], x[-1])]
    assert spread[1] < spread[0]  # attraction pulls the cloud together


@pytest.mark.parametrize(("scene", "every"), [("gravity", 100), ("molecule", 25), ("mpm", 50),
                                           ("mass_spring", 8), ("diffmpm", 8)])
def test_resume_equals_an_uninterrupted_run(tmp_path: Path, scene: str, every: int) -> None:
    whole, split = tmp_path / "whole", tmp_path / "split"
    total = 8 * every
    run_scene(load_scene(SCENES / f"{scene}.yaml", [f"steps={total}"]), whole)
    run_scene(load_scene(SCENES / f"{scene}.yaml", [f"steps={total // 2 + every // 2}"]), split)
    run_scene(load_scene(SCENES / f"{scene}.yaml", [f"steps={total}"]), split, resume=True)
    with np.load(whole / "frames.npz") as a, np.load(split / "frames.npz") as b:
        assert a.files == b.files
        for key in a.files:
            assert np.array_equal(a[key], b[key]), key
    assert (whole / "energy.csv").read_text() == (split / "energy.csv").read_text()
    info = json.loads((split / "run.json").read_text())
    # the first part ended off the output cadence; its last frame is not kept
    assert info["status"] == "ok" and info["resumes"][0]["from_step"] == total // 2 + every // 2


def test_resume_refuses_a_different_scene(tmp_path: Path) -> None:
    run_scene(load_scene(SCENES / "gravity.yaml", ["steps=200"]), tmp_path)
    with pytest.raises(SceneError, match=r"dt \(1e-05 there, 2e-05 here\)"):
        run_scene(load_scene(SCENES / "gravity.yaml", ["steps=400", "dt=2e-5"]), tmp_path,
                  resume=True)


def test_nan_stops_with_the_step_and_leaves_valid_files(tmp_path: Path) -> None:
    scene = load_scene(SCENES / "molecule.yaml", ["dt=0.5", "steps=2000", "outputs.every=1"])
    with pytest.raises(SimulationError) as info:
        run_scene(scene, tmp_path)
    step = info.value.step
    assert 0 < step < 2000 and f"step {step} " in str(info.value)
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "failed" and f"step {step}" in run["error"]
    with np.load(tmp_path / "frames.npz") as frames:
        assert frames["step"][-1] == step - 1 and np.isfinite(frames["x"]).all()


def test_reflecting_and_periodic_boundaries() -> None:
    x = np.array([[-0.1, 0.5], [1.2, 0.5], [0.5, 0.5]])
    v = np.array([[-1.0, 0.0], [1.0, 2.0], [1.0, 1.0]])
    xr, vr = x.copy(), v.copy()
    apply_boundary(Boundary("reflect", (0.0, 0.0), (1.0, 1.0)), xr, vr)
    assert np.allclose(xr, [[0.1, 0.5], [0.8, 0.5], [0.5, 0.5]])
    assert vr.tolist() == [[1.0, 0.0], [-1.0, 2.0], [1.0, 1.0]]
    xp, vp = x.copy(), v.copy()
    apply_boundary(Boundary("periodic", (0.0, 0.0), (1.0, 1.0)), xp, vp)
    assert np.allclose(xp, [[0.9, 0.5], [0.2, 0.5], [0.5, 0.5]]) and np.array_equal(vp, v)


def test_reflecting_box_keeps_particles_inside(tmp_path: Path) -> None:
    scene = load_scene(SCENES / "molecule.yaml", [
        "steps=300", "boundary.type=reflect", "boundary.low=[-3,-3,-3]",
        "boundary.high=[3,3,3]", "initial.temperature=5"])
    run_scene(scene, tmp_path)
    with np.load(tmp_path / "frames.npz") as frames:
        assert (np.abs(frames["x"][1:]) <= 3).all()


def _scene_with(tmp_path: Path, energy: str, extra: str = "") -> Path:
    path = tmp_path / "scene.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        particles: {{count: 4, dim: 3}}
        {extra}
        energy:
          - {energy}
        dt: 1e-3
        steps: 5
        """))
    return path


def test_unknown_kernel_parameter_suggests(tmp_path: Path) -> None:
    ref = f"{{kernel: {REPO}/kernels/gravity.py:gravity, params: {{sofening: 1}}}}"
    with pytest.raises(SceneError) as info:
        check_scene(load_scene(_scene_with(tmp_path, ref), allow_outside=True))
    msg = str(info.value)
    col = (tmp_path / "scene.yaml").read_text().splitlines()[4].index("sofening") + 1
    where = display_path(tmp_path / "scene.yaml")  # relative when that is shorter: CI's clone
    assert msg.startswith(f"{where}:5:{col}: parameter 'sofening' is not an "
                          "argument")  # at the parameter's own key
    assert "Did you mean 'softening'?" in msg


def test_unknown_kernel_name_suggests(tmp_path: Path) -> None:
    ref = f"{{kernel: {REPO}/kernels/molecule.py:harmonic_bond}}"
    with pytest.raises(SceneError) as info:
        check_scene(load_scene(_scene_with(tmp_path, ref), allow_outside=True))
    assert "is not a @ti.kernel" in str(info.value)
    assert "Did you mean 'harmonic_bonds'?" in str(info.value)


def test_missing_topology_is_named(tmp_path: Path) -> None:
    ref = f"{{kernel: {REPO}/kernels/molecule.py:harmonic_bonds}}"
    with pytest.raises(SceneError, match="needs topology 'bonds' but the scene defines none"):
        check_scene(load_scene(_scene_with(tmp_path, ref), allow_outside=True))


def test_broken_kernel_module_reports_its_own_line(tmp_path: Path) -> None:
    module = tmp_path / "broken.py"
    module.write_text("import simrun.lang as ti\n\n\ndef oops(:\n    pass\n")
    with pytest.raises(SceneError) as info:
        check_scene(load_scene(_scene_with(tmp_path, f"{{kernel: {module}:oops}}"),
                               allow_outside=True))
    assert str(info.value).startswith(f"{module}:4: the kernel module failed to load: "
                                      "SyntaxError")


def test_check_compiles_every_shipped_scene() -> None:
    for name in ("gravity", "molecule", "fem", "mpm"):
        report = check_scene(load_scene(SCENES / f"{name}.yaml"))
        assert report.energy_kernels and np.isfinite(report.potential)


def test_kernel_modules_give_the_pictures_their_scenery(tmp_path: Path) -> None:
    scene = load_scene(SCENES / "mpm.yaml", ["steps=2", "step_kernels.params.obstacle_r=0.1"])
    run_scene(scene, tmp_path)
    shapes = json.loads((tmp_path / "run.json").read_text())["shapes"]
    wall = 3 / 64
    assert shapes == {"boxes": [[[wall, wall], [1 - wall, 1 - wall]]],
                      "circles": [[0.5, 0.5, 0.1]]}


def test_broken_render_shapes_hook_is_bad_input(tmp_path: Path) -> None:
    module = tmp_path / "k.py"
    module.write_text(textwrap.dedent("""\
        import simrun.lang as ti

        def render_shapes(params):
            return {"circles": [[0.0, params["missing"]]]}

        @ti.kernel
        def spring(x: ti.template(), U: ti.template()):
            for i in x:
                U[None] += x[i].norm_sqr()
        """))
    with pytest.raises(SceneError, match=r"k\.py: render_shapes\(\) failed: KeyError"):
        check_scene(load_scene(_scene_with(tmp_path, f"{{kernel: {module}:spring}}"),
                               allow_outside=True))


def _frames_and_drift(out: Path) -> tuple[np.ndarray, float]:
    total = energies(out)["total"]
    with np.load(out / "frames.npz") as frames:
        x = frames["x"]
    return x, float((total[-1] - total[0]) / abs(total[0]))


def test_gravity_1024_collapses_and_conserves_energy(tmp_path: Path) -> None:
    run_scene(load_scene(SCENES / "gravity_1024.yaml", ["steps=20"]), tmp_path)
    x, drift = _frames_and_drift(tmp_path)
    assert abs(drift) < 1e-4  # Verlet at dt = 5e-3 (1e-3 over the whole collapse)
    spread = [np.linalg.norm(f - f.mean(0), axis=1).mean() for f in (x[0], x[-1])]
    assert spread[1] < 0.97 * spread[0]


def test_fem_beam_sags_and_conserves_energy(tmp_path: Path) -> None:
    run_scene(load_scene(SCENES / "fem.yaml", ["steps=1000", "outputs.every=100"]), tmp_path)
    x, drift = _frames_and_drift(tmp_path)
    assert abs(drift) < 1e-6
    tip = 143  # the free end's top corner
    assert x[-1, tip, 1] < x[0, tip, 1] - 0.05
    assert np.abs(x[:, :6] - x[0, :6]).max() < 0.01  # the clamped end stays put


def test_mpm_strip_falls_inside_the_walls_and_dissipates(tmp_path: Path) -> None:
    run_scene(load_scene(SCENES / "mpm.yaml", ["steps=1500"]), tmp_path)
    x, drift = _frames_and_drift(tmp_path)
    assert x[-1, :, 1].mean() < x[0, :, 1].mean() - 0.1
    assert ((x > 0) & (x < 1)).all()
    # gravity is in U, so the total only loses what MPM transfers and the contacts dissipate
    assert -0.2 < drift < 1e-4
    total = energies(tmp_path)["total"]
    assert (np.diff(total) < 1e-4 * abs(total[0])).all()


@pytest.fixture
def one_step_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's chunks one step long (as for 10^5-10^6 LJ atoms, whose steps take ~0.1 s):
    most chunks then end between frames and thermo rows."""
    from simrun.stepper import run as run_module

    monkeypatch.setattr(run_module._ChunkSize, "__call__", lambda self, until: 1)


@pytest.mark.parametrize("scene", ["gravity", "molecule"])
def test_chunks_between_events_leave_the_outputs_as_they_were(
        tmp_path: Path, scene: str, one_step_chunks: None) -> None:
    """A chunk that ends between events skips U and the state's copies; frames, energies
    and thermo rows are those of a run whose chunks end only at events, bit for bit."""
    from simrun.stepper import run as run_module

    overrides = ["steps=60", "outputs.every=20"]
    run_scene(load_scene(SCENES / f"{scene}.yaml", overrides), tmp_path / "one")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_module._ChunkSize, "__call__", lambda self, until: until)
        run_scene(load_scene(SCENES / f"{scene}.yaml", overrides), tmp_path / "whole")
    with np.load(tmp_path / "one" / "frames.npz") as a, \
            np.load(tmp_path / "whole" / "frames.npz") as b:
        for key in a.files:
            assert np.array_equal(a[key], b[key]), key
    for name in ("energy.csv", "thermo.csv"):
        assert (tmp_path / "one" / name).read_text() == (tmp_path / "whole" / name).read_text()


def test_nan_between_events_is_caught_at_its_step(tmp_path: Path, one_step_chunks: None
                                                  ) -> None:
    steps = []
    for every in (500, 1):  # between events, then at every step (an event each)
        scene = load_scene(SCENES / "molecule.yaml",
                           ["dt=0.5", "steps=2000", f"outputs.every={every}"])
        with pytest.raises(SimulationError) as info:
            run_scene(scene, tmp_path / str(every))
        steps.append(info.value.step)
        assert f"step {info.value.step} " in str(info.value)
    assert 0 < steps[0] < 500 and steps[0] == steps[1]
