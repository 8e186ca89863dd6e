"""A Gauss-Newton step of a fit to ensemble targets from one trajectory, and the error of
where it lands: the fit's own estimate of the parameters' uncertainty.

The averages <O_j> (every target component: scalars, each g(r) bin) and their Jacobian
J_jk = d<O_j>/dtheta_k come from the trajectory's frames (the fluctuation formula). Each
component is weighted by W_j = 1 / (s_j^2 + e_j^2), s_j the block-jackknife error of <O_j>
and e_j the target's own error where the scene gives one (``error:``, g(r)'s third column);
components that never vary (g(r) bins inside the core) get no weight. The step
    delta = -(J^T W J)^-1 J^T W (<O> - t)
lands on the weighted least-squares fit of the linearised averages. Its covariance is the
block jackknife of delta itself (delta is a function of the trajectory's means, so the
correlations between g(r)'s bins and between <O> and J are counted), plus the targets'
errors carried through (J^T W J)^-1 J^T W. (J^T W J)^-1 alone, the textbook Gauss-Newton
covariance, takes the components as independent; it is reported beside, not used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simrun.ensemble.stats import jackknife, jackknife_covariance
from simrun.ensemble.targets import TargetLoss, target_errors, target_values
from simrun.scene import Scene, SceneError


@dataclass
class Step:
    """A Gauss-Newton step and the statistics of the averages it came from."""

    step: np.ndarray  # (p,) delta
    covariance: np.ndarray  # (p, p) of theta + delta (trajectory noise and targets' errors)
    independent: np.ndarray  # (p, p) (J^T W J)^-1: components taken as independent
    residuals: dict[str, np.ndarray]  # <O> - t per target
    sigma: dict[str, np.ndarray]  # sqrt(s^2 + e^2) per target component

    @property
    def chi2(self) -> float:
        """delta^T C^-1 delta: how many errors the step is (about p when it is only noise)."""
        return float(self.step @ np.linalg.solve(self.covariance, self.step))


def gauss_newton(scene: Scene, loss: TargetLoss, series: dict[str, np.ndarray],
                 blocks: int = 20) -> Step:
    """The step from the means of ``series`` (``loss.series`` of unweighted frames)."""
    names, keys = loss.names, loss.keys
    values = target_values(scene)
    target = np.concatenate([values[n] for n in names])
    sizes = np.cumsum([len(values[n]) for n in names])[:-1]

    def flat(means: dict) -> tuple[np.ndarray, np.ndarray]:
        out = loss.estimate(means)
        avg = np.concatenate([np.asarray(out[f"avg:{n}"]) for n in names], axis=-1)
        jac = np.stack([np.concatenate([np.asarray(out[f"d:{n}:{k}"]) for n in names],
                                       axis=-1) for k in keys], axis=-1)
        return avg, jac

    stat = jackknife(series, lambda m: {"avg": flat(m)[0]}, blocks).errors["avg"] ** 2
    errors = target_errors(scene)
    target_var = np.concatenate([errors[n] ** 2 for n in names])
    var = stat + target_var
    weight = np.where(var > 0, 1.0 / np.where(var > 0, var, 1.0), 0.0)

    def solve(means: dict) -> dict:
        avg, jac = flat(means)
        jw = np.swapaxes(jac, -1, -2) * weight
        return {"step": -np.linalg.solve(jw @ jac, (jw @ (avg - target)[..., None]))[..., 0]}

    try:
        step, covariance = jackknife_covariance(series, solve, "step", blocks)
        avg, jac = flat({k: s.mean(axis=0) for k, s in series.items()})
        independent = np.linalg.inv((jac.T * weight) @ jac)
    except np.linalg.LinAlgError:
        raise SceneError(f"{scene.objective.where}: the targets do not determine "
                         f"{', '.join(keys)} (their averages do not change with some of them, "
                         "or only together). Add a target that does, or tune fewer "
                         "parameters.") from None
    gain = independent @ (jac.T * weight)
    covariance = covariance + (gain * target_var) @ gain.T
    return Step(step, covariance, independent, dict(zip(names, np.split(avg - target, sizes))),
                dict(zip(names, np.split(np.sqrt(var), sizes))))
