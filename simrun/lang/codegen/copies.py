"""TaskEmitter's per-thread copies of the fields a range task scatters into (schedule.py's
private_scatters): allocated zeroed on a thread's first chunk, listed in the context, merged
into the field slice by slice once every chunk is done, then freed.

A mixin of TaskEmitter (emit.py).
"""

from __future__ import annotations

import math

from llvmlite import ir

from .layout import MERGE_STRIDE
from .llvm_types import I64, PTR, i64c, llvm_type
from .schedule import (
    COPY_THREADS,
    MERGE_MIN_SLICE,
    MERGE_SLICES,
    component_major,
    field_bytes,
    private_scatters,
)


class PrivateCopies:
    def _private_copies(self) -> list:
        """(field, its real base, pointer to this thread's copy) for the privatised fields.

        Thread 0, and a thread that runs the launch alone (inline, or the runtime has one
        thread), adds into the field itself unless the copy is component-major; the others
        start with no copy and allocate one on their first chunk. Not in debug mode: an index
        error returns from the middle of a chunk."""
        if self.debug:
            return []
        b = self.b
        direct = b.or_(b.icmp_signed("<=", self.nthreads, ir.Constant(I64, 1)),
                       b.icmp_signed("==", self.tid, ir.Constant(I64, 0)))
        copies = []
        fields = private_scatters(self.task)
        self.component_major = {id(f) for f in component_major(self.task, fields)}
        for f in fields:
            base = self.field_base(f)
            copy_p = self.eb.alloca(PTR, name=f"{f.name}_copy")
            first = (ir.Constant(PTR, None) if id(f) in self.component_major
                     else b.select(direct, base, ir.Constant(PTR, None)))
            b.store(first, copy_p)
            self.plain.add(id(f))
            copies.append((f, base, copy_p))
        return copies

    def _allocate_copy(self, f, k: int, copy_p, done_p) -> None:
        """Before a chunk: a zeroed copy of f unless this thread has one, listed in the
        context for the merge; the chunk's adds go there. Out of memory, the chunk counts as
        done (the threads waiting to merge must not wait for it) and the launch fails."""
        b = self.b
        with b.if_then(b.icmp_unsigned("==", b.load(copy_p, typ=PTR), ir.Constant(PTR, None)),
                       likely=False):
            calloc = self.declared("calloc", PTR, [I64, I64])
            b.store(b.call(calloc, [ir.Constant(I64, field_bytes(f)), ir.Constant(I64, 1)]),
                    copy_p)
            with b.if_then(b.icmp_unsigned("==", b.load(copy_p, typ=PTR),
                                           ir.Constant(PTR, None)), likely=False):
                site = len(self.layout.sites)
                self.layout.sites.append(("memory", f.name, None, None))
                b.atomic_rmw("add", done_p, i64c(1), "release")
                self.record_error(3, site)
            b.store(b.load(copy_p, typ=PTR), self._copy_ptr(self.tid, k))
        self.field_bases[id(f)] = b.load(copy_p, typ=PTR)
        if id(f) in self.component_major:
            self.by_component.add(id(f))

    def _copy_ptr(self, tid, k: int):
        """The context slot that lists thread tid's copy of privatised field k."""
        lay = self.layout
        slot = self.b.add(self.b.mul(tid, i64c(lay.n_copies)), i64c(lay.copy_slot + k))
        return self.b.gep(self.ctx, [slot], source_etype=I64)

    def _merge_counter(self, k: int, which: int):
        """Field k's merge counters: 0 the next slice to take, 1 the slices merged."""
        return self.slot_ptr(self.b, self.layout.merge_slot + MERGE_STRIDE * k + 8 * which)

    def _listed(self, threads):
        """How many threads' copies the context lists: threads clamped to 1..COPY_THREADS."""
        b = self.b
        for bound, keep in ((COPY_THREADS, "<"), (1, ">")):
            threads = b.select(b.icmp_signed(keep, threads, i64c(bound)), threads, i64c(bound))
        return threads

    def _reset_copies(self, threads) -> None:
        """Probe call: no thread has a copy yet, no slice is merged."""
        ncopies = 0 if self.debug else len(private_scatters(self.task))
        if not ncopies:
            return
        b = self.b
        t_p = self.eb.alloca(I64, name="copy_reset")
        listed = self._listed(threads)
        for k in range(ncopies):
            b.store(i64c(0), self._merge_counter(k, 0))
            b.store(i64c(0), self._merge_counter(k, 1))
            self._count(t_p, i64c(0), listed, lambda k=k: b.store(
                i64c(0), self._copy_ptr(b.load(t_p, typ=I64), k)))

    def _merge_copies(self, f, k: int, base) -> None:
        """Once every chunk is done: take slices of f from a shared counter and add every
        thread's copy into each (one writer per slice, no locks); whoever merges the last
        slice frees the copies. A component-major copy is merged cell by cell (its slices
        count cells, not scalars)."""
        b = self.b
        t = llvm_type(f.dtype)
        by_component = id(f) in self.component_major
        count = math.prod(f.shape) * (1 if by_component else f.ncomp)
        nslices = max(1, min(MERGE_SLICES, count // MERGE_MIN_SLICE))
        size = -(-count // nslices)
        listed = self._listed(self.nthreads)
        sl_p, t_p, e_p = (self.eb.alloca(I64, name=f"{f.name}_{x}")
                          for x in ("slice", "thread", "elem"))
        null = ir.Constant(PTR, None)

        def each_copy(body):
            """body(copy) for every thread's own copy of f."""
            def visit():
                copy = b.load(self._copy_ptr(b.load(t_p, typ=I64), k), typ=PTR)
                with b.if_then(b.and_(b.icmp_unsigned("!=", copy, null),
                                      b.icmp_unsigned("!=", copy, base))):
                    body(copy)
            self._count(t_p, i64c(0), listed, visit)

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
