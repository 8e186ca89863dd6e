"""One slab of stored states for the schedule's native programs (program.py): per slot, x,
v and F and each field a step carries (a thermostat's chain and clock, a controller's
outputs; not a scratch field such as an MPM grid, which the step rewrites before reading:
Trajectory.moving) in its own precision, and the ops tables that give each program row
its slot and the step of the state it names. Copies are bit-exact (F is stored as -x.grad,
restored as -F). The number of slots is not compiled into the kernels that move states
(the slab's fields are `runtime_rows`), so a gradient with another count of stored states
compiles nothing new."""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.stepper import updates
from simrun.stepper.fieldstep import direct_launch
from simrun.stepper.state import State

OPS = 4096  # slot arguments per native call


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


def _slabs(fields: dict, slots: int) -> dict:
    """A slab per carried field ({name: (field, slab)}): per slot, a row of the field's
    elements (scalars, vectors or matrices) in row-major order."""
    return {n: (f, _slab(f, (slots, max(int(np.prod(f.shape)), 1)))) for n, f in fields.items()}


def _slab(f, shape: tuple):
    """A field of `shape` (slots first) whose elements are f's."""
    elem = f.elem_shape
    if not elem:
        return _rows(ti.field(f.dtype, shape=shape))
    if len(elem) == 1:
        return _rows(ti.Vector.field(elem[0], f.dtype, shape=shape))
    return _rows(ti.Matrix.field(*elem, f.dtype, shape=shape))


def _rows(slab):
    """The slab's slot count is a runtime value: kernels over it compile once for any."""
    slab.runtime_rows = True
    return slab


class Slab:
    """`slots` stored states of a system, and the launches that move one between the
    system's fields and the slot that the next row's entry of the ops tables names (each
    launch list begins with the tick that reads it: the controller's step index too)."""

    def __init__(self, system, moving: dict, slots: int, step_field) -> None:
        n, dim, fp = system.x.shape[0], system.x.n, system.fp
        self.sx, self.sv, self.sf = (_rows(ti.Vector.field(dim, fp, shape=(slots, n)))
                                     for _ in range(3))
        self.fields = fields = _slabs(moving, slots)
        self.ops, self.at = ti.field(ti.i32, shape=OPS), ti.field(ti.i32, shape=OPS)
        self.pc, self.slot = ti.field(ti.i32, shape=()), ti.field(ti.i32, shape=())
        slab, x, v, slot = (self.sx, self.sv, self.sf), system.x, system.v, self.slot
        tick = (next_slot, (self.ops, self.at, self.pc, slot, step_field))
        load = [(load_slot, (*slab, slot, x, v))] + \
            [(load_field, (s, slot, f)) for f, s in fields.values()]
        store = [(store_slot, (x, v, *slab, slot))] + \
            [(store_field, (f, s, slot)) for f, s in fields.values()]
        with updates.ieee():
            self.load, self.store = ([direct_launch(*launch) for launch in [tick, *b]]
                                     for b in (load, store))

    def put(self, k: int, state: State) -> None:
        """`state` into slot k from NumPy."""
        self.sx.data[k], self.sv.data[k], self.sf.data[k] = state.x, state.v, state.f
        for name, (_, slab) in self.fields.items():
            slab.data[k] = np.reshape(state.fields[name], slab.data.shape[1:])

    def get(self, k: int, step: int, fields: dict) -> State:
        """Slot k as a state (the fields no step writes from `fields`)."""
        fields = dict(fields)
        for name, (f, slab) in self.fields.items():
            fields[name] = slab.data[k].reshape(f.shape + tuple(f.elem_shape))
        return State(step, self.sx.data[k].copy(), self.sv.data[k].copy(),
                           self.sf.data[k].copy(), float("nan"), fields)

    def set_rows(self, slots: list[int], steps: list[int]) -> None:
        """The ops tables of the next program: each row's slot and step, in turn."""
        self.ops.data[: len(slots)] = slots
        self.at.data[: len(slots)] = steps
        self.pc.data[()] = 0

    def next_slot(self) -> int:
        """The slot the next row's tick reads (before it runs)."""
        return int(self.ops.data[self.pc.data[()]])
