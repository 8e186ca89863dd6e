"""One step = engine launches on the system's fields, and many steps per native call.

A step is the scene's `StepProgram` (program.py: controller, forces, update stages, walls,
NaN watch, in the one order written there); every sequence of launches here is a walk over
its nodes, with both gradient slots bound to x.grad. When every launch is a plain compiled
simrun.lang kernel, the whole step is one `Chain` and ``advance(n)`` makes n steps in one
native call, stopping after the first step whose state is not finite; otherwise (an energy
that brings its own gradient, random numbers, a Tape or FwdMode around the step) the same
nodes run from Python, with ``System.forces`` for the forces. A scene with a `controller`
runs one native call per step, the step index written into the controller's launch
arguments between calls. A scene with a neighbour list steps from Python: its rebuild check
is a node before the forces.

The state lives in the fields between calls: x, v, F = -x.grad and U. ``load``/``store``
move a `State` in and out at chunk boundaries (frames, checkpoints, the adjoint's stored
states).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simrun.lang.api import runtime
from simrun.lang.autodiff.tape import recording
from simrun.lang.runtime.chain import Chain
from simrun.scene.schema import Scene
from simrun.stepper import updates
from simrun.stepper.program import (
    AT_START,
    CONTROLLER,
    FORCES,
    NEIGHBORS,
    STEP_KERNELS,
    UPDATES,
    WATCH,
    build_program,
)
from simrun.stepper.state import State
from simrun.stepper.system import System


def flat_index(kernel, name: str) -> int | None:
    """Where the scalar argument `name` sits among a launch's flat scalar arguments (None:
    no such scalar, or one read from a 0-D field)."""
    index = 0
    for p in kernel.params()[0]:
        if p.name == name:
            return index if p.kind == "scalar" and not kernel.reads_field(name, "primal") \
                else None
        if p.kind == "scalar" and not kernel.reads_field(p.name, "primal"):
            index += 1
        elif p.kind == "matrix":
            index += p.annotation.n * p.annotation.m
    return None


def chainable(kernel, args) -> tuple | None:
    """(compiled variant, flat scalar arguments) of a launch a chain can make, else None."""
    found = direct_launch(kernel, args)
    if found is None or not found[0].chainable:
        return None  # not chainable: a GPU kernel (--device cuda) launches one by one
    return found


def direct_launch(kernel, args) -> tuple | None:
    """(compiled variant, flat scalar arguments) of a launch the stepper can make without a
    Python kernel call, else None. Such a call keeps what a later ``kernel.grad()`` would
    need (the fields the launch overwrites): on a GPU, a download of x and v every step."""
    prepare = getattr(kernel, "prepare", None)  # simrun.lang kernels (not grad_replaced ones)
    if prepare is None:
        return None
    compiled, flat, arrays = prepare(args, "primal")
    if arrays or compiled.uses_random or compiled.ndarray_slots:
        return None
    return compiled, flat


class FieldStepper:
    """The step of a scene on its System's fields (see the module docstring)."""

    def __init__(self, scene: Scene, system: System) -> None:
        ti = system.ti
        self.scene, self.system = scene, system
        self.has_energy = bool(system.energy)
        self.direct = None
        self.step_index = 0  # the controller's `step` argument; `load` and `advance` keep it
        self.forces_were_skipped = False  # the last `advance` left F and U before its step
        self.bad = ti.field(ti.i32, shape=())
        dim = scene.particles.dim
        self.box = ti.Vector.field(dim, dtype=system.fp, shape=2)
        wall = updates.WALLS[scene.boundary.type]
        if wall != updates.NO_WALL:
            self.box.from_numpy(np.array([scene.boundary.low, scene.boundary.high],
                                         dtype=system.np_dtype))
        self.program = build_program(scene, system, self.box)
        self.forces = self._force_launches()  # compiles the energies as `run` always has
        to_clear = self._grads_to_clear()
        self.made = {}  # id(node) -> its launches, for the nodes that are launches
        for node in self.program:
            if node.kind == STEP_KERNELS:
                self.made[id(node)] = [self._launch(b.kernel, b.args) for b in node.launches]
        with updates.ieee():  # only the updates: IEEE rounding like the NumPy they replace
            for node in self.program:
                if node.kind == UPDATES:
                    self.made[id(node)] = [self._launch(u.kernel, u.args)
                                           for u in node.launches]
            self.watch = self._launch(updates.watch, (system.x, system.v, system.U, self.bad))
            self.clear = [self._launch(updates.zero, (g,)) for g in to_clear]
            self.clear.append(self._launch(updates.reset_loss, (system.U,)))
        # the launches of each stage (pre: before the forces at x_(k+1), post: after them,
        # with the watch), for callers that time them one by one (bench/)
        self.pre = [p for n in self.program if n.stage == 0 for p in self.made[id(n)]]
        self.post = [p for n in self.program if n.stage == 1 for p in self.made[id(n)]]
        self.post.append(self.watch)
        self.chain = self.forces_only = self.gradients = self.stepped = None
        self.control = self._control_launches()  # [] without a controller
        gradients = self.direct.gradient() if self.direct is not None else None
        if not system.controller:  # forces without U, for Python steps and chains alike
            self.gradients = gradients
        if self.forces is not None and self.control is not None:
            control = [launch for launch, _ in self.control]
            launches = self._sequence(self.forces, control)
            if launches is not None:
                self.chain = Chain(runtime(), launches, stop=self.bad)
                stepped = self._sequence(self.forces, control, forces_after=False)
                if control and len(stepped) < len(launches):  # nothing read F at x_(k+1)
                    self.stepped = Chain(runtime(), stepped, stop=self.bad)
                if gradients is not None and not control:
                    self.forces_only = Chain(runtime(), self._sequence(gradients, control),
                                             stop=self.bad)

    def _sequence(self, forces: list, control: list, watch: bool = True,
                  forces_after: bool = True, part=lambda launch: launch) -> list | None:
        """A step's launches by a walk over the program: `forces` for each force evaluation
        the step makes (its carried one is the state's), `control` for the controller;
        without `forces_after`, the forces after the step are left out where no node of
        the step reads them. `part` maps each launch to what the caller chains, None where
        it cannot (then the step is None, as it is with a neighbour list's rebuild check,
        which runs from Python)."""
        def launches(node) -> list | None:
            if node.kind == CONTROLLER:
                return control
            if node.kind == FORCES:
                skipped = node.carried or (not forces_after and not node.read_in_step)
                return [] if skipped else [part(p) for p in self.clear] + forces
            if node.kind == WATCH:
                return [part(self.watch)] if watch else []
            if node.kind == NEIGHBORS:
                return None
            return [part(p) for p in self.made[id(node)]]

        found = self.program.walk(launches)
        if found is None or not all(isinstance(p, tuple) for p in found):
            return None
        return found

    def step_launches(self, potential: bool = True, control: list | None = None
                      ) -> list | None:
        """One step's launches, (compiled, flat) each, without the NaN watch (the last of
        ``post``), for callers that make steps with other launches (chained on a CPU, one by
        one on a GPU); None where a step is not all such launches (or a neighbour list's
        rebuild check comes first). Without `potential`, U may be left as it was (see
        ``advance``). A controller's launches need the step index in their arguments: a
        caller gives `control`, launches that take their place (twins reading the index
        from a field it moves on), and gets the step as ``advance(forces_after=potential)``
        makes it, else None."""
        if self.forces is None:
            return None
        if self.system.controller:
            if control is None or len(control) != len(self.system.controller) or \
                    not all(control):
                return None
            return self._sequence(self.forces, control, watch=False,
                                  forces_after=potential, part=_direct)
        forces = self.forces if potential or self.gradients is None else self.gradients
        return self._sequence(forces, [], watch=False, part=_direct)

    def _launch(self, kernel, args) -> tuple | Callable[[], None]:
        found = direct_launch(kernel, args)
        if found is None:
            return lambda: kernel(*args)
        if found[0].chainable:
            return found
        return GPULaunch(kernel, args, found)  # launched one by one

    def _control_launches(self) -> list | None:
        """[((compiled, flat), index of `step` in flat or None)] of the controller kernels,
        or None when one cannot be chained."""
        out = []
        for bound in self.system.controller:
            found = chainable(bound.kernel, bound.args)
            if found is None:
                return None
            compiled, flat = found
            out.append(((compiled, list(flat)), flat_index(bound.kernel, "step")))
        return out

    def _grads_to_clear(self) -> list:
        system = self.system
        if not self.has_energy:
            return [system.x.grad]
        return [g for g in system.energy_terms().touched_grads if g is not system.U.grad]

    def _force_launches(self) -> list | None:
        """The energies' value and gradient launches (`EnergyTerms`), or None when the Tape
        would do more."""
        if not self.has_energy:
            return []
        system = self.system
        system.forces()  # compiles the energies as `run` always has
        self.direct = system.energy_terms()
        return self.direct.value_and_gradient()

    # ------------------------------------------------------------------ state
    def load(self, state: State) -> None:
        """Put a state into the fields (x, v, x.grad = -F, U)."""
        system = self.system
        system.set_state(state.x, state.v)
        system.x.grad.data[...] = np.negative(state.f)
        system.U.data[()] = state.potential
        self.step_index = state.step

    def store(self, state: State) -> None:
        """Read the fields into `state` (new arrays: frames and stored states keep theirs)."""
        system = self.system
        state.x, state.v = system.get_state()
        if self.has_energy:
            state.f = np.negative(system.x.grad.host_values(write=False))  # read: a GPU
            state.potential = float(system.U.host_values(write=False)[()])  # uploads none
        else:
            state.f, state.potential = np.zeros_like(state.x), 0.0

    # ------------------------------------------------------------------ steps
    def advance(self, steps: int, potential: bool = True, set_args: bool = True,
                forces_after: bool = True) -> int:
        """Make up to `steps` steps on the fields; returns the steps made, fewer when the
        state after the last one is not finite (NaN or Inf). Without `potential`, U may be
        left as it was (where the forces do not need it): the caller must not read it.
        `set_args=False`: a controlled step trusts the launches' scalar arguments as the
        last call left them (a gradient's many short advances; the step index is written).
        `forces_after=False`: a controlled step may leave F and U as the forces before its
        step kernels were (the next step's controller takes them again anyway), where the
        caller reads neither (`forces_were_skipped` says whether they were)."""
        self.bad.data[()] = 0
        self.forces_were_skipped = False
        for bound in self.system.energy:
            bound.kernel.last_launch = None  # as the Tape's record leaves it
        if self.direct is not None and set_args:
            self.direct.set_field_args()
        if self.chain is not None and not recording():
            if self.control:
                chain = self.chain if forces_after or self.stepped is None else self.stepped
                self.forces_were_skipped = chain is not self.chain
                return self._controlled_steps(steps, set_args, chain)
            chain = self.forces_only if not potential and self.forces_only is not None \
                else self.chain
            done = chain.run(steps)
            self.step_index += done
            return done
        for done in range(1, steps + 1):
            self._python_step(potential and done == steps)
            self.step_index += 1
            if self.bad.host_values(write=False)[()]:
                return done
        return steps

    def _controlled_steps(self, steps: int, set_args: bool, chain: Chain) -> int:
        """One native call per step: the controller's launches get the step index first."""
        if set_args:
            chain.set_args()
        for done in range(1, steps + 1):
            self.system.step_field[None] = self.step_index  # what its kernels read
            for (compiled, flat), at in self.control:
                if at is not None:
                    flat[at] = self.step_index
                    chain.set_args(compiled)
            chain.run(1, set_args=False)
            self.step_index += 1
            if self.bad.data[()]:
                return done
        return steps

    def not_finite(self) -> bool:
        """Whether the NaN watch stopped the last ``advance`` (its last step is bad)."""
        return bool(self.bad.host_values(write=False)[()])

    def _python_step(self, potential: bool = True) -> None:
        """One step from Python, a walk over the program; without ``potential`` the forces
        after the step may skip U (the energies' forward launches), as `forces_only` does:
        only the last step of a call needs it."""
        for node in self.program:
            if node.kind == CONTROLLER:
                self.system.control(self.step_index)
            elif node.kind == NEIGHBORS:
                self.system.refresh_neighbors()
            elif node.kind == FORCES:
                if not node.carried:
                    self._forces(potential or node.slot == AT_START)
            elif node.kind == WATCH:
                self._make(self.watch)
            else:
                for part in self.made[id(node)]:
                    self._make(part)

    def _forces(self, potential: bool = True) -> None:
        if self.forces is not None and not recording():
            forces = self.forces if potential or self.gradients is None else self.gradients
            for part in self.clear + forces:
                self._make(part)
        else:
            self.system.forces()

    @staticmethod
    def _make(part) -> None:
        if callable(part):
            part()
        else:
            compiled, flat = part
            compiled.launch(flat)


class GPULaunch:
    """A GPU kernel's launch, made one by one (chains are the CPU's); a Tape recording
    around it gets the kernel call instead."""

    def __init__(self, kernel, args, found: tuple) -> None:
        self.kernel, self.args, self.found = kernel, args, found

    def __call__(self) -> None:
        if recording():
            self.kernel(*self.args)
        else:
            self.found[0].launch(self.found[1])


def _direct(part) -> tuple | None:
    """(compiled, flat) of a step's part, or None where it is made by a Python call."""
    if isinstance(part, tuple):
        return part
    return part.found if isinstance(part, GPULaunch) else None
