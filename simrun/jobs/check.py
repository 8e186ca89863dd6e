"""The check job, `simrun check`: the scene validated and its kernels compiled, the
potential at step 0 evaluated; its objective and KEYs (or its ensemble request) and the
parameters and bounds of an `optimize:` section checked. Nothing is run or written.

Without --debug the step-0 evaluation is made twice: bounds-checked first (an out-of-range
index is exit 2 at its line, never a number read from beside a field), then as run makes it,
for the numbers check prints (debug's code may round f32 sums otherwise: they are run's)."""

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
    """Everything `simrun check` checks; SceneError (file:line) for the first problem."""
    ensemble = is_ensemble_objective(scene)
    with bounds_checked(True):  # every System made inside, the objective's too
        report, objective = _evaluate(scene, wrt, threads, ensemble)
    if not debug:  # the numbers as run computes them
        report, objective = _evaluate(scene, wrt, threads, ensemble)
    if ensemble:  # averages over the canonical ensemble: simrun grad --method ensemble
        check_ensemble(scene, wrt)
    if scene.optimize is not None and not ensemble:
        layout = Layout.of(scene, field_start_values)  # each parameter a KEY, at its line
        layout.check_start(layout.initial())
    return CheckOutcome(report, ensemble, objective)


def _evaluate(scene: Scene, wrt: list[str], threads: int | None, ensemble: bool
              ) -> tuple[CheckReport, float | None]:
    """The kernels compiled and run at step 0: the potential, and the objective's value."""
    report = check_scene(scene, threads)
    objective = None
    if not ensemble and (scene.objective is not None or wrt):
        objective = check_objective(scene, wrt, threads)
    return report, objective
