"""One trajectory kept between the gradients of one scene (`simrun optimize`'s iterations).

A new System per gradient costs `ti.init`, allocating the fields, lowering and resolving every
kernel again and building the native chains: more than a short episode's sweeps (a 681-step
robot: ~40 ms of 100). `TrajectoryCache` keeps the trajectory of the last scene object it
was asked for and, before each use, puts the fields back as the System made them (the
modules' allocations, the scene's `fields:`) and zeroes every gradient and tangent, so a
gradient from the cache is the one a fresh trajectory gives, bit for bit (a test checks).
It is used only while the engine is the one the trajectory was compiled for (no `ti.init`
since) and for step-kernel scenes without a neighbour list (whose list carries state).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simrun.adjoint.trajectory import Trajectory
from simrun.lang.api import runtime
from simrun.lang.fields import grad_of


def _companions(f) -> list:
    """f's gradient, tangent and the gradient's tangent, where they are allocated."""
    out = []
    grad = grad_of(f)
    for c in (grad, getattr(f, "dual", None), getattr(grad, "dual", None)):
        if c is not None and getattr(c, "data", None) is not None:
            out.append(c)
    return out


@dataclass
class TrajectoryCache:
    """The last trajectory made through `get`, with the fields' values to restore."""

    key: tuple = ()
    scene: Any = None
    engine: Any = None
    traj: Any = None
    start: dict = field(default_factory=dict)  # field -> its values as the System made them
    zeroed: list = field(default_factory=list)

    def get(self, scene, key: tuple, make: Callable[[], Any]):
        """The cached trajectory, reset, when `scene` is the cached object and `key` (KEYs,
        threads) matches; else a new one from `make()`, cached when it can be reset."""
        if self.traj is not None and scene is self.scene and key == self.key and \
                runtime() is self.engine:
            self._reset()
            return self.traj
        traj = make()
        self.traj = None
        if _resettable(traj):
            self.key, self.scene, self.engine, self.traj = key, scene, runtime(), traj
            system = traj.system
            fields = [system.x, system.v, system.m, system.U, traj.G,
                      *system.extra.values(), *system.topology.values()]
            self.start = {f: f.data.copy() for f in fields}
            kernels = [b.kernel for b in system.energy + traj.twins + system.controller]
            extra = [f for k in kernels for f in getattr(k, "field_args", {}).values()]
            extra += list(traj.model.objective.fields.values())
            self.zeroed = [c for f in fields + extra for c in _companions(f)]
        return traj

    def _reset(self) -> None:
        for f, values in self.start.items():
            np.copyto(f.data, values)
            f.version += 1
        for c in self.zeroed:
            c.data[...] = 0
            c.version += 1


def _resettable(traj) -> bool:
    return isinstance(traj, Trajectory) and traj.system.neighbor_list is None
