"""Standard errors of functions of averages over a correlated trajectory: the block jackknife.

An ensemble gradient is a function of sample means (of O, dU/dtheta, O dU/dtheta, ...), not a
mean itself, and successive frames of a trajectory are correlated. Cutting the frames into
B contiguous blocks much longer than the correlation time and leaving one block out at a
time gives B estimates whose spread is the estimator's error, whatever the function
(Quenouille-Tukey jackknife on blocks, as Flyvbjerg & Petersen's blocking for plain means).
The same with single frames as blocks gives the error the frames would have if they were
independent; the ratio of the two variances is the integrated autocorrelation time tau, and
n / tau the effective sample size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Means = dict[str, np.ndarray]
Estimator = Callable[[Means], dict[str, np.ndarray]]


@dataclass
class Estimate:
    """Values of an estimator, their block-jackknife standard errors, and per output the
    effective number of independent frames (n / tau)."""

    values: dict[str, np.ndarray]
    errors: dict[str, np.ndarray]
    effective: dict[str, float]
    frames: int
    blocks: int


def _leave_one_out(series: dict[str, np.ndarray], edges: np.ndarray) -> Means:
    """Means of every series with each block [edges[b], edges[b+1]) left out, stacked on a
    leading axis (one row per block)."""
    out = {}
    counts = np.diff(edges).astype(float)
    n = float(edges[-1])
    for name, s in series.items():
        sums = np.add.reduceat(s, edges[:-1], axis=0)
        shape = (-1,) + (1,) * (s.ndim - 1)
        out[name] = (sums.sum(axis=0) - sums) / (n - counts).reshape(shape)
    return out


def _spread(rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Jackknife variance of each output from its leave-one-out rows."""
    out = {}
    for name, r in rows.items():
        b = r.shape[0]
        out[name] = (b - 1) / b * np.sum((r - r.mean(axis=0)) ** 2, axis=0)
    return out


def jackknife(series: dict[str, np.ndarray], estimator: Estimator, blocks: int = 20
              ) -> Estimate:
    """``estimator`` (means of ``series`` -> outputs; it must work on means with a leading
    axis too) on all frames, with block-jackknife errors over ``blocks`` blocks."""
    n = len(next(iter(series.values())))
    if n < 2 * blocks:
        raise ValueError(f"{n} frames cannot make {blocks} blocks of at least two frames; "
                         "sample more often or run longer")
    full = estimator({k: s.mean(axis=0) for k, s in series.items()})
    edges = np.linspace(0, n, blocks + 1).round().astype(int)
    block_var = _spread(estimator(_leave_one_out(series, edges)))
    frame_var = _spread(estimator(_leave_one_out(series, np.arange(n + 1))))
    effective = {}
    for name, var in block_var.items():
        tau = float(np.sum(var)) / max(float(np.sum(frame_var[name])), 1e-300)
        effective[name] = n / max(tau, 1.0) if np.sum(var) > 0 else float(n)
    errors = {k: np.sqrt(v) for k, v in block_var.items()}
    return Estimate({k: np.asarray(v, float) for k, v in full.items()}, errors, effective,
                    n, blocks)


def jackknife_covariance(series: dict[str, np.ndarray], estimator: Estimator, name: str,
                         blocks: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """The vector output ``name`` of ``estimator`` on all frames and its block-jackknife
    covariance matrix (the errors of its components and how they go together)."""
    n = len(next(iter(series.values())))
    edges = np.linspace(0, n, blocks + 1).round().astype(int)
    full = estimator({k: s.mean(axis=0) for k, s in series.items()})[name]
    rows = estimator(_leave_one_out(series, edges))[name]
    d = rows - rows.mean(axis=0)
    return np.asarray(full, float), (blocks - 1) / blocks * (d.T @ d)
