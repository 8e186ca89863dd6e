"""A compiled kernel variant: its context buffer, task entry points, and argument marshalling."""

from __future__ import annotations

import copy
import ctypes
import dataclasses

import numpy as np

from ..errors import SimrunError

TASK_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


F64, F32, INT = 0, 1, 2  # how set_args writes an argument into its 8-byte slot


def _kind(dt) -> int:
    if not dt.is_float:
        return INT
    return F64 if dt.bits == 64 else F32


class KernelRuntimeError(SimrunError, RuntimeError):
    pass


class KernelIndexError(SimrunError, IndexError):
    """A field index out of range, found by ``ti.init(debug=True)``'s bounds checks: the
    message names the kernel, field, index, shape and source line."""


def same_storage(a, b) -> bool:
    """Whether fields a and b are stored alike: one compiled access reads either."""
    return all(getattr(a, k, None) == getattr(b, k, None) for k in
               ("dtype", "shape", "elem_shape", "order", "runtime_rows")) and \
        a._data is not None and b._data is not None and a._data.strides == b._data.strides


class CompiledKernel:
    chainable = True  # its tasks are CPU functions a Chain (chain.py) may post

    def __init__(self, name: str, layout, addresses: list, arg_specs: list, ret_types: list,
                 runtime, ndarray_slots: dict):
        self.name = name
        self.layout = layout
        self.fns = [runtime.task(a) for a in addresses]
        self.runtime = runtime
        self.ctx = np.zeros(layout.size, dtype=np.int64)
        self.ctx_addr = self.ctx.ctypes.data
        self.f64 = self.ctx.view(np.float64)
        self.f32 = self.ctx.view(np.float32)
        self.i32 = self.ctx.view(np.int32)
        self.arg_specs = arg_specs  # (slot, dtype) per flattened scalar argument
        # (slot, F64 | F32 | INT) per argument: set_args runs once per step in chains
        self.arg_kinds = tuple((slot, _kind(dt)) for slot, dt in arg_specs)
        self.views = (self.ctx, self.f64, self.f32)
        self.ret_types = ret_types
        self.ndarray_slots = ndarray_slots  # argument position -> slot
        self.tracked = True  # set by the compiler: launches that may need snapshots
        for slot, f in enumerate(layout.fields):
            if not getattr(f, "is_ndarray_arg", False):  # the address alone: no GPU sync
                self.ctx[slot] = f._data.ctypes.data
        self.uses_random = layout.uses_random
        self.written: tuple = ()  # fields whose version a launch bumps (set by the compiler)
        self.order_sensitive: frozenset = frozenset()  # tasks whose float adds race (compiler)
        self.last_rng_key = None
        self.ctx[layout.stack_slot] = runtime.stacks.ctypes.data

    def rebound(self, fields: dict) -> CompiledKernel | None:
        """This variant's code reading `fields[f]` in the place of each field f it only
        reads (Kernel.with_grad_reads: a step's force slot G in x.grad's place): a
        context of its own holding the other field's address, no compile. None where a
        pair is not stored alike (the code has the storage's shape compiled in)."""
        if not all(same_storage(f, g) for f, g in fields.items()):
            return None
        view = copy.copy(self)
        view.code_of = getattr(self, "code_of", self)  # the variant whose code this is
        placed = [fields.get(f, f) for f in self.layout.fields]
        view.layout = dataclasses.replace(self.layout, fields=placed, field_slot={
            id(f): slot for slot, f in enumerate(placed)})
        view.ctx = self.ctx.copy()
        view.ctx_addr = view.ctx.ctypes.data
        view.f64, view.f32, view.i32 = (view.ctx.view(t) for t in (np.float64, np.float32,
                                                                   np.int32))
        view.views = (view.ctx, view.f64, view.f32)
        for slot, f in enumerate(placed):
            if f is not self.layout.fields[slot]:
                view.ctx[slot] = f._data.ctypes.data
        return view

    def set_args(self, flat_args, own: tuple | None = None) -> None:
        """The scalar arguments into this kernel's context, or into `own`, a copy of it that
        one launch owns with its f64 and f32 views (a Chain's: launches of one variant with
        different arguments)."""
        ctx, f64, f32 = own if own is not None else self.views
        for (slot, kind), value in zip(self.arg_kinds, flat_args):
            if kind == F64:
                f64[slot] = value
            elif kind == F32:
                ctx[slot] = 0
                f32[2 * slot] = value
            else:
                ctx[slot] = int(value)

    def launch(self, flat_args, arrays=(), tasks=None, rng_key=None):
        """Run all tasks (or the given task indices) with these arguments.

        rng_key replays the random numbers of an earlier launch (gradients need them).
        """
        if flat_args:
            self.set_args(flat_args)
        if self.uses_random:
            if rng_key is None:
                rng_key = self.runtime.next_rng_key()
            self.ctx.view(np.uint64)[self.layout.rng_slot] = rng_key
            self.last_rng_key = rng_key
        for slot, arr in arrays:
            self.ctx[slot] = arr.ctypes.data
        ctx = self.ctx_addr
        run = self.runtime.run
        for f in self.written:
            f.version += 1
        if self.order_sensitive and self.runtime.deterministic and \
                self.runtime.num_threads > 1:  # one thread adds in chunk order anyway
            self._launch_ordered(ctx, tasks)
        else:
            for fn in (self.fns if tasks is None else [self.fns[k] for k in tasks]):
                if run(fn, ctx) < 0:
                    self.raise_error()
        if self.ret_types:
            return self.read_returns()
        return None

    def _launch_ordered(self, ctx: int, tasks) -> None:
        """The deterministic mode: tasks that scatter floats run on one thread."""
        rt = self.runtime
        for k in (range(len(self.fns)) if tasks is None else tasks):
            run = rt.run_serial if k in self.order_sensitive else rt.run
            if run(self.fns[k], ctx) < 0:
                self.raise_error()

    def read_returns(self):
        out = []
        for k, dt in enumerate(self.ret_types):
            slot = self.layout.ret_slot + k
            if dt.is_float:
                out.append(float(self.f64[slot] if dt.bits == 64 else self.f32[2 * slot]))
            elif dt.bits == 64:
                out.append(int(self.ctx[slot]))
            else:
                out.append(int(self.i32[2 * slot]) if dt.kind == "i"
                           else int(self.ctx[slot] & ((1 << dt.bits) - 1)))
        return out

    def raise_error(self):
        base = self.layout.err_slot
        code, site = int(self.ctx[base]), int(self.ctx[base + 1])
        self.ctx[base] = 0
        sites = self.layout.sites
        info = sites[site] if 0 <= site < len(sites) else ("?", "?", None, None)
        kind, what, span, shape = info
        where = f"{span}: " if span is not None else ""
        text = f"\n    {span.text.strip()}" if span is not None and span.text else ""
        name = getattr(self, "source_name", self.name)
        if code == 1:
            idx = [int(self.ctx[base + 2 + k]) for k in range(len(shape or ()))]
            raise KernelIndexError(f"{where}in kernel '{name}': index {tuple(idx)} is out of "
                             f"range for field '{what}' of shape {shape}{text}")
        if code == 2:
            raise AssertionError(f"{where}in kernel '{name}': assertion failed: {what}{text}")
        if code == 3:
            raise MemoryError(f"kernel '{self.name}': out of memory for a per-group copy of "
                              f"field '{what}' ({self.runtime.num_threads} threads)")
        raise KernelRuntimeError(f"kernel '{self.name}' failed (code {code})")
