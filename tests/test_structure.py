"""Structures from standard files through ASE (issue 47 item 3), through the real CLI: a
LAMMPS data file (atomic and charge styles), CIF, PDB and extended XYZ give the particles'
positions, species, masses, velocities and box; the first thermo row is checked against
the energies computed here from the file's own numbers. Bad inputs exit 2 with one
paragraph naming the scene's file:line."""

from __future__ import annotations

import json
from pathlib import Path

import ase.io
import numpy as np
import pytest
import yaml
from ase.build import bulk
from test_cli import simrun

from simrun.outputs.thermo import read_thermo_csv
from simrun.scene.units import CONSTANTS

REPO = Path(__file__).resolve().parent.parent
LOW, HIGH = (-1.0, 0.5, 2.0), (13.0, 14.5, 16.0)  # an origin that is not 0
EPS, SIGMA = {"Ar": 0.238, "Kr": 0.32}, {"Ar": 3.4, "Kr": 3.6}
CUT = 6.5


def _atoms_block(rng: np.random.Generator, n: int, charge: bool) -> tuple[list[str], dict]:
    side = np.subtract(HIGH, LOW)
    grid = np.indices((3, 3, 3)).reshape(3, -1).T[:n]  # 3.5 Å apart at least: no overlaps
    x = np.asarray(LOW) + (grid + 0.5) * side / 3 + rng.uniform(-0.3, 0.3, (n, 3))
    types = np.where(np.arange(n) % 4 == 3, 2, 1)
    v = rng.normal(0.0, 0.003, (n, 3))
    rows = [f"{i + 1} {t}" + (f" {0.1 * (-1) ** i}" if charge else "")
            + " " + " ".join(repr(float(c)) for c in x[i]) for i, t in enumerate(types)]
    return rows, {"x": x, "types": types, "v": v}


def _data_file(folder: Path, n: int = 20, charge: bool = False, tilt: bool = False) -> dict:
    rng = np.random.default_rng(3)
    rows, values = _atoms_block(rng, n, charge)
    header = [f"{n} atoms", "2 atom types", ""] + [
        f"{lo!r} {hi!r} {a}lo {a}hi" for lo, hi, a in zip(LOW, HIGH, "xyz")]
    if tilt:
        header.append("1.5 0.0 0.0 xy xz yz")
    text = "\n".join(["LAMMPS data file (Ar/Kr)", "", *header, "", "Masses", "",
                      "1 39.948", "2 83.798", "",
                      f"Atoms # {'charge' if charge else 'atomic'}", "", *rows, "",
                      "Velocities", "",
                      *[f"{i + 1} " + " ".join(repr(float(c)) for c in values["v"][i])
                        for i in range(n)], ""])
    (folder / "mix.data").write_text(text)
    return values


def _scene(folder: Path, path: str, extra: str = "", units: str = "real",
           mass: str = "") -> Path:
    (folder / "kernels").mkdir(exist_ok=True)
    (folder / "kernels" / "lj.py").write_text((REPO / "kernels" / "lj.py").read_text())
    pairs = {name: "{Ar: %r, Kr: %r}" % (table["Ar"], table["Kr"])
             for name, table in (("epsilon", EPS), ("sigma", SIGMA))}
    text = f"""version: 2
units: {units}
particles: {{{mass}}}
initial: {{type: file, path: {path}{extra}}}
neighbors: {{cutoff: {CUT}, skin: 0.5}}
energy:
  - kernel: kernels/lj.py:lj_species
    mix: geometric
    params:
      epsilon: {pairs['epsilon']}
      sigma: {pairs['sigma']}
      cutoff: {{Ar: {CUT}, Kr: {CUT}}}
integrator: velocity_verlet
dt: 1.0
steps: 2
outputs: {{every: 1, positions: true, velocities: true}}
"""
    scene = folder / "scene.yaml"
    scene.write_text(text)
    return scene


def _lj_energy(x: np.ndarray, names: list[str], low, high) -> float:
    """U of the cut (unshifted) LJ mixture, geometric mixing, minimum image, by hand."""
    side = np.subtract(high, low)
    total = 0.0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            d = x[i] - x[j]
            d -= side * np.round(d / side)
            r2 = float(d @ d)
            if r2 < CUT * CUT:
                eps = np.sqrt(EPS[names[i]] * EPS[names[j]])
                sig = np.sqrt(SIGMA[names[i]] * SIGMA[names[j]])
                s6 = (sig * sig / r2) ** 3
                total += 4 * eps * (s6 * s6 - s6)
    return total


@pytest.mark.parametrize("charge", [False, True])
def test_lammps_data_file_gives_atoms_species_masses_velocities_and_box(
        tmp_path: Path, charge: bool) -> None:
    values = _data_file(tmp_path, charge=charge)
    extra = ", atom_style: charge" if charge else ""
    _scene(tmp_path, "mix.data", extra)
    done = simrun("run", "scene.yaml", "--out", "o", "-q", "--no-render", cwd=tmp_path,
                  timeout=300)
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load((tmp_path / "o" / "scene.yaml").read_text())
    names = ["Ar" if t == 1 else "Kr" for t in values["types"]]
    masses = np.where(values["types"] == 1, 39.948, 83.798)
    assert resolved["particles"]["count"] == 20 and resolved["particles"]["dim"] == 3
    assert resolved["particles"]["species"] == names
    np.testing.assert_allclose(resolved["particles"]["mass"], masses, rtol=1e-14)
    assert resolved["boundary"] == {"type": "periodic", "low": list(LOW), "high": list(HIGH)}
    frames = np.load(tmp_path / "o" / "frames.npz")
    np.testing.assert_allclose(frames["x"][0], values["x"], rtol=1e-14, atol=1e-13)
    np.testing.assert_allclose(frames["v"][0], values["v"], rtol=1e-14, atol=1e-17)
    row = read_thermo_csv(tmp_path / "o" / "thermo.csv")
    real = CONSTANTS["real"]
    kinetic = 0.5 * real.mvv2e * float(np.sum(masses[:, None] * values["v"] ** 2))
    assert row["kinetic"][0] == pytest.approx(kinetic, rel=1e-12)
    assert row["temperature"][0] == pytest.approx(2 * kinetic / (57 * real.boltz), rel=1e-12)
    assert row["potential"][0] == pytest.approx(
        _lj_energy(values["x"], names, LOW, HIGH), rel=1e-11)
    first = ase.io.read(tmp_path / "o" / "trajectory.xyz", index=0)
    assert first.get_chemical_symbols() == names  # the species back out, for OVITO and ASE


