"""Did the thermostatted run sample the canonical ensemble at all? Read from its kinetic
temperature, whose canonical distribution is known whatever the system.

Under the canonical ensemble the kinetic energy of dof quadratic momenta is Gamma(dof/2, kT),
so each thermo row's kinetic temperature T_k = 2K/dof has mean T and variance 2 T^2 / dof.
A run at rest (a Nosé-Hoover thermostat scales velocities, so zero stays zero), or one whose
thermostat cannot mix the system (a one-link Nosé-Hoover chain on harmonic traps) breaks
one of the two:

- the mean: off from T by more than SIGMAS of its block-jackknife errors, and by more than
  one canonical standard deviation sqrt(2/dof) T of a single reading (an integrator's finite
  dt shifts the mean by a few percent, which is bias, not a failure to sample: the shipped
  harmonic traps at dt 0.2 read -2.2%, 5 errors but 0.6 of a reading's spread);
- the spread: the variance of the readings off from 2 T^2 / dof by more than SIGMAS of
  the error a canonical sample of that size would have, sqrt((2 + 12/dof) / n_eff) of it
  (the Gamma distribution's kurtosis; n_eff the readings' effective number, from their
  block-jackknife correlation time, which a run that does not mix makes smaller and the test
  milder), or not fluctuating at all.

The mean's error comes from the rows after equilibration, in blocks, so the run's own
correlation time is carried; a t statistic of 6 over 10 blocks happens by chance ~2e-4 of
the time.
"""

from __future__ import annotations

import numpy as np

from simrun.ensemble.stats import jackknife

SIGMAS = 6.0
BLOCKS = 10


def _mean_and_variance(means: dict) -> dict:
    return {"mean": means["t"], "variance": means["t2"] - means["t"] ** 2}


def _z(value: float, expected: float, error: float) -> float:
    """(value - expected) / error; infinite where an error of 0 meets a difference."""
    if error > 0:
        return (value - expected) / error
    return 0.0 if value == expected else float("inf")


def sampling_problems(readings: np.ndarray, temperature: float, dof: int) -> list[str]:
    """Why the kinetic temperatures ``readings`` (thermo rows after equilibration) cannot
    come from the canonical ensemble at ``temperature``; empty when they can (or when there
    are too few rows to tell)."""
    t = np.asarray(readings, float)
    if temperature <= 0 or dof <= 0 or len(t) < 2 * BLOCKS or not np.all(np.isfinite(t)):
        return []
    with np.errstate(all="ignore"):
        est = jackknife({"t": t, "t2": t * t}, _mean_and_variance, BLOCKS)
    mean, variance = float(est.values["mean"]), float(est.values["variance"])
    spread = temperature * np.sqrt(2.0 / dof)  # one reading's canonical standard deviation
    problems = []
    z_mean = _z(mean, temperature, float(est.errors["mean"]))
    if abs(z_mean) > SIGMAS and abs(mean - temperature) > spread:
        problems.append(
            f"its kinetic temperature averaged {mean:.4g}, not the thermostat's "
            f"{temperature:g} ({abs(z_mean):.3g} of its errors off, and "
            f"{abs(mean - temperature) / spread:.3g} canonical spreads of one reading, "
            f"{spread:.3g} for {dof} degrees of freedom)")
    relative = np.sqrt((2.0 + 12.0 / dof) / est.effective["mean"])
    z_var = _z(variance, spread ** 2, relative * spread ** 2)
    if variance <= 0 or abs(z_var) > SIGMAS:
        problems.append(
            f"its kinetic temperature fluctuated by {np.sqrt(max(variance, 0.0)):.3g} "
            f"(standard deviation over {len(t)} thermo rows), where the canonical ensemble "
            f"gives {spread:.3g}" + (f" ({abs(z_var):.3g} of the errors of such a sample off)"
                                     if variance > 0 else ": it did not fluctuate at all"))
    return problems
