"""Shared check of the adjoint's two executions (tests of integrated and NVT scenes)."""

from __future__ import annotations

import numpy as np

from simrun.adjoint.job import scene_gradient
from simrun.adjoint.policy import execution


def assert_native_equals_tape(scene, keys: list[str], checkpoints: int, atol: float) -> None:
    """The native reverse chain and the Tape sweep: the same objective bits and gradients to
    rounding (the same kernels on the same values; only the order in which scalar adjoints
    sum over steps differs: f64 rtol 1e-12 is ~1e4 roundings)."""
    native = scene_gradient(scene, keys, threads=1, checkpoints=checkpoints)
    with execution(native=False):
        tape = scene_gradient(scene, keys, threads=1, checkpoints=checkpoints)
    assert native.objective == tape.objective
    for key in keys:
        np.testing.assert_allclose(native.gradients[key], tape.gradients[key], rtol=1e-12,
                                   atol=atol, err_msg=key)
