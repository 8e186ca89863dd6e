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

A fit's polish takes such steps from independent runs: `agreement` says whether a step is
only its runs' noise, and `pooled` averages the landing points of runs that agree.
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
    from_targets: np.ndarray | None = None  # (p, p) the targets' errors' share of covariance

    @property
    def sampled(self) -> np.ndarray:
        """The trajectory's share of the covariance: what another run would not repeat."""
        return self.covariance - (0.0 if self.from_targets is None else self.from_targets)

    @property
    def chi2(self) -> float:
        """delta^T C_s^-1 delta in the run's own (sampled) covariance C_s: about p when the
        step is only that run's noise. The targets' errors are left out: they move where the
        fit lands, the same for every run, not how far a run's step scatters about it."""
        return float(self.step @ np.linalg.solve(self.sampled, self.step))


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
    from_targets = (gain * target_var) @ gain.T
    return Step(step, covariance + from_targets, independent,
                dict(zip(names, np.split(avg - target, sizes))),
                dict(zip(names, np.split(np.sqrt(var), sizes))), from_targets)


def agreement(step: Step, before: Step | None) -> float:
    """chi^2 of a step against zero: in its run's own sampled covariance, plus the run's
    before when the step started where that one landed (theta_k = theta_k-1 + delta_k-1:
    then delta_k is the difference of two landing points, each its run's noise, and about
    2 p, not p, at the fit; the run's own covariance alone would call one in four of those
    steps too large for p = 1)."""
    covariance = step.sampled + (0.0 if before is None else before.sampled)
    return float(step.step @ np.linalg.solve(covariance, step.step))


@dataclass
class Pooled:
    """The landing points theta + delta of the polish's last runs whose steps were within
    their errors: each an independent estimate (own seed, own frames)."""

    estimate: np.ndarray  # their mean
    covariance: np.ndarray  # of the mean: sampled / K (scaled by the spread) + targets'
    runs: int  # K
    spread_chi2: float  # the landing points about their mean, in their sampled errors
    scale: float  # sqrt(spread_chi2 / dof) where above 1 (Birge), else 1


def pooled(points: list[np.ndarray], steps: list[Step]) -> Pooled:
    """Their mean, and its covariance: each run's sampled covariance averaged and divided by
    K, scaled up where the points spread more than those errors say (chi^2 per degree of
    freedom, (K - 1) p of them), plus the targets' share, which every run shares and no
    number of runs reduces."""
    k, points = len(points), np.array(points)
    estimate = points.mean(axis=0)
    sampled = np.mean([s.sampled for s in steps], axis=0) / k
    spread = sum(float((x - estimate) @ np.linalg.solve(s.sampled, x - estimate))
                 for x, s in zip(points, steps))
    dof = (k - 1) * points.shape[1]
    scale = float(np.sqrt(max(1.0, spread / dof))) if dof else 1.0
    targets = np.mean([s.from_targets for s in steps], axis=0)
    return Pooled(estimate, sampled * scale ** 2 + targets, k, spread, scale)
