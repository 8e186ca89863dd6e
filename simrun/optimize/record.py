"""An optimize folder: loss.csv, params.npz (every iteration's parameters), state.npz (every
evaluation, which --resume replays), optimize.json, the resolved scene.yaml and best.yaml
(the scene with the best parameters written in, runnable as it is). Every file is replaced
atomically, so a training stopped at any moment leaves a valid folder. loss.csv and best.yaml
are written after each iteration; params.npz and state.npz, which grow with every iteration
and are rewritten whole, only once the time since their last write is `PACE` times what that
write took (so they cost at most 1/PACE of a training, not O(n^2) of it), and always at the
end, on an interrupt and on a failure (`flush`). A process killed outright leaves them a few
iterations behind loss.csv; --resume then recomputes those iterations, to the same numbers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simrun.optimize.params import Layout
from simrun.outputs import atomic_savez, atomic_write_text, versions, write_scene
from simrun.outputs.provenance import relocate, save_sources

LOSS_HEADER = "iteration,loss,gradient_norm,step,wall_s"
PACE = 20


class Paced:
    """Calls a writer again only once `PACE` times its last duration has passed (by
    ``clock``, seconds: the wall clock, or a test's own)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.ready_at = 0.0
        self.pending: Callable[[], None] | None = None

    def __call__(self, write: Callable[[], None]) -> None:
        self.pending = write
        if self.clock() >= self.ready_at:
            self.flush()

    def flush(self) -> None:
        if self.pending is not None:
            start = self.clock()
            self.pending()
            self.pending = None
            end = self.clock()
            self.ready_at = end + PACE * (end - start)


@dataclass
class Journal:
    """Every gradient evaluation in order: parameters, loss, gradient, wall time."""

    x: list[np.ndarray] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    grad: list[np.ndarray] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)

    def save(self, path: Path) -> None:
        atomic_savez(path, x=np.array(self.x), loss=np.array(self.loss),
                     grad=np.array(self.grad), wall=np.array(self.wall))

    def saver(self, path: Path) -> Callable[[], None]:
        """save(path) of the journal as it is now (a Paced write may come later)."""
        n = len(self.x)
        snapshot = Journal(self.x[:n], self.loss[:n], self.grad[:n], self.wall[:n])
        return lambda: snapshot.save(path)

    @classmethod
    def load(cls, path: Path) -> Journal:
        data = np.load(path)
        return cls(list(data["x"]), [float(v) for v in data["loss"]], list(data["grad"]),
                   [float(v) for v in data["wall"]])

    def truncate(self, n: int) -> None:
        del self.x[n:], self.loss[n:], self.grad[n:], self.wall[n:]


@dataclass
class Row:
    iteration: int
    params: np.ndarray
    loss: float
    grad_norm: float
    step: float
    wall: float


class Record:
    """The folder's files, rewritten after each iteration."""

    def __init__(self, out_dir: Path, layout: Layout, options: dict | None = None) -> None:
        self.dir, self.layout, self.options = Path(out_dir), layout, options
        self.rows: list[Row] = []
        self.best: Row | None = None
        self.params_writes = Paced()
        self.best_yaml: dict | None = None  # as last written (fields-only tuning repeats it)
        # the kernel modules' copies in DIR/kernels/: best.yaml runs as it is (modules beside
        # a scene are trusted) and the folder keeps the code that ran
        self.sources = save_sources(self.dir, layout.scene)
        write_scene(self.dir / "scene.yaml", relocate(layout.scene.to_dict(), self.sources))

    def add(self, iteration: int, params: np.ndarray, loss: float, grad: np.ndarray,
            wall: float) -> Row:
        step = float(np.linalg.norm(params - self.rows[-1].params)) if self.rows else 0.0
        row = Row(iteration, params.copy(), loss, float(np.linalg.norm(grad)), step, wall)
        self.rows.append(row)
        if np.isfinite(loss) and (self.best is None or loss < self.best.loss):
            self.best = row
            self.write_best()
        self._write_tables()
        return row

    def _write_tables(self) -> None:
        lines = [LOSS_HEADER] + [f"{r.iteration},{r.loss!r},{r.grad_norm!r},{r.step!r},"
                                 f"{r.wall:.3f}" for r in self.rows]
        atomic_write_text(self.dir / "loss.csv", "\n".join(lines) + "\n")
        self.params_writes(self._params_writer(list(self.rows)))

    def _params_writer(self, rows: list[Row]) -> Callable[[], None]:
        def write() -> None:
            stacked = np.array([r.params for r in rows])
            arrays = {text: np.array([v[text] for v in map(self.layout.unpack, stacked)])
                      for text in self.layout.scene.optimize.parameters}
            atomic_savez(self.dir / "params.npz", iteration=np.array([r.iteration for r in rows]),
                         loss=np.array([r.loss for r in rows]), **arrays)
        return write

    def flush(self) -> None:
        """Write what pacing held back (the end, an interrupt, a failure)."""
        self.params_writes.flush()

    def write_best(self) -> None:
        """best.yaml: the scene at the best parameters; a tuned start goes to best_state.npz
        (initial: {type: file}), tuned fields to best_fields.npz (fields: {name: file});
        kernel paths point at the copies in kernels/."""
        scene, start = self.layout.scene_at(self.best.params)
        data = scene.to_dict()
        fields = self.layout.fields_at(self.best.params)
        if fields:
            atomic_savez(self.dir / "best_fields.npz", **fields)
            data["fields"] = {**data.get("fields", {}),
                              **{name: "best_fields.npz" for name in fields}}
        if start is not None:
            velocity = np.asarray(scene.initial.velocity, float)
            atomic_savez(self.dir / "best_state.npz", x=start[0], v=start[1] - velocity)
            data["initial"] = {"type": "file", "path": "best_state.npz",
                               "velocity": velocity.tolist(), "temperature": 0.0}
        data = relocate(data, self.sources)
        if data != self.best_yaml or not (self.dir / "best.yaml").is_file():
            write_scene(self.dir / "best.yaml", data)
            self.best_yaml = data

    def write_json(self, status: str, message: str = "", **extra) -> None:
        best = self.best
        record = {
            "status": status, "message": message,
            "optimizer": self.layout.scene.optimize.to_dict(),
            "iterations_done": self.rows[-1].iteration if self.rows else -1,
            "best": None if best is None else {
                "iteration": best.iteration, "loss": best.loss,
                "parameters": _plain(self.layout.unpack(best.params))},
            "last": None if not self.rows else {
                "iteration": self.rows[-1].iteration, "loss": self.rows[-1].loss,
                "gradient_norm": self.rows[-1].grad_norm},
            **extra, "versions": versions(),
            "sources": [source.to_dict() for source in self.sources],
        }
        if self.options is not None:
            record["options"] = self.options
        atomic_write_text(self.dir / "optimize.json", json.dumps(record, indent=2) + "\n")


def _plain(values: dict) -> dict:
    return {k: (np.asarray(v).tolist() if np.ndim(v) else float(v)) for k, v in values.items()}
