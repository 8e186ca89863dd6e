"""A scene's `controller` in its trajectory (kernels that run each step before the forces,
e.g. a robot's network writing the actuations the springs read); without one these hooks
do nothing.

A step is then: controller(x, v, step, weights) -> its outputs (fields); G = dU/dx at x with
those outputs; the step kernels. Forward, the controller runs after the state is loaded and
G is taken again. Reverse, once the step kernels and the forces are reversed (the forces'
mixed derivative puts dJ/d(output) into the outputs' adjoints), the controller is replayed on
a Tape seeded with the adjoints of x, v and every float field: its reverse adds into the
weights' and the state's adjoints (from the state before the step, reloaded: the step
kernels' replay has moved x and v on), and the outputs it overwrites get adjoint zero (the engine
zeroes the adjoint of a value a kernel overwrites), so what remains is dJ/d(state before).
Differentiating `dt`, controller kernels that take `dt` read it from a 0-D field (as the
step kernels' twins do), so its adjoint includes the controller's use of the time step.
Forward mode runs the controller under FwdMode: what it writes carries the tangent on."""

from __future__ import annotations

import numpy as np

from simrun.adjoint.kernel_sweep import KernelTrajectory, refuse_random
from simrun.stepper.binding import BoundKernel, parameter_names


class ControlledTrajectory(KernelTrajectory):
    """KernelTrajectory with the scene's controller run before each step's forces."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        system = self.system
        self.control_params: list = []  # (KEY, 0-D field) of differentiated controller scalars
        for bound in system.controller:
            prepare = getattr(bound.kernel, "prepare", None)
            if prepare is not None:
                refuse_random(bound, prepare(bound.args, "primal")[0], "controller kernel")
        if "dt" not in self.step_keys:
            return
        for i, bound in enumerate(system.controller):
            if "dt" in parameter_names(bound.kernel):
                twin = bound.kernel.with_field_args(["dt"])
                system.controller[i] = BoundKernel(bound.ref, twin, bound.args)
                self.control_params.append(("dt", twin.field_args["dt"]))

    def _before_kernels(self, k: int) -> None:
        system = self.system
        if not system.controller:
            return  # G is the state's (loaded)
        system.control(k)
        _potential, f = system.forces()
        self.G.from_numpy(np.negative(f))  # the bits x.grad holds, as in `run`
