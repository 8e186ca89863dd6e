"""Every scene's trajectory: `run`'s step as stages of launches, differentiated by the
engine. A step, as `simrun run` makes it (stepper/fieldstep.py, stepper/plan.py):

    controller(k); G1 = dU/dx at x_k;
    first stage (reads G1): the scene's step kernels and the walls, or the integrator's or
        thermostat's first updates (kick_drift with the walls, BAOA, a chain half-step)
    G2 = dU/dx at x_(k+1); second stage (reads G2): velocity Verlet's second kick, a
        thermostat's updates

with the same kernels compiled the same way (the updates IEEE, no contraction) on the same
values, so the differentiated trajectory is `run`'s bit for bit. Each launch reads its G
from a field of its own (`Kernel.with_grad_reads`), and `dt` / `integrator.damping`, when
differentiated, from 0-D fields (`Kernel.with_field_args`; h = dt/2 carries the factor); so
are a thermostat's `integrator.temperature | friction | tau` and a step kernel's params.
What a thermostat or a step kernel carries (a chain, a clock, an MPM grid) is fields of the
state. Langevin's noise is drawn again from the seed, the same numbers, so the derivative is
the pathwise one. No integrator, thermostat or wall has an adjoint of its own.

A scene's `controller` (kernels run each step before the forces, e.g. a robot's network
writing the actuations the springs read) is the first launches of the step: its reverse
adds into the weights' and the state's adjoints, and what it overwrites gets adjoint zero.
Differentiating `dt`, controller kernels that take `dt` read it from a 0-D field (as the
step kernels' twins do), so its adjoint includes the controller's use of the time step.

The forward steps are `run`'s own stepper (chained natively where `run` chains them); each
reverse step is the engine's reverse of the same launches, put in order once
(reverse_step.py) and made as one native call, or one by one (the interpreted policy, a
GPU); the whole schedule a few native programs where it can be (program.py).
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import cached_property

import numpy as np

from simrun.adjoint import policy
from simrun.adjoint.kernel_state import KernelState
from simrun.adjoint.kernel_sweep import KernelTrajectory, refuse_random
from simrun.adjoint.program import NativeProgram
from simrun.lang.autodiff.tape import access_of
from simrun.stepper import thermo, updates
from simrun.stepper.binding import BoundKernel, parameter_names
from simrun.stepper.plan import Update, build_plan
from simrun.stepper.state import State


class IntegratedTrajectory(KernelTrajectory):
    """A scene's trajectory: its controller, its step kernels and its update plan as the
    stages of a step."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        scene, system = self.scene, self.system
        self.control_params: list = []  # (KEY, 0-D field) of differentiated controller scalars
        # the controller's step index, read from this field by its twins, so that a native
        # program can move it on between steps (each Python call writes its argument here)
        self.step_field = self.ti.field(self.ti.i32, shape=())
        for i, bound in enumerate(system.controller):
            prepare = getattr(bound.kernel, "prepare", None)
            if prepare is None:
                continue
            refuse_random(bound, prepare(bound.args, "primal")[0], "controller kernel")
            names = [n for n in parameter_names(bound.kernel) if n == "step" or
                     (n == "dt" and "dt" in self.step_keys)]
            if not names:
                continue
            twin = bound.kernel.with_field_args(names)
            if "step" in names:
                twin.field_args["step"] = self.step_field
            system.controller[i] = BoundKernel(bound.ref, twin, bound.args)
            if "dt" in names:
                self.control_params.append(("dt", twin.field_args["dt"]))
        box = self.model.stepper.box  # the bounds `run`'s stepper gives the walls
        plan = build_plan(scene, system, box, frozenset(self.step_keys))
        self.G2 = self.ti.Vector.field(scene.particles.dim, dtype=system.fp,
                                       shape=scene.particles.count, needs_grad=True,
                                       needs_dual=True)  # G at x_(k+1), the second stage's
        first = [self._update(u, self.G) for u in plan.first]
        second = [self._update(u, self.G2) for u in plan.second]
        self.strict = {id(b) for b in first + second}  # compiled as `run` compiles updates
        self.programs: dict = {}  # snapshots -> the schedule's NativeProgram (or None)
        self.stages = (self.twins + first, second)  # a scene's own step kernels first
        carried = [system.x, system.v, system.m, *system.extra.values()]
        self.scratch = list({id(a): a for u in plan.first + plan.second for a in u.args
                             if getattr(getattr(a, "grad", None), "data", None) is not None
                             and not any(a is c for c in carried)}.values())  # K, scale
        self.twins = [b for stage in self.stages for b in stage]  # reuse.py's

    def _update(self, update: Update, g) -> BoundKernel:
        """The update kernel reading the field `g` for x.grad, and the differentiated scalars
        from 0-D fields: (KEY, field, d value / d KEY) of each in `self.scalars`."""
        twin = update.kernel
        if "x" in parameter_names(twin):
            twin = twin.with_grad_reads({"x": g})
        wanted = [n for n, (key, _) in update.keys.items() if key in self.step_keys]
        if wanted:
            twin = twin.with_field_args(wanted)
            self.scalars += [(update.keys[n][0], twin.field_args[n], update.keys[n][1])
                             for n in wanted]
        return BoundKernel(None, twin, update.args)

    def start(self, x0: np.ndarray, v0: np.ndarray, field_shifts=None, field_values=None
              ) -> KernelState:
        """The first state; a thermostat's fields as `run` starts them (clock and chain at 0,
        the degrees of freedom decided from the first forces)."""
        extra = self.system.extra
        if "nvt_clock" in extra:
            self.system.set_state(x0, v0)
            _, f = self.system.forces()
            extra["nvt_dof"][None] = thermo.degrees_of_freedom(self.scene, f).count
            for name in ("nvt_clock", "nvt_xi", "nvt_vxi"):
                if name in extra:
                    extra[name].fill(0)
        return super().start(x0, v0, field_shifts, field_values)

    def scalar_field_values(self) -> list:
        """[(0-D field, its value)] of the scalars the step kernels, updates and controller
        read from fields, as a Python launch writes them (direct launches do not)."""
        return [(f, f.data[()].copy()) for b in self.twins + self.system.controller
                for f in getattr(b.kernel, "field_args", {}).values()]

    def _before_kernels(self, k: int) -> None:
        """controller(k), then G = dU/dx at the state it left (else G is the state's)."""
        system = self.system
        if system.controller:
            system.control(k)
            self.G.from_numpy(np.negative(system.forces()[1]))  # the bits x.grad holds

    def _launch(self, stage: list[BoundKernel]) -> None:
        for bound in stage:
            with self.compiled_as_run(bound):
                bound()

    def compiled_as_run(self, bound: BoundKernel):
        """The context `run`'s stepper compiles this launch in: IEEE for the updates."""
        return updates.ieee() if id(bound) in self.strict else nullcontext()

    # ------------------------------------------------------------------ forward
    def advance(self, state: KernelState, k: int) -> KernelState:
        """Step k by `run`'s own stepper (one chained native call where `run` makes one)."""
        return self.advance_many(state, k, k + 1)

    def advance_many(self, state: KernelState, a: int, b: int) -> KernelState:
        """Steps a .. b-1 by `run`'s own stepper, chained natively where `run` chains them
        (the schedule's advances between stored states)."""
        stepper, moving = self.model.stepper, self.moving
        for n, f in moving.items():  # the others hold the values every state has
            f.from_numpy(state.fields[n])
        stepper.load(State(a, state.x, state.v, state.f, state.potential))
        potential, done = self.model.uses_potential(), 0
        while done < b - a:  # the NaN watch stops a chain early: go on as the steps would
            done += stepper.advance(b - a - done, potential, set_args=not self.args_set,
                                    forces_after=potential)
        nxt = State(b, state.x, state.v, state.f, state.potential)
        stepper.store(nxt)
        if not potential and stepper.gradients is not None:
            nxt.potential = float("nan")  # not taken: the objective does not read it
        if stepper.forces_were_skipped:  # the controller's next step
            nxt.f = np.full_like(nxt.f, np.nan)  # takes them again: nothing reads them
        fields = {**state.fields, **{n: f.to_numpy() for n, f in moving.items()}}
        return KernelState(b, nxt.x, nxt.v, nxt.f, nxt.potential, fields)

    @cached_property
    def moving(self) -> dict:
        """The fields some launch of a step writes (the others keep their start values)."""
        written = set()
        for bound in self.twins + list(self.system.controller) + list(self.system.energy):
            if getattr(bound.kernel, "prepare", None) is None:  # e.g. a custom gradient's
                return dict(self.system.extra)  # writes are not known: every field moves
            with self.compiled_as_run(bound):
                written |= access_of(bound.kernel.prepare(bound.args, "primal")[0]).writes
        return {n: f for n, f in self.system.extra.items() if f in written}

    def advance_launches(self, state: KernelState, k: int) -> KernelState:
        """Step k by the launches `reverse_step` replays (the update kernels' twins): the
        same bits as `advance` (a test holds them to it)."""
        system = self.system
        self._load(state)
        self._before_kernels(k)  # controller(k), G1 = dU/dx at x_k
        self._launch(self.stages[0])
        potential, f = system.forces()
        self.G2.from_numpy(np.negative(f))
        self._launch(self.stages[1])  # x stays: F at x_(k+1) is the state's
        x, v = system.get_state()
        return KernelState(k + 1, x, v, f, potential, self._fields())

    # ------------------------------------------------------------------ reverse
    def _native_gradient(self, native, adj, state0: KernelState, steps: int, snapshots: int):
        """The whole schedule as native programs (program.py) where it can be one (at: end,
        a chained stepper, the folded reverse step), else one native call per step."""
        program = None
        if policy.current().program:
            key = (snapshots, id(native))  # kept with the trajectory (reuse.py)
            if key not in self.programs:
                self.programs[key] = NativeProgram.build(self, native, snapshots)
            program = self.programs[key]
        if program is None:
            return self._stepwise(native, adj, state0, steps, snapshots)
        native.prepare()
        value, sched = program.gradient(state0, steps, snapshots, adj)
        return value, adj, sched
