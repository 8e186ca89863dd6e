"""What a scene's numbers are in (its ``units:``), for the labels of thermo.csv, run.json and
every picture.

simrun converts nothing: it integrates m dv/dt = F with k_B = 1 in whatever numbers the scene
gives. So a unit system here only names the units those equations imply. With LAMMPS's
names (lj, real, metal) length, energy and mass are LAMMPS's, but time is the unit that
length, mass and energy make together (LAMMPS converts to fs or ps; simrun does not:
``real`` gives 48.89 fs, ``metal`` 10.18 fs), and "temperature" is k_B T in energy units.
The default, ``reduced``, labels nothing and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

AVOGADRO = 6.02214076e23  # 1/mol
ELECTRONVOLT = 1.602176634e-19  # J
KCAL = 4184.0  # J
ANGSTROM = 1e-10  # m
GRAM_PER_MOL = 1e-3 / AVOGADRO  # kg


def _time_in_fs(length_m: float, mass_kg: float, energy_j: float) -> str:
    """The time unit length * sqrt(mass / energy) that m dv/dt = F implies, in fs."""
    return f"{length_m * math.sqrt(mass_kg / energy_j) * 1e15:.4g} fs"


DIMENSIONED = ("kinetic", "potential", "total", "conserved", "time", "temperature", "pressure",
               "x", "y", "z", "length", "energy")


@dataclass(frozen=True)
class Units:
    """Unit labels (empty in reduced units) of one system."""

    name: str
    length: str = ""
    time: str = ""
    energy: str = ""
    mass: str = ""
    temperature: str = ""  # of k_B T (k_B = 1): an energy

    @property
    def reduced(self) -> bool:
        return self.name == "reduced"

    def pressure(self, dim: int) -> str:
        """Energy per volume (per area in 2-D)."""
        if self.reduced:
            return ""
        return "Pa" if self.name == "si" and dim == 3 else f"{self.energy}/{self.length}{_power(dim)}"

    def of(self, column: str, dim: int = 3) -> str:
        """The unit of a thermo.csv column (or of x, y, z, dJ/dx0), '' when it has none."""
        if column in ("kinetic", "potential", "total", "conserved"):
            return self.energy
        return {"time": self.time, "temperature": self.temperature,
                "pressure": self.pressure(dim), "x": self.length, "y": self.length,
                "z": self.length, "length": self.length, "energy": self.energy}.get(column, "")

    def label(self, text: str, column: str, dim: int = 3) -> str:
        """An axis label: ``text [unit]``; in reduced units ``text [reduced]`` for a quantity
        that has a dimension, so that no axis of a picture looks unitless by omission."""
        if self.reduced and column in DIMENSIONED:
            return f"{text} [reduced]"
        unit = self.of(column, dim)
        return f"{text} [{unit}]" if unit else text

    def axis_label(self, text: str, column: str, dim: int = 3) -> str:
        """The same as ``label`` (every axis says its unit, the horizontal one too)."""
        return self.label(text, column, dim)

    def as_dict(self, dim: int = 3) -> dict[str, str]:
        """run.json's ``units``: the system and, outside reduced units, each quantity's."""
        if self.reduced:
            return {"system": "reduced", "note": "no units were given (scene key 'units')"}
        return {"system": self.name, "length": self.length, "time": self.time,
                "energy": self.energy, "mass": self.mass, "temperature": self.temperature,
                "pressure": self.pressure(dim)}


def _power(dim: int) -> str:
    return {1: "", 2: "²", 3: "³"}.get(dim, f"^{dim}")


SYSTEMS = {
    "reduced": Units("reduced"),
    "lj": Units("lj", "σ", "τ", "ε", "m", "ε"),
    "real": Units("real", "Å", _time_in_fs(ANGSTROM, GRAM_PER_MOL, KCAL / AVOGADRO),
                  "kcal/mol", "g/mol", "kcal/mol"),
    "metal": Units("metal", "Å", _time_in_fs(ANGSTROM, GRAM_PER_MOL, ELECTRONVOLT), "eV",
                   "g/mol", "eV"),
    "si": Units("si", "m", "s", "J", "kg", "J"),
}


def units_of(name: object) -> Units:
    """The labels of a unit system's name (anything unknown, or None: reduced)."""
    return SYSTEMS.get(name, SYSTEMS["reduced"]) if isinstance(name, str) else SYSTEMS["reduced"]


def column_name(header: str) -> str:
    """A thermo.csv header name without its unit: ``time[fs]`` -> ``time``."""
    return header.split("[", 1)[0].strip()
