"""The integrator's state between steps (what frames, checkpoints and the adjoint hold)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class State:
    """The state after ``step`` steps; ``f`` and ``potential`` are at ``x``."""

    step: int
    x: np.ndarray
    v: np.ndarray
    f: np.ndarray
    potential: float
