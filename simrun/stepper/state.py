"""The integrator's state between steps (what frames, checkpoints and the adjoint hold)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class State:
    """The state after ``step`` steps; ``f`` and ``potential`` are at ``x``. ``fields``:
    the allocated fields a step carries (step kernels', a thermostat's), where the caller
    holds them outside the system (the adjoint's stored states); `run` keeps them in the
    system's fields and leaves this empty."""

    step: int
    x: np.ndarray
    v: np.ndarray
    f: np.ndarray
    potential: float
    fields: dict[str, np.ndarray] = field(default_factory=dict)
