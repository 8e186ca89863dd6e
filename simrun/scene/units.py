"""What a scene's numbers mean: LAMMPS's unit systems (``units: lj | real | metal | si``).

A scene in LAMMPS's ``real`` units gives lengths in Å, energies in kcal/mol, masses in
g/mol, time (dt, 1/friction, tau) in fs and temperatures in K; ``metal`` eV, g/mol, ps and
K; ``si`` m, J, kg, s and K. The equations then carry LAMMPS's constants (its
``Update::set_units``): k_B (``boltz``) turns a temperature into an energy, ``mvv2e`` turns
m v^2 into an energy (its reciprocal ``ftm2v`` turns F/m into an acceleration in length per
time^2), and ``nktv2p`` turns energy per volume into a pressure (atm in real, bar in metal).

simrun applies them in three places and nowhere else: the stepper's inertial masses are
m * mvv2e (so F/m is ftm2v F/m, 1/2 m v^2 is mvv2e/2 m v^2 in energy units, and a thermal
velocity sqrt(k_B T / (m mvv2e)) is in length per time); every target temperature enters
as k_B T; and the pressure is multiplied by nktv2p. ``reduced`` (the default) and ``lj``
have every constant 1.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Constants:
    """LAMMPS's conversion constants of one unit system (src/update.cpp, 22 Jul 2025)."""

    boltz: float = 1.0  # k_B: energy per temperature unit
    mvv2e: float = 1.0  # mass * velocity^2 -> energy; ftm2v = 1 / mvv2e
    nktv2p: float = 1.0  # energy / volume -> pressure
    skin: float = 0.3  # LAMMPS's default neighbor skin (Neighbor::set_units)

    @property
    def ftm2v(self) -> float:
        return 1.0 / self.mvv2e

    @property
    def unit(self) -> bool:
        """Whether every conversion constant is 1 (reduced and lj units)."""
        return self.boltz == self.mvv2e == self.nktv2p == 1.0


CONSTANTS = {
    "reduced": Constants(),
    "lj": Constants(),
    "real": Constants(boltz=0.0019872067, mvv2e=48.88821291 * 48.88821291,
                      nktv2p=68568.415, skin=2.0),
    "metal": Constants(boltz=8.617343e-5, mvv2e=1.0364269e-4, nktv2p=1.6021765e6, skin=2.0),
    "si": Constants(boltz=1.3806504e-23, skin=0.001),
}


def constants_of(units: str) -> Constants:
    """The constants of a scene's ``units`` (load refuses a name not in CONSTANTS)."""
    return CONSTANTS[units]
