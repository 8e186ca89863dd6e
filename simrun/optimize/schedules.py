"""Learning-rate schedules: the step size of optimiser step t (0-based) of a training of
`total` steps, as a pure function, so a replayed training takes exactly the same steps.

An optional linear warm-up ramps the rate over the first `warmup` steps (lr * (t+1) / warmup),
then the named decay runs over the steps that remain:
  constant     lr
  cosine       min_lr + (lr - min_lr) (1 + cos(pi s / (total - warmup))) / 2
  step         lr * gamma ** floor(s / every)
  exponential  lr * gamma ** s
with s = t - warmup (PyTorch's CosineAnnealingLR, StepLR and ExponentialLR, stepped once per
iteration)."""

from __future__ import annotations

import math

from simrun.scene.schema import Schedule


def learning_rate(lr: float, schedule: Schedule, t: int, total: int) -> float:
    """The step size of step `t` of `total` (t < total)."""
    if t < schedule.warmup:
        return lr * (t + 1) / schedule.warmup
    s = t - schedule.warmup
    if schedule.type == "cosine":
        span = max(total - schedule.warmup, 1)
        return schedule.min_lr + (lr - schedule.min_lr) * (1 + math.cos(math.pi * s / span)) / 2
    if schedule.type == "step":
        return lr * schedule.gamma ** (s // schedule.every)
    if schedule.type == "exponential":
        return lr * schedule.gamma ** s
    return lr
