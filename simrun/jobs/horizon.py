"""Reading a forward-mode horizon: does the sensitivity dJ(t)/dp grow exponentially?

A regular system's sensitivity grows like a polynomial of the horizon t; a chaotic one's like
exp(lambda t) (its largest Lyapunov exponent), and then the trajectory's derivative stops
describing anything an average over the system feels. Polynomial growth of degree p moves
|dJ| by at most 4^p from the second quarter of the horizon to the last; a factor beyond
GROWTH (degree > 3, in practice an exponential) is reported."""

from __future__ import annotations

import numpy as np

GROWTH = 100.0


def exponential_growth(series: list, dt: float) -> dict | None:
    """{"rate": lambda (1/time), "factor": last quarter / second quarter} when the horizon
    (step, J(t), dJ(t)) rows of one KEY grow faster than any low polynomial, else None."""
    steps = np.array([row[0] for row in series], float)
    size = np.abs(np.array([row[2] for row in series], float))
    keep = (steps > 0) & np.isfinite(size)
    steps, size = steps[keep], size[keep]
    if len(steps) < 8 or not np.any(size > 0):
        return None
    end = steps[-1]
    second = size[(steps > end / 4) & (steps <= end / 2)]
    last = size[steps > 3 * end / 4]
    if not len(second) or not len(last) or np.max(second) <= 0:
        return None
    factor = float(np.max(last) / np.max(second))
    if factor <= GROWTH:
        return None
    late = (steps > end / 2) & (size > 0)
    rate = float(np.polyfit(steps[late] * dt, np.log(size[late]), 1)[0])
    return {"rate": rate, "factor": factor}


def growth_report(horizon: dict[str, list], dt: float) -> dict[str, dict]:
    """KEY -> its exponential growth, for the KEYs whose sensitivity grows exponentially."""
    found = {name: exponential_growth(rows, dt) for name, rows in horizon.items()}
    return {name: g for name, g in found.items() if g is not None}


ENSEMBLE_ADVICE = ("For an equilibrium average (objective at: mean, under a Langevin or "
                   "Nose-Hoover thermostat) use --method ensemble, whose derivative does not "
                   "grow with the run.")


def adjoint_growth(rows: list, dt: float) -> dict | None:
    """Reverse mode's reading of the same: rows (steps - k, 0, |dJ/d(state k)|) from an
    `at: mean` objective's reverse sweep. The sensitivity of J to the state k steps before
    the end grows with that horizon as dJ(t)/dp does with t (exp(lambda t) in chaos)."""
    return exponential_growth(rows, dt) if rows else None


def chaos_reason(growth: dict) -> str:
    """One sentence: the growth, what it means for the trajectory's derivative."""
    return (f"J's sensitivity to the state grows exponentially with the horizon (rate "
            f"{growth['rate']:.3g} per unit time; x{growth['factor']:.3g} from the second "
            "quarter of the run to the last): the trajectory is chaotic, and its derivative is "
            "dominated by that growth")
