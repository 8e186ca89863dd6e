"""Structures from standard files through ASE (issue 47 item 3): ``initial: {type: file}``
with a LAMMPS data file, PDB, CIF, extended XYZ (given ``format:``) or anything else
``ase.io.read`` knows.

A structure gives the particles' positions, species (chemical symbols; a LAMMPS data file's
types are named by the elements ASE finds from their masses, else H, He, ... by type), masses
(a data file's ``Masses``, an extended XYZ's ``masses`` column; in real, metal and si units
also the elements' standard masses), velocities where the file has them, and its cell: an
orthogonal cell periodic in every direction becomes the scene's periodic box unless the scene
gives one. A triclinic or partly periodic cell is refused (simrun's boxes are orthogonal).

Numbers are taken in the scene's ``units``: a LAMMPS data file holds them already (its
origin, masses and velocities are read as written; positions and the box through ASE in
metal units, whose length is ASE's own); other formats hold Å, amu and ASE's velocity
unit, converted to real, metal or si units and taken as they are in lj and reduced units
(simrun's trajectory.xyz of a real, metal or si scene is written in ASE's units too). An
``.xyz`` or ``.extxyz`` without ``format:`` is read as extended XYZ through ASE when its
first comment line has a ``Lattice`` periodic in every direction (masses, cell and species
then come from it; a species column that is no chemical symbol, as simrun writes with
``Z`` and ``tags``, keeps its names); other ``.xyz``, and ``.npz``, stay simrun's own
readers (positions, velocities and species only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from yaml.nodes import Node

from simrun.outputs.units import ase_scale
from simrun.outputs.xyz import parse_info, read_xyz
from simrun.scene.errors import error_at, shorten, shorten_path

OWN_SUFFIXES = (".npz", ".xyz", ".extxyz")  # read by simrun itself (scene/initial.py)
LAMMPS_SUFFIXES = (".data", ".lmp", ".lammps")  # LAMMPS data files by their usual names
ATOM_STYLES = ("atomic", "charge", "full", "bond", "angle", "molecular")
PHYSICAL = ("real", "metal", "si")  # units ASE converts; lj and reduced take numbers as read
TILT = 1e-12  # off-diagonal cell entries beyond this fraction of the longest side: triclinic


@dataclass(frozen=True)
class Structure:
    """What a structure file gives, in the scene's units."""

    positions: np.ndarray  # (N, 3)
    species: tuple[str, ...]
    masses: tuple[float, ...] | None  # None: the file gives none
    velocities: np.ndarray | None
    low: tuple[float, ...] | None  # the periodic box; None when the file has no cell
    high: tuple[float, ...] | None

    @property
    def count(self) -> int:
        return len(self.positions)


