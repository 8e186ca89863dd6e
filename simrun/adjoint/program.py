"""The whole checkpoint schedule as native programs: forward steps, stored states and reverse
steps run from machine code, a few thousand schedule actions per call.

The binomial schedule (schedule.py) still decides every action, but its states are slots of
one preallocated slab of engine fields (x, v, F and each field a step carries, e.g. a
thermostat's chain and clock, a controller's outputs, an MPM grid, per slot, in their own
precision) instead of NumPy arrays in Python objects, and its actions are rows of a `Chain`
program: LOAD a slot into the system's fields, STEP n times (the stepper's own launches,
without its NaN watch), STORE the fields into a slot, REVERSE one step (the state before it
from a slot, then `reverse_step.ReverseStep`'s launches; folded, they keep the forces after
the step from the step reversed just before). A small kernel at the start of each LOAD,
STORE and REVERSE reads that row's slot, and the step of the state it names, from two ops
tables, so one call runs a whole stretch of the schedule without Python or NumPy between
its steps (under the interpreted policy, and on a GPU, whose kernels chains cannot post, the
same rows run launch by launch from Python, the states still in the slabs). A controller's twins read that step index from a field, and a launch moves it
on after each step. Copies are bit-exact (F is stored as -x.grad, restored as -F): the
gradient has the same bits as the step-by-step native sweep's.

The objective must read only the final state (at: end): its seed, the last step and the
first reverse step run from Python once. A NaN or Inf in the adjoint stops the program after
that reverse step, and the error names it.
"""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.adjoint import policy
from simrun.adjoint.kernel_state import KernelState
from simrun.adjoint.launches import Rows, chains
from simrun.adjoint.schedule import Schedule, reverse
from simrun.lang.api import runtime
from simrun.lang.runtime.chain import Chain
from simrun.stepper import updates
from simrun.stepper.fieldstep import direct_launch
from simrun.stepper.state import State

OPS = 4096  # slot arguments per native call
STEPS_PER_CALL = 20_000  # forward steps per call at most (progress, Ctrl-C)


@ti.kernel
def next_slot(ops: ti.template(), at: ti.template(), pc: ti.template(), slot: ti.template(),
              step: ti.template()):
    """The slot of this program row and the step of the state it names: the next entries
    of the ops tables (the step is the controller's step index from here on)."""
    for _ in range(1):
        slot[None] = ops[pc[None]]
        step[None] = at[pc[None]]
        pc[None] += 1


@ti.kernel
def next_step(step: ti.template()):
    """After a step: the controller's step index moves on."""
    for _ in range(1):
        step[None] += 1


@ti.kernel
def load_slot(sx: ti.template(), sv: ti.template(), sf: ti.template(), slot: ti.template(),
              x: ti.template(), v: ti.template()):
    """A stored state into the system: x, v and x.grad = -F (as FieldStepper.load)."""
    for i in x:
        k = slot[None]
        x[i] = sx[k, i]
        v[i] = sv[k, i]
        x.grad[i] = -sf[k, i]


@ti.kernel
def store_slot(x: ti.template(), v: ti.template(), sx: ti.template(), sv: ti.template(),
               sf: ti.template(), slot: ti.template()):
    """The system's state into a slot (F = -x.grad, as FieldStepper.store)."""
    for i in x:
        k = slot[None]
        sx[k, i] = x[i]
        sv[k, i] = v[i]
        sf[k, i] = -x.grad[i]


@ti.func
def _row_index(I, f: ti.template()):
    """Where element I of an n-D field sits in its slab's row (row-major)."""
    k = 0
    for d in ti.static(range(len(f.shape))):
        k = k * f.shape[d] + I[d]
    return k


@ti.kernel
def load_field(slab: ti.template(), slot: ti.template(), f: ti.template()):
    """A carried field from its slab's row `slot`."""
    if ti.static(len(f.shape) == 0):
        for _ in range(1):
            f[None] = slab[slot[None], 0]
    else:
        for I in ti.grouped(f):
            f[I] = slab[slot[None], _row_index(I, f)]


