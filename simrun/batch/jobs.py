"""The job table: what one sweep point runs (``run``, ``grad``, ``optimize``), keyed by name.

Each job is a function ``(scene, folder, options, resume) -> {name: number}`` that writes
exactly what its own command writes into ``folder`` and returns the scalar results that go
into the summary. ``register`` adds one (``optimize`` is looked up when first used, so it
works as soon as ``simrun.optimize`` exists).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simrun.outputs.runinfo import read_run_info
from simrun.scene import Scene, SceneError

JobFn = Callable[[Scene, Path, dict[str, Any], bool], dict[str, float]]
FinishedFn = Callable[[Scene, Path, dict[str, Any]], "dict[str, float] | None"]


@dataclass(frozen=True)
class Job:
    name: str
    fn: JobFn
    resumable: bool  # continues from its own saved state after an interruption
    needs_objective: bool = False
    # the results of a folder that says the job finished (None: it did not), so that a
    # job killed after finishing but before its record said so is done, not run again
    finished: FinishedFn | None = None


JOBS: dict[str, Job] = {}


def register(job: Job) -> Job:
    JOBS[job.name] = job
    return job


def get_job(name: str) -> Job:
    if name == "optimize" and name not in JOBS:
        _register_optimize()
    if name not in JOBS:
        raise SceneError(f"--job {name!r}: use one of {', '.join(sorted(set(JOBS) | {'optimize'}))}")
    return JOBS[name]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _run(scene: Scene, folder: Path, options: dict[str, Any], resume: bool) -> dict[str, float]:
    from simrun.stepper import run_scene  # start-up: a worker loads what its job runs

    def create() -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    run_scene(scene, create, resume=resume, threads=options.get("threads"))
    _draw_run_pictures(folder, options)
    return _run_results(_read_run_json(folder))


def _draw_run_pictures(folder: Path, options: dict[str, Any]) -> None:
    if not options.get("no_render"):
        from simrun.render.record import draw_pictures  # start-up: matplotlib

        try:
            draw_pictures(folder)
        except Exception:  # noqa: BLE001 - pictures are not the job; run.json records it
            pass


def _read_run_json(folder: Path) -> dict[str, Any]:
    try:
        info = read_run_info(folder / "run.json")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _run_results(info: dict[str, Any]) -> dict[str, float]:
    """The summary's numbers of a run, from its run.json (one source for a run just made and
    one found finished): first and last total energy, the drift first to last frame
    (``final``) and the largest over the thermo rows (what 'simrun run' warns on)."""
    energy = info.get("energy") or {}
    first, last = _number(energy.get("first_total")), _number(energy.get("last_total"))
    final = (last - first) / abs(first) if first and last is not None else None
    largest = (info.get("energy_drift") or {}).get("relative_largest")
    values = {"energy_first": first, "energy_last": last, "energy_drift_final": final,
              "energy_drift_largest": _number(largest),
              "steps": info.get("steps_done")}
    return {k: v for k, v in values.items() if v is not None}


def _run_finished(scene: Scene, folder: Path, options: dict[str, Any]
                  ) -> dict[str, float] | None:
    """A run whose run.json says it ended well at the scene's last step (a worker killed
    before recording that); its pictures are drawn again, as they may be missing."""
    info = _read_run_json(folder)
    if info.get("status") != "ok" or info.get("steps_done") != scene.steps:
        return None
    _draw_run_pictures(folder, options)
    return _run_results(info)


def _grad(scene: Scene, folder: Path, options: dict[str, Any], resume: bool) -> dict[str, float]:
    # start-up: a worker loads what its job runs
    from simrun.adjoint.job import scene_gradient, write_outputs

    steps = options.get("steps") or scene.steps
    result = scene_gradient(scene, list(options.get("wrt") or []), steps=steps,
                            checkpoints=options.get("checkpoints"),
                            memory=options.get("memory"), threads=options.get("threads"))
    folder.mkdir(parents=True, exist_ok=True)
    write_outputs(folder, scene, result)
    values = {"objective": float(result.objective)}
    for key, g in result.gradients.items():
        if getattr(g, "shape", ()) == ():
            values[f"d/{key}"] = float(g)
        else:
            values[f"|d/{key}|"] = float((g ** 2).sum() ** 0.5)
    return values


def _register_optimize() -> None:
    """``optimize``: ``simrun.optimize.optimize_scene`` over the scene's ``optimize:``
    section (resumable: an interrupted optimisation replays its recorded evaluations)."""
    try:
        from simrun.optimize import optimize_scene  # start-up: a worker loads what its job runs
    except ImportError:
        return

    def _optimize(scene: Scene, folder: Path, options: dict[str, Any],
                  resume: bool) -> dict[str, float]:
        from simrun.render.loss import render_loss  # start-up: matplotlib

        result = optimize_scene(scene, folder, iterations=options.get("iterations"),
                                resume=resume, threads=options.get("threads"))
        render_loss(folder / "loss.csv", folder / "loss.png", title=scene.name)
        values = {"best_loss": _number(result.best_loss), "iterations": result.iterations,
                  "best_iteration": result.best_iteration,
                  "final_loss": _number(result.losses[-1]) if result.losses else None}
        for key, value in result.best.items():
            if getattr(value, "shape", ()) == ():
                values[f"best/{key}"] = _number(value)
        return {k: v for k, v in values.items() if v is not None}

    register(Job("optimize", _optimize, resumable=True, needs_objective=True))


register(Job("run", _run, resumable=True, finished=_run_finished))
register(Job("grad", _grad, resumable=False, needs_objective=True))
