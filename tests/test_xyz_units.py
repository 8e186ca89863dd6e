"""trajectory.xyz in ASE's units (issue 47): ASE and OVITO read an extended XYZ's energy,
forces and momenta as eV, eV/Å and amu Å per ASE time unit whatever the scene's units, so a
real or metal scene's file is converted. Checked against the run's own frames.npz and
energy.csv converted by hand from SI's constants, through the real CLI and ``ase.io.read``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from test_cli import simrun
from test_units import EPS_KCAL, MASS, REPO, _argon

from simrun.api import load_run
from simrun.outputs import read_energy_csv
from simrun.outputs.xyz import format_frame, read_xyz, velocities_of
from simrun.scene import load_scene
from simrun.scene.initial import initial_state

ase_io = pytest.importorskip("ase.io")

AVOGADRO, ELECTRONVOLT, AMU = 6.02214076e23, 1.602176634e-19, 1.66053906660e-27
# ASE's unit of time, Å sqrt(amu/eV), in seconds (about 10.18 fs)
ASE_TIME = 1e-10 * (AMU / ELECTRONVOLT) ** 0.5
# the scene's energy unit in eV and its time unit in seconds
SCENE = {"real": (4184.0 / AVOGADRO / ELECTRONVOLT, 1e-15), "metal": (1.0, 1e-12)}
CODATA = 1e-7  # ASE's constants are CODATA 2014's, these 2018's: they differ by parts in 1e8
# LAMMPS's mvv2e (in the kinetic energy) dates from CODATA 2006: parts in 1e6
LAMMPS_CODATA = 1e-5


def _scene(units: str) -> str:
    """The argon scene of test_units in ``units``, with forces saved; metal's is real's
    with energies in eV (epsilon) and times in ps (dt, 1/friction)."""
    text = _argon("lj" if units == "lj" else "real", "langevin")
    text = text.replace("velocities: true}", "velocities: true, forces: true}")
    text = text.replace("steps: 150", "steps: 40").replace("every: 50", "every: 20")
    if units != "metal":
        return text
    lines = []
    for line in text.replace("units: real", "units: metal").splitlines():
        if line.startswith("dt: "):
            line = f"dt: {float(line[4:]) / 1000!r}"
        if "friction: " in line:
            friction = line.split("friction: ")[1].split("}")[0]
            line = line.replace(friction, repr(float(friction) * 1000))
        lines.append(line.replace(f"epsilon: {EPS_KCAL!r}",
                                  f"epsilon: {EPS_KCAL * SCENE['real'][0]!r}"))
    return "\n".join(lines) + "\n"


def _run(tmp_path: Path, units: str) -> Path:
    (tmp_path / "kernels").mkdir(exist_ok=True)
    (tmp_path / "kernels" / "lj.py").write_text((REPO / "kernels" / "lj.py").read_text())
    (tmp_path / f"{units}.yaml").write_text(_scene(units))
    done = simrun("run", f"{units}.yaml", "--out", units, "-q", "--no-render", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path / units


@pytest.mark.parametrize("units", ["real", "metal"])
def test_ase_reads_trajectory_xyz_in_its_own_units(tmp_path: Path, units: str) -> None:
    out = _run(tmp_path, units)
    energy_unit, time_unit = SCENE[units]
    with np.load(out / "frames.npz") as frames:
        x, v, f = frames["x"], frames["v"], frames["f"]
    table = read_energy_csv(out / "energy.csv")
    images = ase_io.read(out / "trajectory.xyz", index=":")
    assert len(images) == len(x) == 3
    for i, atoms in enumerate(images):
        assert atoms.get_positions() == pytest.approx(x[i], rel=1e-15, abs=1e-12)  # Å
        assert atoms.get_masses() == pytest.approx(np.full(len(x[i]), MASS), rel=1e-15)
        assert atoms.get_potential_energy() == pytest.approx(
            table["potential"][i] * energy_unit, rel=CODATA)
        assert atoms.get_forces() == pytest.approx(f[i] * energy_unit, rel=CODATA,
                                                   abs=CODATA * np.abs(f[i]).max() * energy_unit)
        speed = time_unit / ASE_TIME  # Å per time unit in Å per ASE time unit: 1/time unit
        assert atoms.get_velocities() == pytest.approx(v[i] / speed, rel=CODATA,
                                                       abs=CODATA * np.abs(v[i]).max() / speed)
        # the kinetic energy ASE computes is the run's (LAMMPS's mvv2e inside), in eV
        assert atoms.get_kinetic_energy() == pytest.approx(
            table["kinetic"][i] * energy_unit, rel=LAMMPS_CODATA)
    # simrun's own reader (an initial state from this file) gives the scene's numbers back
    frame = read_xyz(out / "trajectory.xyz")[-1]
    assert frame["pos"] == pytest.approx(x[-1], rel=1e-14, abs=1e-12)
    assert velocities_of(frame) == pytest.approx(v[-1], rel=1e-14, abs=1e-14)
    assert frame["forces"] == pytest.approx(f[-1], rel=1e-14, abs=1e-14 * np.abs(f).max())


def test_lj_trajectory_xyz_keeps_the_scene_numbers(tmp_path: Path) -> None:
    out = _run(tmp_path, "lj")
    with np.load(out / "frames.npz") as frames:
        x, v, f = frames["x"], frames["v"], frames["f"]
    text = (out / "trajectory.xyz").read_text()
    assert "scene_units" not in text
    frame = read_xyz(out / "trajectory.xyz")[-1]
    assert np.array_equal(frame["pos"], x[-1]) and np.array_equal(frame["forces"], f[-1])
    assert np.array_equal(frame["momenta"], v[-1])  # masses 1: momenta are v, bit for bit


def test_run_atoms_are_in_ase_units_as_trajectory_xyz(tmp_path: Path) -> None:
    out = _run(tmp_path, "real")
    made, read = load_run(out).atoms(-1), ase_io.read(out / "trajectory.xyz", index=-1)
    with np.load(out / "frames.npz") as frames:
        v = frames["v"][-1]
    speed = SCENE["real"][1] / ASE_TIME
    assert made.get_velocities() == pytest.approx(v / speed, rel=CODATA,
                                                  abs=CODATA * np.abs(v).max() / speed)
    for name in ("get_positions", "get_masses", "get_velocities"):
        assert getattr(made, name)() == pytest.approx(getattr(read, name)(), rel=1e-14,
                                                      abs=1e-14)
    assert made.cell.array == pytest.approx(read.cell.array, rel=1e-15)


def test_a_periodic_trajectory_xyz_starts_a_scene_with_its_masses_box_and_state(
        tmp_path: Path) -> None:
    """A real-units run's trajectory.xyz (no ``format:``: its Lattice makes it extended
    XYZ, read through ASE) gives the next scene its count, masses, box, positions and
    velocities, back in real units."""
    out = _run(tmp_path, "real")
    with np.load(out / "frames.npz") as frames:
        x, v = frames["x"][-1], frames["v"][-1]
    resolved = yaml.safe_load((out / "scene.yaml").read_text())
    lines = []
    for line in _scene("real").splitlines():
        if line.startswith("particles:"):
            line = "particles: {}"
        if line.startswith("initial:"):
            line = "initial: {type: file, path: real/trajectory.xyz}"
        if line.lstrip().startswith(("boundary:", "spacing:", "temperature:")):
            continue
        lines.append(line.replace("steps: 40", "steps: 1"))
    (tmp_path / "next.yaml").write_text("\n".join(lines) + "\n")
    done = simrun("run", "next.yaml", "--out", "next", "-q", "--no-render", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = yaml.safe_load((tmp_path / "next" / "scene.yaml").read_text())
    assert again["particles"]["count"] == len(x)
    assert np.all(np.asarray(again["particles"]["mass"]) == MASS)
    assert again["boundary"]["type"] == "periodic"
    assert again["boundary"]["high"] == pytest.approx(resolved["boundary"]["high"], rel=1e-15)
    with np.load(tmp_path / "next" / "frames.npz") as frames:
        assert frames["x"][0] == pytest.approx(x, rel=1e-15, abs=1e-12)
        assert frames["v"][0] == pytest.approx(v, rel=1e-14, abs=1e-14 * np.abs(v).max())


def test_a_periodic_extended_xyz_keeps_species_that_are_no_element(tmp_path: Path) -> None:
    """Kob-Andersen's A and B are ASE's X (Z 0) in trajectory.xyz: the species column names
    them, and the masses and the box come with them (lj units: numbers as written)."""
    rng = np.random.default_rng(5)
    x, v = rng.uniform(0.0, 6.0, (8, 3)), rng.normal(0.0, 1.0, (8, 3))
    names = ["A", "B", "A", "A", "B", "A", "A", "A"]
    masses = np.where(np.array(names) == "A", 1.0, 0.5)
    (tmp_path / "ab.xyz").write_text(format_frame(
        x, step=0, time=0.0, cell=np.diag([6.0, 6.5, 7.0]), origin=np.zeros(3),
        pbc=(True, True, True), masses=masses, species=names, v=v))
    path = tmp_path / "ab.yaml"
    path.write_text(f"""version: 2
units: lj
particles: {{}}
initial: {{type: file, path: ab.xyz}}
neighbors: {{cutoff: 2.5, skin: 0.2}}
energy:
  - kernel: {REPO}/kernels/lj.py:lj_species
    mix: arithmetic
    params: {{epsilon: {{A: 1.0, B: 0.5}}, sigma: {{A: 1.0, B: 0.88}}}}
dt: 0.001
steps: 1
""")
    scene = load_scene(path, allow_outside=True)
    assert list(scene.particles.species) == names
    assert scene.particles.masses == tuple(masses)
    assert scene.boundary.type == "periodic" and tuple(scene.boundary.high) == (6.0, 6.5, 7.0)
    x0, v0 = initial_state(scene)
    assert np.array_equal(x0, x) and v0 == pytest.approx(v, rel=1e-15, abs=1e-15)
