"""simrun as a library (issue 19, "Also"): ``simrun.run_scene`` and ``simrun.load_run`` give
the frames and energies of a run folder as NumPy arrays and ASE Atoms, checked against the
closed form of a harmonic oscillator; the folder is the one ``simrun run`` writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_cli import simrun as cli

TRAP = """import simrun.lang as ti


@ti.kernel
def trap(x: ti.template(), U: ti.template(), k: float):
    for i in x:
        U[None] += 0.5 * k * x[i].norm_sqr()
"""
X0, V0, K, DT, STEPS = np.array([[0.3, -0.2], [0.1, 0.4]]), np.array([[0.0, 0.5], [-0.3, 0.0]]), \
    4.0, 1e-3, 2000


@pytest.fixture()
def scene(tmp_path: Path) -> Path:
    (tmp_path / "trap.py").write_text(TRAP)
    np.savez(tmp_path / "start.npz", x=X0, v=V0)
    path = tmp_path / "trap.yaml"
    path.write_text(f"""version: 1
particles: {{count: 2, mass: 2.0}}
initial: {{type: file, path: start.npz}}
energy: [{{kernel: trap.py:trap, params: {{k: {2 * K}}}}}]
integrator: velocity_verlet
boundary: {{type: periodic, low: [-5, -5], high: [5, 5]}}
dt: {DT}
steps: 10
outputs: {{every: 100}}
""")
    return path


def test_run_scene_returns_arrays_that_follow_the_closed_form(scene: Path, tmp_path: Path
                                                              ) -> None:
    import simrun

    run = simrun.run_scene(scene, tmp_path / "out", steps=STEPS, threads=1, render=False)
    assert run.status == "ok" and run.path == tmp_path / "out"
    assert run.step.tolist() == list(range(0, STEPS + 1, 100))
    assert run.x.shape == run.v.shape == (len(run.step), 2, 2) and not hasattr(run, "f")
    # m = 2, k = 8: omega = 2; velocity Verlet's phase error is omega^3 t dt^2 / 24 per unit
    # amplitude, about 7e-7 at t = 2, so 1e-5 bounds it with room and catches a wrong step
    omega, t = np.sqrt(2 * K / 2.0), run.time[:, None, None]
    exact = X0 * np.cos(omega * t) + V0 / omega * np.sin(omega * t)
    np.testing.assert_allclose(run.x, exact, atol=1e-5)
    np.testing.assert_allclose(run.total, run.kinetic + run.potential, rtol=1e-12)
    e0 = 0.5 * 2.0 * (V0 ** 2).sum() + 0.5 * 2 * K * (X0 ** 2).sum()
    np.testing.assert_allclose(run.total, e0, rtol=1e-5)  # O((omega dt)^2) fluctuation
    np.testing.assert_array_equal(run.masses, [2.0, 2.0])

    again = simrun.load_run(tmp_path / "out")
    for name in ("step", "time", "x", "v", "total"):
        np.testing.assert_array_equal(getattr(again, name), getattr(run, name))
    assert again.scene["dt"] == DT and again.info["sources"][0]["copy"] == "kernels/trap.py"
    with pytest.raises(FileNotFoundError, match="no frames.npz"):
        simrun.load_run(tmp_path)


def test_an_array_the_run_did_not_save_is_an_error_naming_the_scene_key(
        scene: Path, tmp_path: Path) -> None:
    """outputs.positions / energies: false: run.x and run.total name the key that saves them,
    not None and then "'NoneType' object has no attribute 'shape'" (issue 44)."""
    import simrun

    run = simrun.run_scene(scene, tmp_path / "out", steps=200, threads=1, render=False,
                           sets=["outputs.positions=false", "outputs.energies=false"])
    for name, key in (("x", "outputs.positions"), ("total", "outputs.energies"),
                      ("energy", "outputs.energies"), ("f", "outputs.forces")):
        with pytest.raises(AttributeError, match=rf"saved no .*{key}=true"):
            getattr(run, name)
    assert run.v.shape == (3, 2, 2) and getattr(run, "x", None) is None
    assert "arrays: step, time, v;" in repr(run)
    with pytest.raises(AttributeError, match="outputs.positions"):
        run.atoms()


def test_atoms_carry_positions_velocities_masses_and_the_periodic_cell(scene: Path,
                                                                       tmp_path: Path) -> None:
    pytest.importorskip("ase")
    import simrun

    run = simrun.run_scene(scene, tmp_path / "out", steps=200, render=False)
    frames = run.atoms()
    assert len(frames) == len(run.step) == 3
    last = run.atoms(-1)
    np.testing.assert_array_equal(last.get_positions()[:, :2], run.x[-1])
    np.testing.assert_array_equal(last.get_positions()[:, 2], 0.0)
    np.testing.assert_allclose(last.get_velocities()[:, :2], run.v[-1], rtol=1e-12)
    np.testing.assert_array_equal(last.get_masses(), [2.0, 2.0])
    assert last.pbc.tolist() == [True, True, False]
    np.testing.assert_array_equal(last.cell.lengths(), [10.0, 10.0, 1.0])  # as the xyz
    assert last.info["step"] == 200 and frames[0].get_chemical_symbols() == ["X", "X"]


def test_library_runs_resume_with_the_cli_in_a_fresh_interpreter(scene: Path,
                                                                 tmp_path: Path) -> None:
    code = ("import sys, simrun\n"
            "assert 'numpy' not in sys.modules  # import simrun stays light\n"
            f"run = simrun.run_scene({str(scene)!r}, 'lib', steps=100, render=False)\n"
            "print(run.status, len(run.step), run.total[-1])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok 2 ")
    more = cli("resume", "lib", "--steps", "300", "-q", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    whole = cli("run", str(scene), "--steps", "300", "--out", "whole", "-q", "--no-render",
                cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    with np.load(tmp_path / "lib" / "frames.npz") as a, \
            np.load(tmp_path / "whole" / "frames.npz") as b:
        assert np.array_equal(a["x"], b["x"]) and a["step"].tolist() == [0, 100, 200, 300]


def test_run_scene_writes_what_simrun_run_writes_and_names_its_own_arguments(
        scene: Path, tmp_path: Path) -> None:
    import simrun
    from simrun.scene import SceneError

    run = simrun.run_scene(scene, tmp_path / "out", steps=200, threads=1)
    for name in ("first.png", "last.png", "energy.png", "animation.gif"):
        assert (tmp_path / "out" / name).is_file(), name
    assert run.info["pictures"] == "done"
    with pytest.raises(SceneError) as refused:
        simrun.run_scene(scene, tmp_path / "out", steps=200)
    message = str(refused.value)
    assert "overwrite=True" in message and "resume=True" in message and "out_dir" in message
    assert "--" not in message  # no CLI option the API does not have
    again = simrun.run_scene(scene, tmp_path / "out", steps=100, overwrite=True, render=False)
    assert again.step[-1] == 100 and not (tmp_path / "out" / "first.png").exists()


def test_print_run_gives_a_short_summary(scene: Path, tmp_path: Path) -> None:
    import simrun

    run = simrun.run_scene(scene, tmp_path / "out", steps=STEPS, render=False)
    text = repr(run)
    lines = text.splitlines()
    assert len(lines) <= 7 and len(text) < 800  # not every energy row, scene and run.json
    assert str(tmp_path / "out") in lines[0] and "N=2, dim=2" in text
    assert f"frames: {len(run.step)}, steps 0...{STEPS}" in text
    assert f"t = 0...{run.time[-1]:.6g}" in text
    assert f"total {run.total[-1]:.6g}" in text
    drift = run.info["energy_drift"]
    assert f"final {drift['relative_final']:+.3g}" in text and "units: reduced" in text


@pytest.mark.parametrize("boundary", ["{type: none}", "{type: reflect, low: [-5, -5], "
                                                      "high: [5, 5]}", None])
def test_trajectory_xyz_and_atoms_agree_on_the_cell(scene: Path, tmp_path: Path,
                                                    boundary: str | None) -> None:
    ase_io = pytest.importorskip("ase.io")
    import simrun

    if boundary is not None:  # None: the fixture's periodic box
        text = scene.read_text().splitlines()
        scene.write_text("\n".join(f"boundary: {boundary}" if line.startswith("boundary:")
                                   else line for line in text) + "\n")
    run = simrun.run_scene(scene, tmp_path / "out", steps=200, render=False)
    read = ase_io.read(tmp_path / "out" / "trajectory.xyz", index=":")
    ours = run.atoms()
    assert len(read) == len(ours) == 3
    for a, b in zip(read, ours):
        np.testing.assert_array_equal(a.cell.array, b.cell.array)
        assert a.pbc.tolist() == b.pbc.tolist()
        np.testing.assert_allclose(a.get_positions(), b.get_positions(), rtol=1e-15)
    if boundary == "{type: none}":  # no box made up from the particles' extent
        assert not read[0].cell.any() and read[0].pbc.tolist() == [False] * 3
        assert "Lattice" not in (tmp_path / "out" / "trajectory.xyz").read_text()
