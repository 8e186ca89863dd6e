"""An optimize folder: loss.csv, params.npz (every iteration's parameters), state.npz (every
evaluation, which --resume replays), optimize.json, the resolved scene.yaml and best.yaml
(the scene with the best parameters written in, runnable as it is). Every file is replaced
atomically after each iteration, so a training stopped at any moment leaves a valid folder."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simrun.optimize.params import Layout
from simrun.outputs import atomic_savez, atomic_write_text, versions, write_scene
from simrun.outputs.provenance import relocate, save_sources

LOSS_HEADER = "iteration,loss,gradient_norm,step,wall_s"


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
        stacked = np.array([r.params for r in self.rows])
        arrays = {text: np.array([v[text] for v in map(self.layout.unpack, stacked)])
                  for text in self.layout.scene.optimize.parameters}
        atomic_savez(self.dir / "params.npz", iteration=np.array([r.iteration for r in self.rows]),
                     loss=np.array([r.loss for r in self.rows]), **arrays)

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
        write_scene(self.dir / "best.yaml", relocate(data, self.sources))

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
