"""Every scene's trajectory: `run`'s step as stages of launches, differentiated by the
engine. A step is the scene's `StepProgram` (stepper/program.py): `run`'s stepper's own,
or built again where differentiating changes the launches (`plan_differs`), in short:

    controller(k); G = dU/dx at x_k; first stage (reads G); G2 = dU/dx at x_(k+1);
    second stage (reads G2)

with the same kernels compiled the same way (the updates IEEE, no contraction) on the same
values, so the differentiated trajectory is `run`'s bit for bit. Each launch reads its G
from a field of its own (`Kernel.with_grad_reads`), so G is an ordinary input with an
adjoint: G-bar goes back through the forces as H G-bar (and the mixed derivatives in the
masses, energy parameters and fields the energy reads) by one forward-over-reverse pass.
`dt` / `integrator.damping`, when differentiated, are read from 0-D fields by the
derivatives' launches (`Kernel.with_field_args`; h = dt/2 carries the factor); so are a
thermostat's `integrator.temperature | friction | tau` and a step kernel's params. A primal
launch takes them as arguments, and reads G through `run`'s compiled code given G's address
in x.grad's place: the replay launches `run`'s compiled variants, one of each kernel. What a
thermostat or a step kernel carries (a chain, a clock, an MPM grid) is fields of the state.
Langevin's noise is drawn again from the seed, the same numbers, so the derivative is the
pathwise one. No integrator, thermostat or wall has an adjoint of its own.

A scene's `controller` (kernels run each step before the forces, e.g. a robot's network
writing the actuations the springs read) is the first launches of the step: its reverse
adds into the weights' and the state's adjoints, and what it overwrites gets adjoint zero.
Its kernels read the step index from the system's step field (`run`'s too; a native
program moves it on), and `dt`, when differentiated, from a 0-D field in their derivatives,
so its adjoint includes the controller's use of dt.

Here: the states, J along the trajectory, the objective's seeds, and the sweeps: the
forward one by `run`'s own stepper, the gradient as native programs over a slab of stored
states (program.py) whose reverse steps are the engine's reverse of the same launches
(reverse_step.py); forward mode's step is tangent.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from functools import cached_property

import numpy as np

from simrun.adjoint import policy, schedule
from simrun.adjoint.kernel_state import KernelAdjoint
from simrun.adjoint.model import DiffModel
from simrun.adjoint.program import NativeProgram
from simrun.adjoint.reverse_step import ReverseStep
from simrun.adjoint.scratch import check_order, check_values
from simrun.adjoint.tangent import TangentStep
from simrun.lang.autodiff.tape import access_of
from simrun.scene import SceneError
from simrun.stepper import thermo, updates
from simrun.stepper.binding import BoundKernel, parameter_names
from simrun.stepper.plan import Update, plan_differs
from simrun.stepper.program import FORCES, STEP_KERNELS, UPDATES, build_program
from simrun.stepper.state import State


class Trajectory:
    """A scene's trajectory on a DiffModel: its controller, its step kernels and its update
    plan as the stages of a step.

    `step_keys` maps each differentiated scalar the steps read (a `step_kernels.params.<name>`
    KEY, `dt`, a thermostat's) to its parameter name; those are read from 0-D fields in the
    twins."""

    def __init__(self, model: DiffModel, step_keys: dict[str, str],
                 progress: Callable[[str, int, int], None] | None = None):
        self.model, self.scene, self.system = model, model.scene, model.system
        scene, system, ti = self.scene, self.system, model.system.ti
        self.ti, self.step_keys = ti, step_keys
        self.at_mean = scene.objective.at == "mean"
        self.progress = progress or (lambda *_: None)
        self.need_energy_grads = False
        self._made: dict = {}  # (ReverseStep | TangentStep, policy.native) -> made once
        self.programs: dict = {}  # (snapshots, the ReverseStep) -> the schedule's program
        self.adjoint_horizon: list = []  # at: mean, (steps - k, 0, |adjoint of state k|)
        system.v._make_dual()
        self.floats = {n: f for n, f in system.extra.items() if f.dtype.is_float}
        for f in self.floats.values():
            f._make_grad()
            f._make_dual()
            f.grad._make_dual()  # the mixed derivative of energies that read the field
        self.step_field = system.step_field  # the controller's step index
        self.control_params = self._control_twins()  # (KEY, 0-D field) of its scalars
        # `run`'s own step (its program, its launches), unless differentiating changes it
        differentiated = frozenset(step_keys)
        self.program = model.stepper.program if not plan_differs(scene, differentiated) \
            else build_program(scene, system, model.stepper.box, differentiated)
        for f in self.program.scratch:  # a thermostat's per-step scalars: derivatives
            f._make_grad()
            f._make_dual()
        # a field per gradient slot a forces node writes (G = dU/dx at x_k, G2 at x_(k+1)),
        # read by the stages in its place of x.grad: an ordinary input with an adjoint
        n, dim = scene.particles.count, scene.particles.dim
        self.slots = {node.slot: ti.Vector.field(dim, dtype=system.fp, shape=n,
                                                 needs_grad=True, needs_dual=True)
                      for node in self.program if node.kind == FORCES}
        self.G, self.G2 = self.slots.values()  # the step's first and second evaluation
        # (KEY, 0-D field, d value / d KEY) of each differentiated scalar the steps read
        self.scalars: list = []
        self.made: dict = {}  # id(node) -> its launches here (twins reading G or G2)
        updates_made, stages = [], {}
        for node in self.program:
            slot = self.slots.get(node.slot)
            if node.kind == STEP_KERNELS:
                own = self.made[id(node)] = [self._twin(b, slot) for b in node.launches]
                self.scalars += [(key, f, 1.0) for key, name in step_keys.items()
                                 for tw in own for n, f in tw.kernel.field_args.items()
                                 if n == name]
            elif node.kind == UPDATES:
                self.made[id(node)] = [self._update(u, slot) for u in node.launches]
                updates_made += self.made[id(node)]
            if id(node) in self.made:
                stages.setdefault(node.stage, (slot, []))[1].extend(self.made[id(node)])
        self.strict = {id(b) for b in updates_made}  # compiled as `run` compiles updates
        # (the slot read, launches) per stage of the step, in order; a scene's own step
        # kernels first in theirs
        self.stages = [stages[k] for k in sorted(stages)]
        self.scratch = list(self.program.scratch)  # K, scale
        self.twins = [b for _, stage in self.stages for b in stage]  # jobs/reuse.py's

    def _twin(self, bound: BoundKernel, slot) -> BoundKernel:
        """The step kernel reading `slot` where it reads x.grad, and the differentiated scalars
        from 0-D fields; a read of any other gradient field cannot be differentiated."""
        system = self.system
        compiled = bound.kernel.prepare(bound.args, "primal")[0]
        refuse_random(bound, compiled, "step kernel")
        grads = [f for f in access_of(compiled).reads if getattr(f, "role", "primal") == "grad"]
        if any(f is not system.x.grad for f in grads):
            other = next(f for f in grads if f is not system.x.grad)
            raise SceneError(f"{bound.ref.where}: step kernel '{bound.ref.name}' reads the "
                             f"gradient field '{other.name}'; `simrun grad` differentiates "
                             "step kernels that read x.grad (the energy's dU/dx) only.")
        names = parameter_names(bound.kernel)
        kernel = bound.kernel
        if grads:
            kernel = kernel.with_grad_reads({n: slot for n, a in zip(names, bound.args)
                                             if a is system.x})
        wanted = sorted({n for n in self.step_keys.values() if n in names})
        if wanted:
            kernel = kernel.with_field_args(wanted)
        return BoundKernel(bound.ref, kernel, bound.args)

    def _control_twins(self) -> list:
        """The controller's kernels reading `step` from the step field where `System` has
        not made them so (so that a native program can move it on between steps; each
        Python call writes its argument there), and a differentiated dt from a 0-D field in
        its derivatives (`run`'s primal launch), in place; returns (KEY, that field)."""
        system, params = self.system, []
        for i, bound in enumerate(system.controller):
            prepare = getattr(bound.kernel, "prepare", None)
            if prepare is None:
                continue
            refuse_random(bound, prepare(bound.args, "primal")[0], "controller kernel")
            names = [n for n in parameter_names(bound.kernel) if
                     (n == "step" and "step" not in bound.kernel.field_args) or
                     (n == "dt" and "dt" in self.step_keys)]
            if not names:
                continue
            twin = bound.kernel.with_field_args(names)
            if "step" in names:
                twin.field_args["step"] = self.step_field
            system.controller[i] = BoundKernel(bound.ref, twin, bound.args)
            if "dt" in names:
                params.append(("dt", twin.field_args["dt"]))
        return params

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

    def compiled_as_run(self, bound: BoundKernel):
        """The context `run`'s stepper compiles this launch in: IEEE for the updates."""
        return updates.ieee() if id(bound) in self.strict else nullcontext()

    def scalar_field_values(self) -> list:
        """[(0-D field, its value)] of the scalars the step kernels, updates and controller
        read from fields in their derivatives' launches: their launch arguments, as a
        Python launch writes them (direct launches do not)."""
        out = []
        for b in self.twins + self.system.controller:
            fields = getattr(b.kernel, "field_args", {})
            names = [p.name for p in b.kernel.params()[0]] if fields else []
            out += [(f, b.args[names.index(n)]) for n, f in fields.items()]
        return out

    @cached_property
    def moving(self) -> dict:
        """The fields some launch of a step writes (the others keep their start values),
        less the scratch ones (KernelContext.scratch): no stored state holds those."""
        extra, scratch = self.system.extra, self.system.scratch
        check_order(self)
        written = set()
        for bound in self.twins + list(self.system.controller) + list(self.system.energy):
            if getattr(bound.kernel, "prepare", None) is None:  # e.g. a custom gradient's
                return {n: f for n, f in extra.items() if n not in scratch}  # all move
            with self.compiled_as_run(bound):
                written |= access_of(bound.kernel.prepare(bound.args, "primal")[0]).writes
        return {n: f for n, f in extra.items() if f in written and n not in scratch}

    def check_scratch_values(self, state: State) -> None:
        """Once per trajectory, the scratch fields' contract by value (scratch.py)."""
        if not getattr(self, "_scratch_checked", False):
            check_values(self, state)
            self._scratch_checked = True

    # ------------------------------------------------------------------ states
    def start(self, x0: np.ndarray, v0: np.ndarray,
              field_shifts: dict[str, np.ndarray] | None = None,
              field_values: dict[str, np.ndarray] | None = None) -> State:
        """The first state: allocated fields as their modules made them, or `field_values`
        (e.g. trained ones), moved by `field_shifts`; a thermostat's as `run` starts them
        (clock and chain at 0, the degrees of freedom decided from the first forces)."""
        system, extra = self.system, self.system.extra
        if "nvt_clock" in extra:
            system.set_state(x0, v0)
            potential, forces = system.forces()
            extra["nvt_dof"][None] = thermo.degrees_of_freedom(
                self.scene, forces, x0, potential,
                lambda shift: system.forces_moved(x0, shift)).count
            for name in ("nvt_clock", "nvt_xi", "nvt_vxi"):
                if name in extra:
                    extra[name].fill(0)
        for name, value in (field_values or {}).items():
            f = extra[name]
            f.from_numpy(np.asarray(value, dtype=f.to_numpy().dtype))
        for name, shift in (field_shifts or {}).items():
            f = extra[name]
            f.from_numpy((f.to_numpy() + shift).astype(f.to_numpy().dtype))
        system.set_state(x0, v0)
        x, v = system.get_state()
        potential, f = system.forces()
        return State(0, x, v, f, potential, self._fields())

    def _fields(self) -> dict[str, np.ndarray]:
        return {n: f.to_numpy() for n, f in self.system.extra.items()}

    def _load(self, state: State) -> None:
        system = self.system
        system.set_state(state.x, state.v)
        for n, f in system.extra.items():
            f.from_numpy(state.fields[n])
        self.G.from_numpy(np.negative(state.f))  # the bits x.grad held in `run`

    def advance(self, state: State, k: int) -> State:
        """Step k by `run`'s own stepper (one chained native call where `run` makes one)."""
        stepper, moving = self.model.stepper, self.moving
        for n, f in moving.items():  # the others hold the values every state has
            f.from_numpy(state.fields[n])
        stepper.load(state)
        stepper.step_index = k
        potential, done = self.model.objective.uses_potential, 0
        while done < 1:  # the NaN watch stops a chain early: go on as the step would
            done += stepper.advance(1, potential, forces_after=potential)
        if stepper.not_finite():
            self.check_state(self.system)
        nxt = State(k + 1, None, None, None, 0.0,
                    {**state.fields, **{n: f.to_numpy() for n, f in moving.items()}})
        stepper.store(nxt)
        if not potential and stepper.gradients is not None:
            nxt.potential = float("nan")  # not taken: the objective does not read it
        if stepper.forces_were_skipped:  # the controller's next step
            nxt.f = np.full_like(nxt.f, np.nan)  # takes them again: nothing reads them
        return nxt

    # ------------------------------------------------------------------ the objective
    def _weight(self, k: int, steps: int) -> float:
        """The objective's weight on the state after k steps (end: the last; mean: 1/n each)."""
        if self.at_mean:
            return 1.0 / steps if k >= 1 else 0.0
        return 1.0 if k == steps else 0.0

    def objective(self, state0: State, steps: int) -> float:
        """J of the trajectory (the forward sweep, nothing stored)."""
        total, state = [0.0], state0
        for k in range(steps):
            state = self.advance(state, k)
            self._accumulate(total, state, steps)
        return total[0]

    def _accumulate(self, total: list, state: State, steps: int) -> None:
        w = self._weight(state.step, steps)
        if w:
            total[0] += w * self.model.objective.value(state.x, state.v, state.potential, state.step)
        self.progress("forward", state.step, steps)

    def _seed(self, adj: KernelAdjoint, state: State, w: float) -> None:
        """Add w * dJ/d(state) of the objective at this state."""
        if not w:
            return
        model, extra = self.model, self.system.extra
        for n, values in state.fields.items():  # as the forward's objective saw them (a
            extra[n].from_numpy(values)  # controller's reverse leaves the step's outputs)
        for f in self.floats.values():
            f.grad.fill(0)
        dx, dv, dm, dp = model.objective.gradient(state.x, state.v, state.step)
        adj.x += w * dx
        adj.v += w * dv
        adj.mass += w * dm
        adj.add_params(dp, w)
        if self.scene.objective.kernel is not None:  # an objective may read the fields too
            for n, f in self.floats.items():
                adj.fields[n] += w * f.grad.to_numpy()
        if model.objective.uses_potential:
            adj.x -= w * state.f
            if self.need_energy_grads or self.floats:  # U reads the masses, params, fields
                grad_m, grad_p = model.energy_gradients(state.x)
                adj.mass += w * grad_m
                adj.add_params(grad_p, w)
                for n, f in self.floats.items():  # dU/dfield, e.g. a controller's output
                    adj.fields[n] += w * f.grad.to_numpy().astype(float)

    def record_adjoint(self, adj: KernelAdjoint, k: int, steps: int) -> None:
        """|dJ/d(state k)| (positions and velocities) at about a thousand states of the
        reverse sweep: how J's sensitivity grows with the horizon steps - k before it, which
        is exponential in a chaotic system (jobs/horizon.py)."""
        if k % max(1, steps // 1000) == 0:
            size = float(np.sqrt(np.sum(adj.x * adj.x) + np.sum(adj.v * adj.v)))
            self.adjoint_horizon.append((steps - k, 0.0, size))

    def check_state(self, system) -> None:
        """The forward sweep's state is finite, or the unstable simulation is the error (its
        next steps would index fields from NaN positions)."""
        for name, field in (("positions", system.x), ("velocities", system.v)):
            if not np.isfinite(field.to_numpy()).all():
                raise FloatingPointError(
                    f"the forward sweep's {name} became NaN or infinite: the simulation is "
                    "unstable at these parameters (`simrun run` of the scene with them names "
                    "the step); try a smaller dt or, in an optimisation, a smaller learning "
                    "rate or optimize.bounds")

    def _check_finite(self, adj: KernelAdjoint, k: int) -> None:
        for name, value in (("positions", adj.x), ("velocities", adj.v)):
            if not np.isfinite(value).all():
                raise FloatingPointError(
                    f"the reverse sweep's adjoint of the {name} became NaN or Inf at step {k} "
                    f"(time {k * self.scene.dt:g}): shorten the horizon (--steps)")

    # ------------------------------------------------------------------ the sweeps
    def gradient(self, state0: State, steps: int, snapshots: int
                 ) -> tuple[float, KernelAdjoint, schedule.Schedule]:
        """J and the adjoints by the binomial checkpoint schedule (schedule.py) as native
        programs (program.py), each reverse step the launches of reverse_step.py."""
        n, dim = state0.x.shape
        adj = KernelAdjoint(np.zeros((n, dim)), np.zeros((n, dim)),
                            {k: np.zeros(a.shape) for k, a in state0.fields.items()
                             if k in self.floats}, np.zeros(n))
        native = self._made_once(ReverseStep)
        key = (snapshots, id(native))  # kept with the trajectory (jobs/reuse.py)
        if key not in self.programs:
            self.programs[key] = NativeProgram(self, native, snapshots)
        native.prepare()
        self.adjoint_horizon = []
        value, sched = self.programs[key].gradient(state0, steps, snapshots, adj)
        return value, adj, sched

    def tangent_step(self) -> TangentStep:
        """The step's forward-mode launches under the policy in force (made on first use)."""
        return self._made_once(TangentStep)

    def _made_once(self, kind):
        """Made on first use and kept (`reuse.TrajectoryCache` reuses the trajectory)."""
        key = (kind, policy.current().native)
        if key not in self._made:
            self._made[key] = kind(self)
        return self._made[key]


def refuse_random(bound: BoundKernel, compiled, role: str) -> None:
    """A launch drawing ti.random() numbers: a reverse step replays it and would draw other
    numbers than the run did, so its gradient would belong to another noise."""
    if compiled.uses_random:
        raise SceneError(
            f"{bound.ref.where}: {role} '{bound.ref.name}' draws ti.random() numbers; `simrun "
            "grad` replays each step's launches, and a replay draws other numbers than the run "
            "did, so the gradient would belong to another noise. Draw noise keyed by the step "
            "instead (a hash of the particle index and a `step` argument, as the thermostats' "
            "counter-based noise is), or use a thermostat (integrator.type: langevin).")