@pytest.mark.parametrize("fmt", ["cif", "pdb", "extxyz", "xyz"])
def test_ase_formats_give_the_crystal_and_its_cell(tmp_path: Path, fmt: str) -> None:
    crystal = bulk("Ar", "fcc", a=5.26, cubic=True).repeat(3)  # 108 atoms, 15.78 Å
    crystal.symbols[::4] = "Kr"
    suffix = {"cif": "cif", "pdb": "pdb", "extxyz": "xyz", "xyz": "xyz"}[fmt]
    ase.io.write(tmp_path / f"crystal.{suffix}", crystal,
                 format={"pdb": "proteindatabank", "xyz": "extxyz"}.get(fmt, fmt))
    extra = ", format: extxyz" if fmt == "extxyz" else ""  # "xyz": none, its Lattice says
    _scene(tmp_path, f"crystal.{suffix}", extra)
    done = simrun("run", "scene.yaml", "--out", "o", "-q", "--no-render", cwd=tmp_path,
                  timeout=300)
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load((tmp_path / "o" / "scene.yaml").read_text())
    assert resolved["particles"]["species"] == crystal.get_chemical_symbols()
    np.testing.assert_allclose(resolved["particles"]["mass"], crystal.get_masses(), rtol=1e-6)
    np.testing.assert_allclose(resolved["boundary"]["high"], np.diag(crystal.cell), rtol=1e-6)
    x0 = np.load(tmp_path / "o" / "frames.npz")["x"][0]
    np.testing.assert_allclose(x0, crystal.positions, atol=2e-3)  # PDB keeps 3 decimals
    potential = read_thermo_csv(tmp_path / "o" / "thermo.csv")["potential"][0]
    assert potential == pytest.approx(_lj_energy(x0, crystal.get_chemical_symbols(), (0, 0, 0),
                                                 np.diag(crystal.cell)), rel=1e-10)


def _refused(tmp_path: Path, *words: str, line: int = 4) -> str:
    done = simrun("check", "scene.yaml", cwd=tmp_path, timeout=120)
    err = done.stderr
    assert done.returncode == 2, (done.returncode, err)
    assert "Traceback" not in err and err.count("\n") <= 2, err
    assert f"scene.yaml:{line}:" in err, err
    for word in words:
        assert word in err, (word, err)
    return err


def test_bad_structures_are_one_paragraph_and_exit_2(tmp_path: Path) -> None:
    _data_file(tmp_path, tilt=True)
    _scene(tmp_path, "mix.data")
    _refused(tmp_path, "triclinic", "mix.data")
    (tmp_path / "junk.cif").write_text("data_x\n_cell_length_a nonsense\n")
    _scene(tmp_path, "junk.cif")
    _refused(tmp_path, "ASE cannot read", "junk.cif")
    _scene(tmp_path, "junk.cif", ", format: no-such-format")
    _refused(tmp_path, "format", "junk.cif")
    slab = bulk("Ar", "fcc", a=5.26, cubic=True).repeat(3)
    slab.pbc = (True, True, False)
    ase.io.write(tmp_path / "slab.xyz", slab, format="extxyz")
    _scene(tmp_path, "slab.xyz", ", format: extxyz")
    _refused(tmp_path, "periodic", "slab.xyz")
    _data_file(tmp_path)
    _scene(tmp_path, "mix.data", mass="mass: {Ar: 39.9, Xe: 131.3}")
    _refused(tmp_path, "Xe", "Ar, Kr", line=3)
    _scene(tmp_path, "mix.data", mass="species: {Ar: 20}")
    _refused(tmp_path, "species", "structure file", line=3)
    _scene(tmp_path, "mix.data", units="kelvin")
    _refused(tmp_path, "kelvin", "real", line=2)
    _scene(tmp_path, "mix.data", mass="count: 21")
    _refused(tmp_path, "21", "20 atoms")


def test_resolved_scene_of_a_structure_reloads(tmp_path: Path) -> None:
    """The job folder's scene.yaml (count, species and masses written out, the box too)
    runs again to the same first thermo row."""
    _data_file(tmp_path)
    _scene(tmp_path, "mix.data")
    first = simrun("run", "scene.yaml", "--out", "a", "-q", "--no-render", cwd=tmp_path,
                   timeout=300)
    assert first.returncode == 0, first.stderr
    again = simrun("run", "a/scene.yaml", "--out", "b", "-q", "--no-render", cwd=tmp_path,
                   timeout=300)
    assert again.returncode == 0, again.stderr
    a, b = (read_thermo_csv(tmp_path / f / "thermo.csv") for f in "ab")
    assert list(a["total"]) == list(b["total"])
    info = json.loads((tmp_path / "b" / "run.json").read_text())
    assert info["units"]["temperature"] == "K"
