"""The job table: what one sweep point runs (``run``, ``grad``, ``optimize``), keyed by name.

Each job is a function ``(scene, folder, options, resume) -> {name: number}`` that calls the
library function of its own command (`simrun.jobs`), so it writes exactly what the command
writes into ``folder``, and returns the scalar results that go into the summary.
``register`` adds one.
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
    if name not in JOBS:
        raise SceneError(f"--job {name!r}: use one of {', '.join(sorted(JOBS))}")
    return JOBS[name]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _run(scene: Scene, folder: Path, options: dict[str, Any], resume: bool) -> dict[str, float]:
    from simrun.jobs.run import run_job  # start-up: a worker loads what its job runs

    def create() -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    # pictures are not the job: a failure to draw them is in run.json, not the summary
    run_job(scene, create, resume=resume, render=not options.get("no_render"),
            threads=options.get("threads"))
    return _run_results(_read_run_json(folder))


def _draw_run_pictures(folder: Path, options: dict[str, Any]) -> None:
    if not options.get("no_render"):
        from simrun.jobs.run import render_pictures  # start-up: matplotlib

        render_pictures(folder)  # a failure is in run.json: pictures are not the job


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
    """`simrun grad`'s job with the batch's options (reverse or forward mode, --check,
    --method ensemble); a check that is not 'ok' or an ensemble run that did not sample its
    thermostat's ensemble fails the task, as it is exit 1 from the command (the folder keeps
    the numbers)."""
    # start-up: a worker loads what its job runs
    from simrun.jobs.finish import JobFailed
    from simrun.jobs.grad_folder import failed_verdict, grad_job, grad_request

    keys = grad_request(scene, options)
    folder.mkdir(parents=True, exist_ok=True)
    result = grad_job(scene, folder, options, keys)
    why = failed_verdict(result)
    if why is not None:
        raise JobFailed(why)
    values = _scalars("objective", result.objective)
    for key, g in result.gradients.items():
        values.update(_scalars(f"d/{key}", g))
    if result.mode == "ensemble":
        values.update(_scalars("error/objective", result.objective_error))
        for key, e in result.errors.items():
            values.update(_scalars(f"error/d/{key}", e))
    if getattr(result, "check", None) is not None:
        values["check_rel_error"] = max(row["rel_error"] for row in result.check["rows"])
    return values


def _scalars(name: str, value: Any) -> dict[str, float]:
    """A number as itself, an array as its norm (``|name|``)."""
    if getattr(value, "shape", ()) in ((), (1,)):
        return {name: float(value if getattr(value, "shape", ()) == () else value[0])}
    return {f"|{name}|": float((value ** 2).sum() ** 0.5)}


def _optimize(scene: Scene, folder: Path, options: dict[str, Any],
              resume: bool) -> dict[str, float]:
    """``optimize``: the optimize job over the scene's ``optimize:`` section (resumable: an
    interrupted optimisation replays its recorded evaluations)."""
    from simrun.jobs.optimize import optimize_job  # start-up: a worker loads what its job runs

    result, _ = optimize_job(scene, folder, resume=resume,
                             iterations=options.get("iterations"),
                             threads=options.get("threads"))
    values = {"best_loss": _number(result.best_loss), "iterations": result.iterations,
              "best_iteration": result.best_iteration,
              "final_loss": _number(result.losses[-1]) if result.losses else None}
    for key, value in result.best.items():
        if getattr(value, "shape", ()) == ():
            values[f"best/{key}"] = _number(value)
    return {k: v for k, v in values.items() if v is not None}


register(Job("run", _run, resumable=True, finished=_run_finished))
register(Job("grad", _grad, resumable=False, needs_objective=True))
register(Job("optimize", _optimize, resumable=True, needs_objective=True))
