"""Issue 19 items 5-7 through the real CLI: trajectory.xyz as ASE reads it (2-D periodic
pbc, momenta, masses, species), the energy-drift warning and --max-drift, thermo.csv's own
cadence and temperature, resumed bit for bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from simrun.outputs.thermo import read_thermo_csv
from simrun.render.energy import energy_figure

REPO = Path(__file__).resolve().parents[1]
GRAVITY = str(REPO / "scenes" / "gravity.yaml")
MOLECULE = str(REPO / "scenes" / "molecule.yaml")


def simrun(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def gas_scene(folder: Path, dim: int, box: float, count: int) -> Path:
    """A dilute gas in a periodic box (the energy is a negligible softened attraction: the
    test is about the file, not the forces)."""
    masses = [1.0 + (i % 3) for i in range(count)]
    species = ["Ar" if i % 2 else "Ne" for i in range(count)]
    path = folder / f"gas{dim}.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: gas{dim}
        seed: 4
        particles: {{count: {count}, dim: {dim}, mass: {masses}, species: {species}}}
        initial: {{type: random, low: {[0.0] * dim}, high: {[box] * dim}, temperature: 1.0}}
        energy:
          - kernel: {REPO}/kernels/gravity.py:gravity
            params: {{softening: 0.1, strength: 1e-9}}
        integrator: velocity_verlet
        boundary: {{type: periodic, low: {[0.0] * dim}, high: {[box] * dim}}}
        dt: 1e-3
        steps: 2
        outputs: {{every: 1}}
        """))
    return path


def minimum_image_pairs(x: np.ndarray, box: float, cutoff: float) -> int:
    """Ordered pairs (i != j) closer than ``cutoff`` under the minimum-image convention."""
    d = x[:, None, :] - x[None, :, :]
    d -= box * np.round(d / box)
    r = np.sqrt((d ** 2).sum(-1))
    np.fill_diagonal(r, np.inf)
    return int((r < cutoff).sum())


@pytest.mark.parametrize(("dim", "box", "count", "pbc"), [
    (2, 12.0, 120, [True, True, False]), (3, 6.0, 80, [True, True, True])])
