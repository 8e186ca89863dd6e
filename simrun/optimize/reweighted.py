"""`simrun optimize` of a scene whose objective is ensemble targets: DiffTRe (Thaler &
Zavadlav 2021). One thermostatted run is reused across parameter updates: its frames are
reweighted by w ~ exp(-(U_theta / kT_theta - U_0 / kT_0)) to the current parameters, and the
loss (a function of the reweighted averages) and its gradient (the fluctuation formula under
the weights) come from them, while the effective sample size N_eff = (sum w)^2 / sum w^2
stays above ``threshold`` N; below it, a new run is sampled at the current parameters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simrun.adjoint.keys import value_of, with_value
from simrun.ensemble.frames import FrameEvaluator
from simrun.ensemble.job import sample, sampling_defaults, sampling_scene
from simrun.ensemble.keys import parse_ensemble_key, require_canonical
from simrun.ensemble.targets import TargetLoss
from simrun.optimize.optimizers import Adam, project
from simrun.optimize.schedules import learning_rate
from simrun.outputs import atomic_write_text
from simrun.outputs.provenance import write_job_scene
from simrun.scene import Scene, SceneError

THRESHOLD = 0.9  # N_eff / N below which a new trajectory is sampled
AVERAGED = 0.25  # the fitted parameters: the mean iterate over this last share of iterations


def fitted(rows: list) -> np.ndarray:
    """The estimate: the mean of the last iterates (Polyak-Ruppert averaging). Each loss is
    itself a noisy average, so neither its smallest value nor the last step is better."""
    tail = rows[-max(1, int(round(AVERAGED * len(rows)))):]
    return np.mean([r.params for r in tail], axis=0)


@dataclass
class FitRow:
    iteration: int
    loss: float
    params: np.ndarray
    neff: float  # N_eff / N of the weights used at this iteration
    trajectory: int  # which sampled run the averages came from
    averages: dict[str, np.ndarray] = field(default_factory=dict)
    stale: float | None = None  # N_eff / N the previous run fell to, when it was replaced


@dataclass
class _Reference:
    """A sampled run and what reweighting needs of it."""

    scene: Scene
    samples: object
    evaluator: FrameEvaluator
    table: object  # the frames' FrameTable at the parameters they were sampled at
    loss: TargetLoss
    number: int = 0  # trajectory-NNN

    @property
    def u0_over_kt(self) -> np.ndarray:
        return self.table.potential / float(self.scene.integrator.temperature)


def _reference(scene: Scene, keys: list, out_dir: Path, number: int, steps: int, every: int,
               equilibrate: int, threads: int | None) -> _Reference:
    folder = out_dir / f"trajectory-{number:03d}"
    samples = sample(sampling_scene(scene, steps, every), folder, equilibrate, threads)
    evaluator = FrameEvaluator(scene, [(k.index, k.name) for k in keys if k.kind == "energy"],
                               threads)
    table = evaluator.evaluate(samples.x)
    return _Reference(scene, samples, evaluator, table,
                      TargetLoss(scene, [k.text for k in keys], samples.x), number)


def _scene_at(scene: Scene, keys: list, vector: np.ndarray) -> Scene:
    for key, value in zip(keys, vector):
        scene = with_value(scene, key, float(value))
    return scene


def _bounds(opt, keys: list) -> tuple[np.ndarray, np.ndarray]:
    pairs = [opt.bounds.get(k.text) or (None, None) for k in keys]
    return (np.array([-np.inf if lo is None else lo for lo, _ in pairs]),
            np.array([np.inf if hi is None else hi for _, hi in pairs]))


def _reweighted(ref: _Reference, current: Scene, keys: list, vector: np.ndarray):
    """The frames' table at the current parameters, their weights exp(-(U/kT - U0/kT0))
    (largest 1) and N_eff / N."""
    table = ref.table
    if ref.scene is not current:
        ref.evaluator.set_values({(k.index, k.name): v for k, v in zip(keys, vector)
                                  if k.kind == "energy"})
        table = ref.evaluator.evaluate(ref.samples.x)
    log_w = -(table.potential / float(current.integrator.temperature) - ref.u0_over_kt)
    w = np.exp(log_w - log_w.max())
    return table, w, float(w.sum() ** 2 / (w * w).sum()) / len(w)


def fit_by_reweighting(scene: Scene, out_dir: Path, *, iterations: int | None = None,
                       threshold: float = THRESHOLD, steps: int | None = None,
                       every: int | None = None, threads: int | None = None,
                       progress: Callable[[int, int, float, float], None] | None = None
                       ) -> list[FitRow]:
    """Minimise the scene's target loss over ``optimize.parameters`` (Adam at optimize.lr,
    within optimize.bounds); writes fit.csv, params and best.yaml into ``out_dir``."""
    require_canonical(scene)
    opt = scene.optimize
    keys = [parse_ensemble_key(scene, k) for k in opt.parameters]
    if any(k.kind == "objective" for k in keys):
        raise SceneError(f"{scene.source}: targets have no parameters; tune the energies' "
                         "parameters or integrator.temperature")
    steps, iterations = steps or scene.steps, iterations or opt.iterations
    every, equilibrate = sampling_defaults(steps, every, None)
    energy_keys = [k.text for k in keys if k.kind == "energy"]
    low, high = _bounds(opt, keys)
    vector = np.array([float(value_of(scene, k)) for k in keys])
    adam, rows, ref, t0 = Adam(opt.lr, opt.betas), [], None, time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    write_job_scene(out_dir, scene)
    for it in range(iterations):
        current, stale = _scene_at(scene, keys, vector), None
        for attempt in range(2):
            if ref is None or attempt:
                ref = _reference(current, keys, out_dir, 0 if ref is None else ref.number + 1,
                                 steps, every, equilibrate, threads)
            table, w, neff = _reweighted(ref, current, keys, vector)
            if neff >= threshold or ref.scene is current:
                break
            stale = neff
        series = ref.loss.series(current, table, energy_keys, ref.samples.dof, w)
        out = ref.loss.estimate({name: s.mean(axis=0) for name, s in series.items()})
        grad = np.array([float(out[f"grad:{k.text}"]) for k in keys])
        rows.append(FitRow(it, float(out["loss"]), vector.copy(), neff, ref.number,
                           {n: np.asarray(out[f"avg:{n}"]) for n in ref.loss.names}, stale))
        _write(out_dir, scene, keys, rows, time.perf_counter() - t0)
        if progress is not None:
            progress(it + 1, iterations, rows[-1].loss, float(np.linalg.norm(grad)))
        rate = learning_rate(opt.lr, opt.schedule, it, iterations)
        vector = project(adam.step(vector, grad, rate), low, high)
    return rows


def _write(out_dir: Path, scene: Scene, keys: list, rows: list[FitRow], wall: float) -> None:
    """fit.csv (iteration, loss, N_eff/N, trajectory, the N_eff/N of a run just replaced,
    parameters), fit.json and best.yaml
    (the scene at the fitted parameters, `fitted`)."""
    from simrun.outputs.provenance import relocate, save_sources
    from simrun.outputs.writer import write_scene

    names = [k.text for k in keys]
    lines = ["iteration,loss,neff,trajectory,replaced_neff," + ",".join(names)]
    lines += [f"{r.iteration},{r.loss!r},{r.neff:.4f},{r.trajectory},"
              f"{'' if r.stale is None else f'{r.stale:.4f}'},"
              + ",".join(repr(float(v)) for v in r.params) for r in rows]
    atomic_write_text(out_dir / "fit.csv", "\n".join(lines) + "\n")
    best, estimate = min(rows, key=lambda r: r.loss), fitted(rows)
    record = {"status": "running", "method": "reweighting (DiffTRe)", "wall_s": round(wall, 2),
              "trajectories": len({r.trajectory for r in rows}),
              "fitted": {"params": dict(zip(names, map(float, estimate))),
                         "averaged_iterations": max(1, int(round(AVERAGED * len(rows))))},
              "lowest_loss": {"iteration": best.iteration, "loss": best.loss,
                       "params": dict(zip(names, map(float, best.params))),
                       "averages": {n: a.tolist() for n, a in best.averages.items()}},
              "targets": {n: (t.get("value") if "value" in t else str(t["file"]))
                          for n, t in scene.objective.targets.items()}}
    atomic_write_text(out_dir / "fit.json", json.dumps(record, indent=2) + "\n")
    best_scene = _scene_at(scene, keys, estimate)
    write_scene(out_dir / "best.yaml", relocate(best_scene.to_dict(),
                                                save_sources(out_dir, best_scene)))