@ti.kernel
def store_field(f: ti.template(), slab: ti.template(), slot: ti.template()):
    """A carried field into its slab's row `slot`."""
    if ti.static(len(f.shape) == 0):
        for _ in range(1):
            slab[slot[None], 0] = f[None]
    else:
        for I in ti.grouped(f):
            slab[slot[None], _row_index(I, f)] = f[I]


def stopped_at(program: np.ndarray, done: int, reverse_first: int, first_reversed: int) -> int:
    """The step whose reverse row stopped a program after ``done`` repetitions: rows that
    start at launch ``reverse_first`` reverse the steps first_reversed, first_reversed - 1,
    ... in turn, one a repetition (the schedule reverses in order)."""
    ends = np.cumsum(program[:, 2])
    row = int(np.searchsorted(ends, done))
    reversing = program[:, 0] == reverse_first
    before = int(program[:row, 2][reversing[:row]].sum())
    within = done - (int(ends[row]) - int(program[row, 2])) - 1 if reversing[row] else 0
    return first_reversed - before - within


class Held:
    """A state of the schedule: its step and its slot (None: only in the system's fields)."""

    __slots__ = ("step", "slot")

    def __init__(self, step: int, slot: int | None) -> None:
        self.step, self.slot = step, slot


def _slabs(fields: dict, slots: int) -> dict:
    """A slab per carried field ({name: (field, slab)}): per slot, a row of the field's
    elements (scalars, vectors or matrices) in row-major order."""
    return {n: (f, _slab(f, (slots, max(int(np.prod(f.shape)), 1)))) for n, f in fields.items()}


def _slab(f, shape: tuple):
    """A field of `shape` whose elements are f's."""
    elem = f.elem_shape
    if not elem:
        return ti.field(f.dtype, shape=shape)
    if len(elem) == 1:
        return ti.Vector.field(elem[0], f.dtype, shape=shape)
    return ti.Matrix.field(*elem, f.dtype, shape=shape)


