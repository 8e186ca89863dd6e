"""``thermo.csv``: energies and temperature at their own cadence (LAMMPS's ``thermo N``), and
the relative energy drift read from them.

Why a cadence apart from the frames: energies sampled only with the frames alias fast motion
(a bond that vibrates ten times between frames looks still); a row costs a few numbers, a frame
a copy of every position.

Columns: ``step,time,kinetic,potential,total,temperature`` and, for a Nosé-Hoover run,
``conserved`` (the extended energy that the thermostatted dynamics keeps constant), then,
for a periodic box with an energy, ``pressure``. A scene with ``units:`` writes each
column's unit in the header (``time[fs]``, see ``simrun.outputs.units``); readers here take
the name before the bracket.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simrun.outputs.units import SYSTEMS, Units, column_name

THERMO_COLUMNS = ("step", "time", "kinetic", "potential", "total", "temperature")
THERMO_FILE = "thermo.csv"
LATER_COLUMNS = ("pressure",)  # added after folders were written: a resume fills them with nan
DRIFT_TOLERANCE = 0.05  # relative; beyond it a conservative run warns (see --max-drift)


class ThermoLog:
    """The rows of thermo.csv, kept in memory and written whole (atomically) at each flush."""

    def __init__(self, extra_columns: tuple[str, ...] = (),
                 units: Units = SYSTEMS["reduced"], dim: int = 3) -> None:
        self.columns = THERMO_COLUMNS + tuple(extra_columns)
        self.rows: list[tuple[float, ...]] = []
        self.units, self.dim = units, dim

    def add(self, step: int, time: float, kinetic: float, potential: float,
            temperature: float, *extra: float) -> None:
        self.rows.append((step, time, kinetic, potential, kinetic + potential, temperature,
                          *extra))

    def csv_text(self) -> str:
        lines = [",".join(self.columns)]  # as energy.csv's: the units are in run.json
        lines += [f"{int(r[0])}," + ",".join(repr(float(v)) for v in r[1:]) for r in self.rows]
        return "\n".join(lines) + "\n"

    def load_existing(self, path: Path, upto_step: int, every: int) -> None:
        """Take back the rows on disk up to ``upto_step`` that an uninterrupted run with
        cadence ``every`` also has (a stopped run's last row may be off the cadence)."""
        if not path.exists():
            return
        table = read_thermo_csv(path)
        steps = table["step"].astype(np.int64)
        keep = (steps <= upto_step) & (steps % every == 0)
        missing = [name for name in self.columns if name not in table]
        if set(missing) - set(LATER_COLUMNS):
            raise ValueError(f"{path.name} has the columns {sorted(table)}, not "
                             f"{list(self.columns)}")
        blank = np.full(len(steps), np.nan)  # a folder older than the column: not measured
        columns = [table.get(name, blank) for name in self.columns]
        self.rows = [(int(steps[i]), *(float(c[i]) for c in columns[1:]))
                     for i in np.flatnonzero(keep)]


def read_thermo_csv(path: str | Path) -> dict[str, np.ndarray]:
    """thermo.csv (or energy.csv) as 1-D float64 columns, also for a header-only file; the
    names without their units."""
    text = Path(path).read_text(encoding="utf-8")
    header, _, body = text.partition("\n")
    names = [column_name(n) for n in header.split(",")]
    rows = np.loadtxt(io.StringIO(body), delimiter=",", ndmin=2, dtype=np.float64) \
        if body.strip() else np.zeros((0, len(names)))
    rows = rows.reshape(-1, len(names))
    return {name: rows[:, j] for j, name in enumerate(names)}


@dataclass
class Drift:
    """How far the total (or conserved) energy moved from its first value.

    ``scale`` is what the change is divided by (``scale_name`` says which): |E0|, or, when
    E0 is nearly zero (kinetic and potential cancel), |K0| + |U0|; 1 when both are zero (the
    change is then absolute). Never the largest energy of the run: after a blow-up that would
    make every drift look like "+1".
    """

    quantity: str  # "total" or "conserved"
    first: float
    last: float
    largest: float  # the value of E furthest from E0
    scale: float
    scale_name: str
    step_of_largest: int

    @property
    def final(self) -> float:
        return (self.last - self.first) / self.scale

    @property
    def worst(self) -> float:
        """The signed relative change furthest from zero over the run."""
        return (self.largest - self.first) / self.scale

    def as_dict(self) -> dict[str, float | int | str]:
        return {"quantity": self.quantity, "first": self.first, "last": self.last,
                "relative_final": self.final, "relative_largest": self.worst,
                "step_of_largest": self.step_of_largest, "relative_to": self.scale_name}


def drift_scale(total0: float, kinetic0: float, potential0: float) -> tuple[float, str]:
    """What the energy change is measured against (see ``Drift``)."""
    spread = abs(kinetic0) + abs(potential0)
    if abs(total0) > 1e-6 * spread and total0 != 0:
        return abs(total0), "|E0|"
    if spread > 0:
        return spread, "|K0| + |U0|"
    return 1.0, "1 (E0 = K0 = U0 = 0)"


def measure_drift(columns: dict[str, np.ndarray], quantity: str = "total") -> Drift | None:
    """The drift of ``quantity`` over the rows (None without rows or that column); rows that
    are not finite (a run that blew up) are left out of "largest" but reported as "last"."""
    if quantity not in columns or not len(columns[quantity]):
        return None
    energy = columns[quantity]
    kinetic = columns.get("kinetic", np.zeros_like(energy))
    potential = columns.get("potential", np.zeros_like(energy))
    steps = columns.get("step", np.arange(len(energy), dtype=float))
    scale, name = drift_scale(float(energy[0]), float(kinetic[0]), float(potential[0]))
    change = np.abs(energy - energy[0])
    change[~np.isfinite(change)] = -1.0
    at = int(np.argmax(change))
    return Drift(quantity, float(energy[0]), float(energy[-1]), float(energy[at]), scale, name,
                 int(steps[at]))


def drift_exceeds(drift: Drift, tolerance: float) -> bool:
    return not math.isfinite(drift.worst) or abs(drift.worst) > tolerance
