"""Shared check of the adjoint's two execution policies (tests of integrated and NVT scenes)."""

from __future__ import annotations

import numpy as np

from simrun.adjoint.job import scene_gradient
from simrun.adjoint.policy import execution


def assert_chained_equals_one_by_one(scene, keys: list[str], checkpoints: int) -> None:
    """The reverse steps as native chains (and the schedule as native programs) and the
    interpreted policy's same launches one by one from Python: the same bits."""
    native = scene_gradient(scene, keys, threads=1, checkpoints=checkpoints)
    with execution(native=False):
        one_by_one = scene_gradient(scene, keys, threads=1, checkpoints=checkpoints)
    assert native.objective == one_by_one.objective
    for key in keys:
        np.testing.assert_array_equal(native.gradients[key], one_by_one.gradients[key],
                                      err_msg=key)
