"""What a scene's numbers are in (its ``units:``), for the labels of thermo.csv, run.json and
every picture.

With LAMMPS's names (lj, real, metal, si) every quantity is in LAMMPS's unit: ``real`` is Å,
kcal/mol, g/mol, fs, K and atm; ``metal`` Å, eV, g/mol, ps, K and bar; ``si`` m, J, kg, s, K
and Pa (``simrun.scene.units`` holds the constants that make the equations agree). ``lj``
is σ, ε, m, τ, with temperature k_B T in ε. The default, ``reduced``, labels nothing and
says so.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    temperature: str = ""  # K, or k_B T in energy units (lj)
    pressure_unit: str = ""  # LAMMPS's pressure unit; "" for energy per volume

    @property
    def reduced(self) -> bool:
        return self.name == "reduced"

    def pressure(self, dim: int) -> str:
        """Energy per volume (per area in 2-D)."""
        if self.reduced:
            return ""
        if self.pressure_unit:  # LAMMPS's, in 2-D too (its area times a unit depth)
            return self.pressure_unit
        return f"{self.energy}/{self.length}{_power(dim)}"

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
    "real": Units("real", "Å", "fs", "kcal/mol", "g/mol", "K", "atm"),
    "metal": Units("metal", "Å", "ps", "eV", "g/mol", "K", "bar"),
    "si": Units("si", "m", "s", "J", "kg", "K", "Pa"),
}


@dataclass(frozen=True)
class AseScale:
    """What one scene unit is in ASE's units (Å, eV, amu and its time Å sqrt(amu/eV)), by
    which trajectory.xyz and ``Run.atoms`` multiply, since ASE and OVITO read an extended
    XYZ's numbers as ASE's whatever the scene's units were."""

    length: float
    energy: float
    mass: float
    time: float

    @property
    def force(self) -> float:
        return self.energy / self.length

    @property
    def velocity(self) -> float:
        return self.length / self.time


# CODATA 2014, as ase.units (ASE's default): elementary charge, Avogadro's number, amu in kg
_E, _NAV, _AMU = 1.6021766208e-19, 6.022140857e23, 1.660539040e-27
_ASE_TIME = 1e-10 * (_AMU / _E) ** 0.5  # ASE's unit of time in seconds (about 10.18 fs)
ASE_SCALES = {  # lj and reduced are absent: their numbers are written as they are
    "real": AseScale(1.0, 4184.0 / _NAV / _E, 1.0, 1e-15 / _ASE_TIME),
    "metal": AseScale(1.0, 1.0, 1.0, 1e-12 / _ASE_TIME),
    "si": AseScale(1e10, 1.0 / _E, 1.0 / _AMU, 1.0 / _ASE_TIME),
}


def ase_scale(name: str) -> AseScale | None:
    """How a unit system's numbers become ASE's; None where they are taken as they are."""
    return ASE_SCALES.get(name)


def units_of(name: object) -> Units:
    """The labels of a unit system's name (anything unknown, or None: reduced)."""
    return SYSTEMS.get(name, SYSTEMS["reduced"]) if isinstance(name, str) else SYSTEMS["reduced"]


def column_name(header: str) -> str:
    """A thermo.csv header name without its unit: ``time[fs]`` -> ``time``."""
    return header.split("[", 1)[0].strip()