class StructureError(ValueError):
    """A file simrun cannot take as a structure: ``what`` and how to fix it."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what, self.fix = what, fix


def periodic_extended_xyz(path: Path) -> bool:
    """Whether an .xyz file's first comment line gives a ``Lattice`` periodic in every
    direction (``pbc`` absent, as ASE reads it, or all T): a 3-D periodic structure."""
    if path.suffix.lower() not in (".xyz", ".extxyz"):
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as text:
            next(text, None)
            comment = next(text, "")
    except OSError:
        return False  # the reader that follows says why
    info = parse_info(comment)
    return "Lattice" in info and all(flag in ("T", "True") for flag in
                                     info.get("pbc", "T T T").split())


def uses_ase(path: Path, fmt: str | None) -> bool:
    """Whether ``initial.path`` is read through ASE (a ``format:``, a suffix simrun does
    not read itself, or an extended XYZ with a periodic cell)."""
    return fmt is not None or path.suffix.lower() not in OWN_SUFFIXES \
        or periodic_extended_xyz(path)


def ase_format(path: Path, fmt: str | None) -> str | None:
    """The ASE format name: the scene's, lammps-data for a data file's usual suffixes,
    extxyz for a periodic extended XYZ, else None (ASE guesses from the name and contents)."""
    if fmt is not None:
        return fmt
    if path.suffix.lower() in LAMMPS_SUFFIXES:
        return "lammps-data"
    return "extxyz" if periodic_extended_xyz(path) else None


def _read_atoms(path: Path, fmt: str | None, frame: int, atom_style: str | None,
                file_units: str | None):
    try:
        import ase.io  # optional dependency: pip install ase (the test extra has it)
    except ImportError:
        raise StructureError("reading it needs ASE, which is not installed",
                             "Install it (pip install ase), or give an .npz or extended-XYZ "
                             "file") from None
    options = {}
    if fmt == "lammps-data":
        options = {"units": file_units or "metal", "atom_style": atom_style}
    try:
        return ase.io.read(path, index=frame, format=fmt, **options)
    except ase.io.formats.UnknownFileTypeError as exc:
        raise StructureError(f"ASE does not know its format ({shorten(str(exc), 120)})",
                             "Give 'format:' with an ase.io format name, e.g. lammps-data, "
                             "proteindatabank, cif or extxyz") from None
    except Exception as exc:  # noqa: BLE001 - any parser failure of a foreign file is bad input
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise StructureError(f"ASE cannot read it as {fmt or 'the format it guessed'} "
                             f"({shorten(reason, 200)})",
                             "Check the file, or give its format with 'format:' (and for a "
                             "LAMMPS data file its 'atom_style:')") from None


def _convert(values: np.ndarray, quantity: str, target: str | None) -> np.ndarray:
    """ASE's numbers in the ``target`` units, by the factors trajectory.xyz is written with
    (so that simrun's own file reads back to its numbers; g/mol is amu, as in LAMMPS)."""
    scale = ase_scale(target) if target is not None else None
    if scale is None:
        return np.asarray(values, float)
    return np.asarray(values, float) / getattr(scale, {"distance": "length"}.get(quantity,
                                                                                quantity))


def _species(atoms, path: Path, fmt: str | None, frame: int) -> tuple[str, ...]:
    """The chemical symbols, or an extended XYZ's own species column where ASE made ``X``
    of a name that is no chemical symbol (simrun's Kob-Andersen A and B, with ``Z`` 0)."""
    symbols = tuple(atoms.get_chemical_symbols())
    if fmt != "extxyz" or "X" not in symbols:
        return symbols
    try:
        names = read_xyz(path)[frame].get("species")
    except (ValueError, IndexError):
        return symbols
    return tuple(names) if names is not None and len(names) == len(symbols) else symbols


@dataclass
class _DataNumbers:
    """A LAMMPS data file's own numbers that ASE converts (a round trip through its units
    can move them by an ulp): the box origin, masses per type and velocities per id."""

    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    masses: dict[int, float] | None = None
    velocities: dict[int, tuple[float, ...]] | None = None


def _data_numbers(path: Path) -> _DataNumbers:
    """The origin (``xlo ylo zlo``), ``Masses`` and ``Velocities`` as written. ASE has
    already read the file, so its lines are well formed; a section keyed otherwise (type
    labels) is left to ASE's values (None)."""
    low: dict[str, float] = {}
    sections: dict[str, dict] = {"Masses": {}, "Velocities": {}}
    section, usable = None, {"Masses": True, "Velocities": True}
    with path.open(encoding="utf-8", errors="replace") as text:
        next(text, None)  # the title line
        for line in text:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if words[0][0].isalpha():
                section = words[0]
                continue
            if section is None:
                match = re.match(r"\s*(\S+)\s+\S+\s+([xyz])lo\s+[xyz]hi\b", line)
                if match:
                    low[match.group(2)] = float(match.group(1))
            elif section in sections and usable[section]:
                try:
                    key = int(words[0])
                    values = tuple(float(w) for w in words[1:4 if section == "Velocities"
                                                            else 2])
                except ValueError:
                    usable[section] = False
                    continue
                sections[section][key] = values
    return _DataNumbers(tuple(low.get(axis, 0.0) for axis in "xyz"),
                        {k: v[0] for k, v in sections["Masses"].items()}
                        if usable["Masses"] and sections["Masses"] else None,
                        sections["Velocities"] if usable["Velocities"]
                        and sections["Velocities"] else None)


def _box(atoms, data: _DataNumbers | None, target: str | None
         ) -> tuple[tuple[float, ...] | None, tuple[float, ...] | None]:
    pbc = [bool(p) for p in atoms.pbc]
    if not any(pbc):
        return None, None
    if not all(pbc):
        raise StructureError(f"its cell is periodic along {'xyz'[pbc.index(True)]} but not "
                             "in every direction (pbc " + " ".join("TF"[not p] for p in pbc)
                             + "), and simrun's periodic box is periodic in all three",
                             "Make the file's cell periodic in every direction, or in none "
                             "(pbc F F F) and give the scene its own 'boundary:'")
    cell = np.asarray(atoms.cell.array, float)
    sides = np.diag(cell)
    if np.any(np.abs(cell - np.diag(sides)) > TILT * np.abs(cell).max()) or np.any(sides <= 0):
        raise StructureError("its cell is triclinic (tilted: the cell vectors are "
                             f"{shorten(str(cell.round(6).tolist()), 160)}), and simrun's "
                             "periodic boxes are orthogonal",
                             "Give an orthogonal cell (a LAMMPS data file without 'xy xz yz'),"
                             " or an orthogonal supercell of the structure")
    if data is not None:
        low = data.origin  # the file's own numbers: the scene's units
    else:
        low = tuple(float(v) for v in _convert(atoms.get_celldisp().ravel(), "distance",
                                                target))
    length = _convert(sides, "distance", target)
    return low, tuple(float(lo + side) for lo, side in zip(low, length))


def read_structure(path: Path, frame: int, fmt: str | None, atom_style: str | None,
                   units: str) -> Structure:
    """The structure in ``path`` in the scene's ``units``; StructureError for a file simrun
    cannot take (unreadable, a triclinic or partly periodic cell, no atoms)."""
    fmt = ase_format(path, fmt)
    physical = units if units in PHYSICAL else None
    # a data file holds the scene's numbers: read in metal units (Å is ASE's length, so
    # positions and the box come back as written) and its masses and velocities as written
    target = "metal" if fmt == "lammps-data" else physical
    atoms = _read_atoms(path, fmt, frame, atom_style, target)
    if isinstance(atoms, list) or len(atoms) == 0:
        raise StructureError("it holds no atoms", "Give a file with at least one atom")
    data = _data_numbers(path) if fmt == "lammps-data" else None
    explicit = atoms.has("masses")
    masses = None
    if data is not None and data.masses is not None and "type" in atoms.arrays:
        masses = tuple(data.masses[int(t)] for t in atoms.arrays["type"])
    elif explicit or physical is not None:
        masses = tuple(float(m) for m in _convert(atoms.get_masses(), "mass", target))
    velocities = None
    if data is not None and data.velocities is not None and "id" in atoms.arrays:
        velocities = np.array([data.velocities[int(i)] for i in atoms.arrays["id"]], float)
    elif atoms.has("momenta"):
        velocities = _convert(atoms.get_velocities(), "velocity", target)
    low, high = _box(atoms, data, target)
    return Structure(_convert(atoms.get_positions(), "distance", target),
                     _species(atoms, path, fmt, frame), masses, velocities, low, high)


def structure_at(node: Node, path: Path, frame: int, fmt: str | None,
                 atom_style: str | None, units: str) -> Structure:
    """read_structure, its errors as one paragraph at the scene's ``initial.path``."""
    try:
        return read_structure(path, frame, fmt, atom_style, units)
    except StructureError as exc:
        raise error_at(node, f"cannot take the structure in '{shorten_path(path.name)}': "
                       f"{exc.what}", exc.fix) from None
    except OSError as exc:
        raise error_at(node, f"cannot read '{shorten_path(path.name)}' "
                       f"({shorten(exc.strerror or str(exc))})", "Check the file") from None

