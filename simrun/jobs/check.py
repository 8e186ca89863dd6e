"""The check job, `simrun check`: the scene validated and its kernels compiled, the
potential at step 0 evaluated; its objective and KEYs (or its ensemble request) and the
parameters and bounds of an `optimize:` section checked. Nothing is run or written.

Every kernel check launches is bounds-checked, --debug or not: check prints the potential
and the objective, and one evaluation's cost does not matter, so an out-of-range index is
exit 2 at its line, never a number read from beside a field."""

from __future__ import annotations

from dataclasses import dataclass

from simrun.ensemble.keys import check_ensemble, is_ensemble_objective
from simrun.jobs.grad import check_objective, field_start_values
from simrun.lang.config import bounds_checked
from simrun.optimize.params import Layout
from simrun.scene import Scene
from simrun.stepper import check_scene
from simrun.stepper.check import CheckReport


@dataclass
class CheckOutcome:
    report: CheckReport  # the kernels, the compile time and the potential at step 0
    ensemble: bool  # the objective is an ensemble average (grad --method ensemble)
    objective: float | None = None  # J at step 0, where the scene has an objective


def check_job(scene: Scene, wrt: list[str], threads: int | None = None,
              debug: bool = False) -> CheckOutcome:
    """Everything `simrun check` checks; SceneError (file:line) for the first problem.
    `debug` is kept for callers: check bounds-checks every launch anyway."""
    with bounds_checked(True):  # every System made inside: the objective's too
        report = check_scene(scene, threads, debug=True)
        ensemble = is_ensemble_objective(scene)
        objective = None
        if ensemble:  # averages over the canonical ensemble: simrun grad --method ensemble
            check_ensemble(scene, wrt)
        elif scene.objective is not None or wrt:
            objective = check_objective(scene, wrt, threads)
    if scene.optimize is not None and not ensemble:
        layout = Layout.of(scene, field_start_values)  # each parameter a KEY, at its line
        layout.check_start(layout.initial())
    return CheckOutcome(report, ensemble, objective)