class NativeProgram:
    """The gradient sweep of an `IntegratedTrajectory` as native programs (see the module
    docstring); ``build`` returns None where the schedule cannot be one."""

    @classmethod
    def build(cls, traj, native, snapshots: int) -> NativeProgram | None:
        if traj.at_mean:
            return None
        program = cls(traj, native, snapshots, _slabs(native.moving, snapshots + 2))
        return program if program.chain is not None else None

    def __init__(self, traj, native, snapshots: int, slabs: dict) -> None:
        system, stepper = traj.system, traj.model.stepper
        n, dim, fp = traj.scene.particles.count, traj.scene.particles.dim, system.fp
        self.traj, self.native, self.stepper, self.system = traj, native, stepper, system
        self.scratch = snapshots + 1  # slot 0: the start; 1 .. snapshots: the stored states
        vec = ti.Vector.field
        self.sx, self.sv, self.sf = (vec(dim, fp, shape=(snapshots + 2, n)) for _ in range(3))
        self.slabs = slabs
        self.ops, self.at = ti.field(ti.i32, shape=OPS), ti.field(ti.i32, shape=OPS)
        self.pc, self.slot = ti.field(ti.i32, shape=()), ti.field(ti.i32, shape=())
        slab, x, slot = (self.sx, self.sv, self.sf), system.x, self.slot
        tick = (next_slot, (self.ops, self.at, self.pc, slot, traj.step_field))
        load = [(load_slot, (*slab, slot, x, system.v))] + \
            [(load_field, (s, slot, f)) for f, s in slabs.values()]
        store = [(store_slot, (x, system.v, *slab, slot))] + \
            [(store_field, (f, s, slot)) for f, s in slabs.values()]
        with updates.ieee():
            blocks = {"load": [tick, *load], "store": [tick, *store], "reverse": [tick, *load]}
            blocks = {k: [direct_launch(*launch) for launch in b] for k, b in blocks.items()}
        # recomputed steps never need U (only the final state's, which _first_reverse makes):
        # the gradients alone where they read nothing the energies' forward launches write;
        # a controller's twins read the step index, which moves on after each step
        control = [direct_launch(b.kernel, b.args) for b in system.controller]
        blocks["step"] = stepper.step_launches(potential=False, control=control) or [None]
        if control:
            blocks["step"].append(direct_launch(next_step, (traj.step_field,)))
        blocks["reverse"] += native.backward.launches
        blocks["step_store"] = blocks["step"] + blocks["store"]
        launches, rows = [], {}
        for name, block in blocks.items():
            rows[name] = [len(launches), len(block), 1]
            launches += block
        self.chain = None  # where a step or a copy is not a compiled launch
        if all(launches):  # one native call per stretch, else the rows one by one
            chained = policy.current().native and all(map(chains, launches))
            self.chain = (Chain(runtime(), launches, stop=native.bad) if chained
                          else Rows(launches, stop=native.bad))
        self.load_row, self.store_row, self.reverse_row = rows["load"], rows["store"], \
            rows["reverse"]
        self.step_row = [*rows["step"][:2], 0]  # the steps are added to its repeats
        self.step_store_row = rows["step_store"]
        self.program: list[int] = []  # (first launch, launch count, repeats) per row, flat
        self.args: list[int] = []  # the slot of each load, store and reverse row, in order
        self.arg_steps: list[int] = []  # ... and the step of the state it names
        self.step_end = -1  # len(program) after the last step row (more steps extend it)
        self.first_reversed = -1  # the step the first reverse row of this call reverses
        self.live: Held | None = None  # the state the system's fields hold
        self.pending_steps = 0
        self.used: list[int] = []  # slots of stored states, in the order stored (LIFO)

    # ------------------------------------------------------------------ the program
    def flush(self) -> None:
        """Run the rows emitted so far in one native call; a reverse step whose adjoint
        became NaN or Inf is raised as the step-by-step sweep raises it."""
        if not self.program:
            return
        self.ops.data[: len(self.args)] = self.args
        self.at.data[: len(self.args)] = self.arg_steps
        self.pc.data[()] = 0
        self.native.bad.data[()] = 0
        for bound in self.system.energy:
            bound.kernel.last_launch = None
        if self.stepper.direct is not None:
            self.stepper.direct.set_field_args()
        if self.native.energy:
            self.native.hvp.set_field_args()
        program = np.array(self.program, dtype=np.int64).reshape(-1, 3)
        done = self.chain.run_program(program)
        if self.native.bad.data[()]:
            self.native.pull(self.adj)
            self.traj._check_finite(self.adj, stopped_at(program, done, self.reverse_row[0],
                                                         self.first_reversed))
        self.program, self.args, self.arg_steps = [], [], []
        self.pending_steps, self.step_end, self.first_reversed = 0, -1, -1

    def _emit_repeated(self, row: list[int], slots: range) -> None:
        """One row repeated once per slot (its tick reads them in turn); slot k holds the
        state at step k."""
        if len(self.args) + len(slots) > OPS:
            self.flush()
        self.args += slots
        self.arg_steps += slots
        self.program += [row[0], row[1], len(slots)]

    def _emit(self, row: list[int], slot: int, step: int) -> None:
        if len(self.args) >= OPS:
            self.flush()
        self.args.append(slot)
        self.arg_steps.append(step)
        self.program += row

    # ------------------------------------------------------------------ schedule callbacks
    def advance_many(self, held: Held, a: int, b: int) -> Held:
        if self.live is not held:
            self._emit(self.load_row, held.slot, held.step)
        left = b - a
        while left:
            take = min(left, STEPS_PER_CALL - self.pending_steps)
            if len(self.program) != self.step_end:
                self.program += self.step_row
                self.step_end = len(self.program)
            self.program[-1] += take
            self.pending_steps += take
            left -= take
            if self.pending_steps >= STEPS_PER_CALL:
                self._progress(b - left)
                self.flush()
        self.live = Held(b, None)
        return self.live

    def advance(self, held: Held, k: int) -> Held:
        return self.advance_many(held, k, k + 1)

    def copy(self, held: Held) -> Held:
        held.slot = len(self.used) + 1
        self.used.append(held.slot)
        self._emit(self.store_row, held.slot, held.step)
        return held

    def release(self, held: Held) -> None:
        if self.used.pop() != held.slot:
            raise AssertionError("stored states freed out of order")

    def reverse_step(self, held: Held, k: int) -> None:
        if k == self.steps - 1:
            self._first_reverse(held)
        slot = held.slot
        if slot is None:  # advanced to, not stored: through the scratch slot
            slot = self.scratch
            self._emit(self.store_row, slot, k)
        self._emit(self.reverse_row, slot, k)
        if self.first_reversed < 0:
            self.first_reversed = k
        self.reversed_to = k
        self.live = None
        if len(self.args) >= OPS - 2:
            self._progress(k)
            self.flush()

    def _progress(self, step: int) -> None:
        """Forward steps reached in the first descent, then steps reversed (the last step
        handed to the program, ``reversed_to``, not the recomputations' steps)."""
        if self.first_descent:
            self.traj.progress("forward", step, self.steps)
        else:
            self.traj.progress("reverse", self.steps - self.reversed_to, self.steps)

    def _first_reverse(self, held: Held) -> None:
        """The last step from Python: its end state's objective and seed, the adjoint into
        the native step's fields, the forces after the step into its G2."""
        traj, native = self.traj, self.native
        if self.live is not held:
            self._emit(self.load_row, held.slot, held.step)
        if held.slot is None:
            self._emit(self.store_row, self.scratch, held.step)
            held.slot = self.scratch
        self.flush()
        self.first_descent = False
        potential, done = traj.model.uses_potential(), 0
        self.stepper.step_index = self.steps - 1  # a controller's step index
        while done < 1:
            done += self.stepper.advance(1, potential)
        nxt = State(self.steps, None, None, None, 0.0)
        self.stepper.store(nxt)
        if not potential and self.stepper.gradients is not None:  # U was not taken
            nxt.potential = float("nan")
        end = KernelState(self.steps, nxt.x, nxt.v, nxt.f, nxt.potential, traj._fields())
        traj._accumulate(self.total, end, self.steps)
        traj._seed(self.adj, end, traj._weight(self.steps, self.steps))
        native.push(self.adj)
        native.begin(end)
        self.live = None
        self._progress(self.steps - 1)

    # ------------------------------------------------------------------ the sweep
    def gradient(self, state0: KernelState, steps: int, snapshots: int, adj
                 ) -> tuple[float, Schedule]:
        """J (at: end) and the adjoint (in ``adj``) after the whole reverse sweep."""
        self.steps, self.adj, self.total = steps, adj, [0.0]
        self.first_descent, self.reversed_to = True, steps
        self.sx.data[0], self.sv.data[0], self.sf.data[0] = state0.x, state0.v, state0.f
        for name, (_, slab) in self.slabs.items():
            slab.data[0] = np.reshape(state0.fields[name], slab.data.shape[1:])
        start = Held(0, 0)
        self.traj.step_field[None] = 0  # the fields hold the start (`_every_state` steps it)
        if 1 < steps <= snapshots + 1:
            sched = self._every_state(steps)
        else:
            sched = reverse(start, steps, snapshots, self.advance, self.reverse_step,
                            self.copy, self.advance_many, self.release)
        self.flush()
        if steps:
            self.traj.progress("reverse", steps, steps)
            if not self.native.finish(state0):
                self.native.pull(adj)
                self.traj._check_finite(adj, 0)
        self.native.pull(adj)
        return self.total[0], sched

    def _every_state(self, steps: int) -> Schedule:
        """The schedule when every state fits (the binomial one's, without a call from
        Python per step): step and store as one row repeated OPS times a native call, the
        last step from Python, then the reverse steps as one repeated row."""
        for first in range(1, steps, OPS):  # slot k: the state before step k
            slots = range(first, min(first + OPS, steps))
            self._emit_repeated(self.step_store_row, slots)
            self._progress(slots[-1])
            self.flush()
        self.live = held = Held(steps - 1, steps - 1)
        self._first_reverse(held)
        for top in range(steps - 1, -1, -OPS):
            self._emit_repeated(self.reverse_row, range(top, max(top - OPS, -1), -1))
            self.first_reversed, self.reversed_to = top, max(top - OPS + 1, 0)
            self._progress(self.reversed_to)
            self.flush()
        return Schedule(steps, steps - 1, advances=steps - 1, peak_stored=steps - 1)
