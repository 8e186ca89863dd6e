"""The KEYs an ensemble gradient takes, and which scenes sample the canonical ensemble.

The fluctuation formula d<O>/dtheta = <dO/dtheta> - beta (<O dU/dtheta> - <O><dU/dtheta>)
holds for averages over exp(-beta U): a thermostat that samples the canonical ensemble is
required, and the KEYs are what that density depends on (the energies' parameters and the
temperature) or what O does (the objective's parameters)."""

from __future__ import annotations

import difflib

from simrun.keys import Key, key_of, known_keys, normalise, with_pair
from simrun.scene import Scene, SceneError
from simrun.scene.load_terms import ENSEMBLE_BUILTINS
from simrun.stepper.plan import TEMPERATURE

CANONICAL = ("langevin", "nose_hoover")


def require_canonical(scene: Scene) -> None:
    """SceneError (exit 2) unless the scene samples exp(-U/kT) and averages its objective."""
    kind = scene.integrator.type if scene.step_kernels is None else "step kernels"
    if kind not in CANONICAL:
        why = ("velocity rescaling fixes the kinetic energy instead of sampling it, so its "
               "states do not follow the canonical distribution" if kind == "rescale" else
               f"'{kind}' does not sample the canonical distribution exp(-U/kT) (no thermostat "
               "holds the temperature)")
        raise SceneError(
            f"{scene.source}: --method ensemble differentiates averages over the canonical "
            f"ensemble through the fluctuation formula, but {why}. Use integrator: {{type: "
            "langevin, temperature: T, friction: g} or {type: nose_hoover, temperature: T, "
            "tau: t}, or --method trajectory for the derivative of this trajectory itself.")
    if scene.objective is None or scene.objective.at != "mean":
        raise SceneError(
            f"{scene.objective.where if scene.objective else scene.source}: --method ensemble "
            "differentiates an ensemble average, so the objective must be 'at: mean' (e.g. "
            "'objective: {builtin: potential, at: mean}').")
    if not scene.energy:
        raise SceneError(f"{scene.source}: the scene has no energy terms, so its canonical "
                         "ensemble has nothing to differentiate. Add an 'energy:' term.")


def parse_ensemble_key(scene: Scene, text: str) -> Key:
    """energy.<i>.params.<name>, objective.params.<name> or integrator.temperature (the
    adjoint's thermostat KEY: ``simrun.keys.value_of`` and ``with_value`` read and set all
    three kinds)."""
    if text == TEMPERATURE:
        return key_of(text)
    known = [k for k in known_keys(scene) if k.startswith(("energy.", "objective."))]
    if text not in known and normalise(scene, text) in known:
        raise SceneError(f"--wrt {text}: write this KEY as {normalise(scene, text)} (the pair "
                         "in the scene's order of species, joined by ':').")
    if text not in known:
        close = difflib.get_close_matches(text, known + [TEMPERATURE], n=3)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise SceneError(f"--wrt {text}: not a KEY of the ensemble method.{hint} Its KEYs: "
                         f"{', '.join(known + [TEMPERATURE])}.")
    return with_pair(scene, key_of(text))


def is_ensemble_objective(scene: Scene) -> bool:
    """An objective only the ensemble method evaluates (targets, pressure, U per particle)."""
    obj = scene.objective
    return obj is not None and (obj.targets is not None or obj.builtin in ENSEMBLE_BUILTINS)


def check_ensemble(scene: Scene, wrt: list[str]) -> None:
    """`simrun check` of an ensemble objective: a canonical thermostat, and the KEYs (and
    the optimize section's parameters) are ensemble KEYs."""
    require_canonical(scene)
    for text in [*wrt, *(scene.optimize.parameters if scene.optimize else ())]:
        parse_ensemble_key(scene, text)
