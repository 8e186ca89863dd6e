"""Everything a run writes into its folder, kept valid at every instant.

Frames are held in memory and the files are rewritten atomically at each ``flush`` (the
stepper flushes at most about once a second, and always at the end or on an error), so a run
killed at any moment leaves readable files that end at the last flushed frame:

- ``frames.npz``: step (F,), time (F,), x (F, N, D), and v / f when asked for, and each
  grid field's values, ``grid:<name>`` (F, *shape[, components])
- ``trajectory.xyz``: the same frames as extended XYZ
- ``energy.csv``: step,time,kinetic,potential,total (at the frames)
- ``thermo.csv``: energies and temperature at the thermo cadence (``simrun.outputs.thermo``)
- ``state.npz``: the full state of the last flushed frame, for ``--resume``
- ``scene.yaml``, ``topology.npz``, ``run.json`` (written by their own functions)
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simrun.outputs.atomic import atomic_savez, atomic_write_text
from simrun.outputs.thermo import THERMO_FILE, ThermoLog
from simrun.outputs.units import SYSTEMS, Units
from simrun.outputs.xyz import format_frame, split_frames

ENERGY_HEADER = "step,time,kinetic,potential,total"


@dataclass
class Frame:
    """One saved moment of a run; ``state`` holds every array needed to resume from it."""

    step: int
    time: float
    x: np.ndarray
    v: np.ndarray
    kinetic: float
    potential: float
    f: np.ndarray | None = None
    state: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class WriterOptions:
    positions: bool = True
    velocities: bool = True
    forces: bool = False
    energies: bool = True
    xyz: bool = True
    cell: np.ndarray | None = None  # None: no Lattice (a scene without a boundary)
    origin: np.ndarray | None = None
    pbc: tuple[bool, bool, bool] = (False, False, False)
    masses: np.ndarray | None = None  # None: all 1
    species: list[str] | None = None  # None: all "X"
    digits: int = 17
    thermo_every: int = 1  # steps between thermo.csv rows
    thermo_columns: tuple[str, ...] = ()  # beyond THERMO_COLUMNS (e.g. "conserved")
    units: Units = SYSTEMS["reduced"]  # thermo.csv's header labels
    dim: int = 3
    # fields saved with every frame, as (frames.npz name, field name): the state's
    # "field:<name>" (a rigid box's angle as "angle", a grid's fields as "grid:<name>")
    frame_fields: tuple[tuple[str, str], ...] = ()


def write_scene(path: Path, data: dict[str, Any]) -> None:
    text = "# Resolved scene written by simrun (defaults filled in, overrides applied).\n"
    atomic_write_text(path, text + yaml.safe_dump(data, sort_keys=False))


def write_topology(path: Path, arrays: dict[str, np.ndarray]) -> None:
    atomic_savez(path, **{k: np.asarray(v, dtype=np.int32) for k, v in arrays.items()})


def energy_csv(rows: list[tuple[int, float, float, float]]) -> str:
    lines = [ENERGY_HEADER]
    lines += [f"{s},{t!r},{k!r},{p!r},{k + p!r}" for s, t, k, p in rows]
    return "\n".join(lines) + "\n"


def read_energy_csv(path: Path) -> np.ndarray:
    """``energy.csv`` as a structured array with fields step,time,kinetic,potential,total."""
    text = Path(path).read_text()
    return np.genfromtxt(io.StringIO(text), delimiter=",", names=True, dtype=None,
                         ndmin=1, encoding="utf-8")


def _block_step(block: str) -> int:
    for token in block.split("\n", 2)[1].split():
        if token.startswith("Step="):
            return int(token[5:])
    return -1


class RunWriter:
    """Collects frames and rewrites the run's frame files atomically on ``flush``."""

    def __init__(self, out_dir: Path, options: WriterOptions) -> None:
        self.out_dir = Path(out_dir)
        self.options = options
        self.steps: list[int] = []
        self.times: list[float] = []
        self.xs: list[np.ndarray] = []
        self.vs: list[np.ndarray] = []
        self.fs: list[np.ndarray] = []
        self.per_frame: dict[str, list[np.ndarray]] = {k: [] for k, _ in options.frame_fields}
        self.energies: list[tuple[int, float, float, float]] = []
        self.xyz_blocks: list[str] = []
        self.last_state: dict[str, np.ndarray] | None = None
        self.saved_step: int | None = None  # the step of state.npz on disk (resume point)
        self.thermo = ThermoLog(options.thermo_columns, options.units, options.dim) \
            if options.energies else None
        self.dirty = False

    def add_thermo(self, step: int, time: float, kinetic: float, potential: float,
                   temperature: float, *extra: float) -> None:
        """One row of thermo.csv (written at the next flush)."""
        if self.thermo is not None:
            self.thermo.add(step, time, kinetic, potential, temperature, *extra)
            self.dirty = True

    def add(self, frame: Frame) -> None:
        """Keep a copy of ``frame`` (the stepper goes on integrating in its arrays).

        Everything is prepared first and appended last, so an interrupt cannot leave the
        lists with different lengths.
        """
        opts = self.options
        x, v = np.array(frame.x, copy=True), np.array(frame.v, copy=True)
        f = np.array(frame.f, copy=True) if opts.forces and frame.f is not None else None
        block = None
        if opts.xyz and opts.positions:
            block = format_frame(x, step=frame.step, time=frame.time, cell=opts.cell,
                                 origin=opts.origin, pbc=opts.pbc, masses=opts.masses,
                                 species=opts.species, v=v if opts.velocities else None, f=f,
                                 energy=frame.potential, digits=opts.digits,
                                 units=opts.units.name)
        state = {"step": np.int64(frame.step), "time": np.float64(frame.time), "x": x, "v": v,
                 **{k: np.array(a, copy=True) for k, a in frame.state.items()}}
        extra = {k: state[f"field:{name}"] for k, name in opts.frame_fields
                 if f"field:{name}" in state}
        self.steps.append(frame.step)
        self.times.append(frame.time)
        self.xs.append(x)
        if opts.velocities:
            self.vs.append(v)
        if f is not None:
            self.fs.append(f)
        self.energies.append((frame.step, frame.time, frame.kinetic, frame.potential))
        if block is not None:
            self.xyz_blocks.append(block)
        for k, value in extra.items():
            self.per_frame[k].append(value)
        self.last_state = state
        self.dirty = True

    def frames_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"step": np.asarray(self.steps, dtype=np.int64),
                  "time": np.asarray(self.times, dtype=np.float64)}
        if self.options.positions:
            arrays["x"] = np.stack(self.xs)
        if self.vs:
            arrays["v"] = np.stack(self.vs)
        if self.fs:
            arrays["f"] = np.stack(self.fs)
        arrays.update({k: np.stack(v) for k, v in self.per_frame.items() if v})
        return arrays

    def flush(self) -> None:
        """Rewrite frames, energies, trajectory, then the resume state (last, on purpose:
        a state file never points past the frames on disk)."""
        if not self.dirty or not self.steps:
            return
        out = self.out_dir
        atomic_savez(out / "frames.npz", **self.frames_arrays())
        if self.options.energies:
            atomic_write_text(out / "energy.csv", energy_csv(self.energies))
        if self.thermo is not None:
            atomic_write_text(out / THERMO_FILE, self.thermo.csv_text())
        if self.xyz_blocks:
            atomic_write_text(out / "trajectory.xyz", "".join(self.xyz_blocks))
        if self.last_state is not None:
            atomic_savez(out / "state.npz", **self.last_state)
            self.saved_step = int(self.last_state["step"])
        self.dirty = False

    def load_existing(self, upto_step: int, every: int) -> None:
        """Take back the frames on disk up to ``upto_step`` that an uninterrupted run with
        output cadence ``every`` would also have (for ``--resume``)."""
        out = self.out_dir
        with np.load(out / "frames.npz") as data:
            keep = (data["step"] <= upto_step) & (data["step"] % every == 0)
            self.steps = [int(s) for s in data["step"][keep]]
            self.times = [float(t) for t in data["time"][keep]]
            self.xs = list(data["x"][keep]) if "x" in data else []
            self.vs = list(data["v"][keep]) if "v" in data else []
            self.fs = list(data["f"][keep]) if "f" in data else []
            self.per_frame = {k: list(data[k][keep]) if k in data else []
                              for k in self.per_frame}
        self.saved_step = upto_step
        kept = set(self.steps)
        if (out / "energy.csv").exists():
            table = read_energy_csv(out / "energy.csv")
            self.energies = [(int(r["step"]), float(r["time"]), float(r["kinetic"]),
                              float(r["potential"])) for r in table if int(r["step"]) in kept]
        if (out / "trajectory.xyz").exists():
            blocks = split_frames((out / "trajectory.xyz").read_text())
            self.xyz_blocks = [b for b in blocks if _block_step(b) in kept]
        if self.thermo is not None:
            self.thermo.load_existing(out / THERMO_FILE, upto_step, self.options.thermo_every)
        self.dirty = True
