"""TaskEmitter's groups and per-group copies of the fields a range task scatters into
(schedule.py's private_scatters): how many groups, the loop that claims whole groups, a
zeroed copy for each group but the first (which adds into the field), allocated by the
thread that claims the group and listed in the context, merged into the field slice by
slice in group order once every chunk is done, then freed.

A mixin of TaskEmitter (emit.py).
"""

from __future__ import annotations

import math

from llvmlite import ir

from .layout import MERGE_STRIDE
from .llvm_types import F64, I64, PTR, i64c, llvm_type
from .schedule import (
    GROUP_RATIO,
    HEAVY_UNITS,
    MAX_GROUPS,
    MERGE_MIN_SLICE,
    MERGE_SLICES,
    component_major,
    copy_scalars,
    field_bytes,
    private_scatters,
)


class PrivateCopies:
    def _private_copies(self) -> list:
        """(field, its real base, pointer to this thread's current group's copy) for the
        privatised fields; `_group_copies` points them at a group's copy. Not in debug mode:
        an index error returns from the middle of a chunk."""
        if self.debug:
            return []
        copies = []
        fields = private_scatters(self.task)
        self.component_major = {id(f) for f in component_major(self.task, fields)}
        for f in fields:
            copy_p = self.eb.alloca(PTR, name=f"{f.name}_copy")
            self.plain.add(id(f))
            copies.append((f, self.field_base(f), copy_p))
        return copies

    def _group_count(self, n, cost, per):
        """How many fixed groups a task with copies is cut into: its estimated work over
        GROUP_RATIO times one group's copies, 1 to MAX_GROUPS, rounded down to a power of
        two; a function of the data only (schedule.py). A heavy body's iteration counts
        HEAVY_UNITS plus its known part. The power of two splits evenly over 2, 4, 8 or 16
        threads: LJ's U-and-gradient launch (a heavy body: its row lengths are read from the
        list) came to 3 groups where its gradient alone came to 2, and on two threads one
        thread ran two of the three (1.25-1.28x the gradient alone's time, 1.02x on one)."""
        b = self.b
        if per is None:
            per = ir.Constant(F64, float(cost.const + HEAVY_UNITS))
        work = b.fmul(b.sitofp(n, F64), per)
        scale = float(GROUP_RATIO * max(1, copy_scalars(self.task)))
        groups = b.fptosi(b.fdiv(work, ir.Constant(F64, scale)), I64)
        groups = b.select(b.icmp_signed("<", groups, i64c(1)), i64c(1), groups)
        groups = b.select(b.icmp_signed(">", groups, i64c(MAX_GROUPS)), i64c(MAX_GROUPS), groups)
        top = b.sub(i64c(63), b.ctlz(groups, ir.Constant(ir.IntType(1), 1)))
        return b.shl(i64c(1), top)

    def _group_loop(self, nchunks, groups, done_p, copies, body) -> None:
        """Claim whole groups (range 0's counter) until none is left; run each group's
        chunks in order into the group's copies."""
        b = self.b
        run_chunk, c_p = body
        g_p = self.eb.alloca(I64, name="group")

        def take_group():
            g = b.atomic_rmw("add", self._counter_ptr(i64c(0)), i64c(1), "monotonic")
            b.store(g, g_p)
            return b.icmp_signed("<", g, groups)

        def run_group():
            g = b.load(g_p, typ=I64)
            first = b.sdiv(b.mul(g, nchunks), groups)
            last = b.sdiv(b.mul(b.add(g, i64c(1)), nchunks), groups)
            self._group_copies(copies, g, b.sub(last, first), done_p)
            self._count(c_p, first, last, run_chunk)

        self._loop(take_group, [], run_group)

    def _group_copies(self, copies, group, chunks_left, done_p) -> None:
        """Before group `group`'s first chunk: its copies, zeroed and listed in the context
        (group 0 adds into the field itself unless its copy is component-major). Out of
        memory, the group's chunks count as done (the threads waiting to merge must not wait
        for them) and the launch fails."""
        b = self.b
        first = b.icmp_signed("==", group, i64c(0))
        for k, (f, base, copy_p) in enumerate(copies):
            direct = ir.Constant(ir.IntType(1), 0) if id(f) in self.component_major else first
            with b.if_else(direct) as (into_field, zeroed):
                with into_field:
                    b.store(base, copy_p)
                with zeroed:
                    calloc = self.declared("calloc", PTR, [I64, I64])
                    copy = b.call(calloc, [ir.Constant(I64, field_bytes(f)), i64c(1)])
                    b.store(copy, copy_p)
                    with b.if_then(b.icmp_unsigned("==", copy, ir.Constant(PTR, None)),
                                   likely=False):
                        site = len(self.layout.sites)
                        self.layout.sites.append(("memory", f.name, None, None))
                        b.atomic_rmw("add", done_p, chunks_left, "release")
                        self.record_error(3, site)
                    b.store(copy, self._copy_ptr(group, k))

    def _use_copy(self, f, copy_p) -> None:
        """A chunk's adds into f go to the current group's copy."""
        self.field_bases[id(f)] = self.b.load(copy_p, typ=PTR)
        if id(f) in self.component_major:
            self.by_component.add(id(f))

    def _copy_ptr(self, group, k: int):
        """The context slot that lists group `group`'s copy of privatised field k."""
        lay = self.layout
        slot = self.b.add(self.b.mul(group, i64c(lay.n_copies)), i64c(lay.copy_slot + k))
        return self.b.gep(self.ctx, [slot], source_etype=I64)

    def _merge_counter(self, k: int, which: int):
        """Field k's merge counters: 0 the next slice to take, 1 the slices merged."""
        return self.slot_ptr(self.b, self.layout.merge_slot + MERGE_STRIDE * k + 8 * which)

    def _reset_copies(self) -> None:
        """Probe call: no group has a copy yet, no slice is merged."""
        ncopies = 0 if self.debug else len(private_scatters(self.task))
        b = self.b
        for k in range(ncopies):
            b.store(i64c(0), self._merge_counter(k, 0))
            b.store(i64c(0), self._merge_counter(k, 1))
            for group in range(MAX_GROUPS):
                b.store(i64c(0), self._copy_ptr(i64c(group), k))

    def _merge_copies(self, f, k: int, base, groups) -> None:
        """Once every chunk is done: take slices of f from a shared counter and add the
        groups' copies into each in group order (one writer per slice, no locks: the same
        bits on any number of threads); whoever merges the last
        slice frees the copies. A component-major copy is merged cell by cell (its slices
        count cells, not scalars)."""
        b = self.b
        t = llvm_type(f.dtype)
        by_component = id(f) in self.component_major
        count = math.prod(f.shape) * (1 if by_component else f.ncomp)
        nslices = max(1, min(MERGE_SLICES, count // MERGE_MIN_SLICE))
        size = -(-count // nslices)
        sl_p, t_p, e_p = (self.eb.alloca(I64, name=f"{f.name}_{x}")
                          for x in ("slice", "thread", "elem"))
        null = ir.Constant(PTR, None)

        def each_copy(body):
            """body(copy) for every group's copy of f, in group order."""
            def visit():
                copy = b.load(self._copy_ptr(b.load(t_p, typ=I64), k), typ=PTR)
                with b.if_then(b.and_(b.icmp_unsigned("!=", copy, null),
                                      b.icmp_unsigned("!=", copy, base))):
                    body(copy)
            self._count(t_p, i64c(0), groups, visit)

        def take():
            sl = b.atomic_rmw("add", self._merge_counter(k, 0), i64c(1), "monotonic")
            b.store(sl, sl_p)
            return b.icmp_signed("<", sl, i64c(nslices))

        def merge_slice():
            lo = b.mul(b.load(sl_p, typ=I64), i64c(size))
            hi = b.add(lo, i64c(size))
            hi = b.select(b.icmp_signed("<", hi, i64c(count)), hi, i64c(count))

            def add_copy(copy):
                def add_one():
                    e = b.load(e_p, typ=I64)
                    for c in (range(f.ncomp) if by_component else [None]):
                        at = e if c is None else b.add(b.mul(e, i64c(f.ncomp)), i64c(c))
                        src = e if c is None else b.add(e, i64c(c * count))
                        dst = b.gep(base, [at], source_etype=t)
                        v = b.load(b.gep(copy, [src], source_etype=t), typ=t)
                        b.store(b.fadd(b.load(dst, typ=t), v), dst)

                self._count(e_p, lo, hi, add_one)

            each_copy(add_copy)
            merged = b.atomic_rmw("add", self._merge_counter(k, 1), i64c(1), "acq_rel")
            with b.if_then(b.icmp_signed("==", merged, i64c(nslices - 1))):
                free = self.declared("free", ir.VoidType(), [PTR])
                each_copy(lambda copy: b.call(free, [copy]))

        self._loop(take, [], merge_slice)