def test_ase_reads_periodic_trajectory(tmp_path: Path, dim: int, box: float, count: int,
                                       pbc: list[bool]) -> None:
    ase_io = pytest.importorskip("ase.io")
    neighborlist = pytest.importorskip("ase.neighborlist")
    scene = gas_scene(tmp_path, dim, box, count)
    ran = simrun("run", str(scene), "--out", str(tmp_path / "run"), "--no-render", "-q",
                 "--allow-outside", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    atoms = ase_io.read(tmp_path / "run" / "trajectory.xyz", index=-1)
    with np.load(tmp_path / "run" / "frames.npz") as frames:
        x, v = frames["x"][-1], frames["v"][-1]
    assert atoms.pbc.tolist() == pbc
    assert np.allclose(np.diag(atoms.cell.array)[:dim], box)
    cutoff = 2.5  # beyond the 2-D system's z "thickness" of 1: self images would be found
    i_of_pairs = neighborlist.neighbor_list("i", atoms, cutoff)
    assert len(i_of_pairs) == minimum_image_pairs(x, box, cutoff) > 0
    assert np.allclose(atoms.get_masses(), [1.0 + (i % 3) for i in range(count)])
    assert np.allclose(atoms.get_velocities()[:, :dim], v, rtol=1e-14, atol=0)
    assert atoms.get_chemical_symbols() == ["Ar" if i % 2 else "Ne" for i in range(count)]
    try:  # OVITO, where installed (not a test dependency: a large download)
        from ovito.io import import_file
        from ovito.modifiers import CoordinationAnalysisModifier
    except ImportError:
        return
    pipeline = import_file(str(tmp_path / "run" / "trajectory.xyz"))
    pipeline.modifiers.append(CoordinationAnalysisModifier(cutoff=cutoff))
    data = pipeline.compute(pipeline.num_frames - 1)
    assert list(data.cell.pbc) == pbc
    assert int(np.sum(data.particles["Coordination"])) == len(i_of_pairs)


def test_drift_warns_records_and_max_drift_fails(tmp_path: Path) -> None:
    bad = simrun("run", GRAVITY, "--set", "dt=1.0", "--steps", "300", "--no-render", "--out",
                 str(tmp_path / "bad"), cwd=tmp_path)
    assert bad.returncode == 0, bad.stderr
    drift = json.loads((tmp_path / "bad" / "run.json").read_text())["energy_drift"]
    thermo = read_thermo_csv(tmp_path / "bad" / "thermo.csv")
    expected = np.abs(thermo["total"] - thermo["total"][0]).max() / abs(thermo["total"][0])
    assert drift["exceeded"] and drift["relative_largest"] == pytest.approx(expected, rel=1e-12)
    assert expected > 10  # the scene's dt is 1e-5: at dt 1 the energy explodes
    warnings = [line for line in bad.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{drift['relative_largest']:+.3g}" in warnings[0]
    assert "smaller dt" in warnings[0] and "--max-drift" in warnings[0]

    strict = simrun("run", GRAVITY, "--set", "dt=1.0", "--steps", "300", "--no-render",
                    "--max-drift", "0.5", "--out", str(tmp_path / "strict"), cwd=tmp_path)
    assert strict.returncode == 1 and "exceeds --max-drift 0.5" in strict.stderr

    good = simrun("run", GRAVITY, "--steps", "300", "--no-render", "--max-drift", "1e-3",
                  "--out", str(tmp_path / "good"), cwd=tmp_path)
    assert good.returncode == 0 and "warning" not in good.stderr
    assert not json.loads((tmp_path / "good" / "run.json").read_text())["energy_drift"][
        "exceeded"]


def test_drift_panel_after_a_blow_up_shows_the_real_change() -> None:
    """E0 = -400 then 4e14: the panel said "+1" (scaled by the run's largest |E|)."""
    total = np.array([-400.0, -401.0, 4e14])
    cols = {"step": np.arange(3.0), "time": np.arange(3.0), "kinetic": total + 500.0,
            "potential": np.full(3, -500.0), "total": total}
    title = energy_figure(cols).axes[-1].get_title(loc="right")
    assert f"final {(4e14 + 400) / 400:+.3g}" in title and "|E0|" in title
    assert "E0 -400" in title


def test_thermo_cadence_temperature_and_resume(tmp_path: Path) -> None:
    common = ("--set", "outputs.every=25", "--thermo", "7", "--no-render", "-q")
    whole = simrun("run", MOLECULE, "--steps", "60", "--out", str(tmp_path / "whole"), *common,
                   cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    thermo = read_thermo_csv(tmp_path / "whole" / "thermo.csv")
    assert thermo["step"].tolist() == [0, 7, 14, 21, 28, 35, 42, 49, 56, 60]
    info = json.loads((tmp_path / "whole" / "run.json").read_text())
    assert info["thermo"]["dof"] == 3 * 32 - 3  # bonded forces conserve momentum
    assert np.array_equal(thermo["temperature"], 2 * thermo["kinetic"] / 93)
    energy = read_thermo_csv(tmp_path / "whole" / "energy.csv")
    assert np.array_equal(energy["kinetic"][[0, -1]], thermo["kinetic"][[0, -1]])

    part = simrun("run", MOLECULE, "--steps", "30", "--out", str(tmp_path / "part"), *common,
                  cwd=tmp_path)
    assert part.returncode == 0, part.stderr
    resumed = simrun("run", MOLECULE, "--steps", "60", "--out", str(tmp_path / "part"),
                     "--resume", *common, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert (tmp_path / "part" / "thermo.csv").read_text() == \
        (tmp_path / "whole" / "thermo.csv").read_text()


def test_grad_differentiates_a_thermostat(tmp_path: Path) -> None:
    """`grad` differentiates the Langevin trajectory `run` makes (the noise fixed by the
    seed), and `--check` finds its central differences in agreement."""
    ran = simrun("grad", MOLECULE, "--steps", "10", "--wrt", "dt", "--wrt",
                 "integrator.friction", "--check", "--set",
                 "integrator={type: langevin, temperature: 1.0, friction: 1.0}", "--set",
                 "objective={builtin: kinetic, at: end}", "--out", str(tmp_path / "g"),
                 cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    check = json.loads((tmp_path / "g" / "gradients.json").read_text())["check"]
    assert check["ok"] and {c["key"] for c in check["rows"]} == {"dt", "integrator.friction"}


def test_a_run_that_blew_up_records_its_real_drift(tmp_path: Path) -> None:
    """molecule at dt 0.1 ends in NaN: run.json keeps the drift up to the last finite row,
    and the pictures drawn afterwards come from those numbers."""
    out = tmp_path / "nan"
    ran = simrun("run", MOLECULE, "--set", "dt=0.1", "--thermo", "1", "--out", str(out),
                 cwd=tmp_path)
    assert ran.returncode == 1 and "NaN" in ran.stderr
    info = json.loads((out / "run.json").read_text())
    rows = read_thermo_csv(out / "thermo.csv")
    worst = np.abs(rows["total"] - rows["total"][0]).max() / abs(rows["total"][0])
    assert info["status"] == "failed" and worst > 1e100
    assert info["energy_drift"]["relative_largest"] == pytest.approx(worst, rel=1e-12)
    drawn = simrun("render", str(out), cwd=tmp_path)
    assert drawn.returncode == 0 and (out / "energy.png").is_file()
    cols = read_thermo_csv(out / "thermo.csv")
    assert f"largest {worst:+.3g}" in energy_figure(cols).axes[-1].get_title(loc="right")
