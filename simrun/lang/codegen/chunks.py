"""TaskEmitter's range tasks: the probe (inline or split, chunk size, counters), the loop
that takes chunks from the per-thread ranges (or whole groups of a task with copies),
per-chunk reduction partials summed in chunk order, the wait for the last chunks, and the
loops over a chunk's iterations (rows of an ndrange). What is decided, and why, is in
schedule.py.

A mixin of TaskEmitter (emit.py): copies.py supplies the per-group copies it sets up and
merges, statements.py the loops and the body.
"""

from __future__ import annotations

import platform

from llvmlite import ir

from ..ir.nodes import walk
from ..ir.ops import Op
from ..ir.reductions import field_reductions, var_reductions
from .llvm_types import F64, I64, const, i64c, llvm_type, narrow
from .schedule import (
    CHUNK_ALIGN,
    CHUNK_WORK,
    INLINE_WORK,
    MAX_CHUNKS,
    MAX_GROUPS,
    MAX_RANGES,
    RANGE_STRIDE,
    SCATTER_INLINE_WORK,
    SPIN_ROUNDS,
    iteration_cost,
    private_scatters,
    racing_scatters,
    reduction_count,
    row_sums,
    scatters_floats,
    varies_with_index,
)


class RangeTask:
    def _invariant(self, var) -> bool:
        """Whether the probe may read var: set before the launch and not written by the task."""
        return var in self.layout.var_slot and var not in self.written \
            and var is not self.task.var

    def _emit_cost(self, cost, ends):
        """f64 estimate of one iteration (see schedule.py), inner trip counts evaluated now;
        ends: the first and last value of the task's index, at which bounds affine in it are
        evaluated (the larger trip count of the two is an upper bound for every iteration)."""
        b = self.b
        total = ir.Constant(F64, float(cost.const))
        for lo, hi, inner in cost.loops:
            at = ends if any(varies_with_index(e, self.task.var) for e in (lo, hi)) else (None,)
            trips = None
            for index in at:
                if index is not None:
                    b.store(narrow(b, index, llvm_type(self.task.var.dtype)),
                            self.var_ptr(self.task.var))
                t = b.sub(self._i64(self.expr(hi)), self._i64(self.expr(lo)))
                trips = t if trips is None else b.select(b.icmp_signed(">", t, trips), t, trips)
            trips = b.select(b.icmp_signed("<", trips, ir.Constant(I64, 0)),
                             ir.Constant(I64, 0), trips)
            total = b.fadd(total, b.fmul(b.sitofp(trips, F64), self._emit_cost(inner, ends)))
        return total

    def _chunk_size(self, n, per):
        """Iterations per chunk: about CHUNK_WORK units, at most MAX_CHUNKS chunks; a function of
        the trip count and the cost estimate only (per is None for a heavy body)."""
        b = self.b
        c = b.sdiv(b.add(n, i64c(MAX_CHUNKS - 1)), i64c(MAX_CHUNKS))
        if per is not None:
            by_cost = b.add(b.fptosi(b.fdiv(ir.Constant(F64, float(CHUNK_WORK)), per), I64),
                            i64c(1))
            c = b.select(b.icmp_signed(">", by_cost, c), by_cost, c)
        c = b.select(b.icmp_signed("<", c, i64c(1)), i64c(1), c)
        aligned = b.and_(b.add(c, i64c(CHUNK_ALIGN - 1)), i64c(-CHUNK_ALIGN))
        return b.select(b.icmp_signed(">", c, i64c(CHUNK_ALIGN)), aligned, c)

    def build_range(self):
        """Probe call (nthreads = -T <= 0, T the runtime's thread count): a launch whose estimated
        work is small runs inline as one chunk; a larger one sets up its chunk counters and
        returns its chunk count, and the runtime calls the task on each thread (tid < nthreads).

        The chunks are cut into one contiguous range per thread (at most MAX_RANGES), each with
        its own counter on its own cache line. A thread takes chunks from its own range first,
        then from the others' in turn (same counter, so every chunk runs exactly once): threads
        work far apart in the iteration space (on sorted data, far apart in memory), and one
        the OS deschedules, or that starts late, has its chunks taken by the others.

        A task with per-group copies (schedule.py) is cut into a fixed number of groups
        instead, independent of T: a thread claims whole groups and runs each one's chunks
        in order, and once all are done the threads merge the copies in group order."""
        b, task, lay = self.b, self.task, self.layout
        begin = self._i64(self.expr(task.begin))
        n = b.sub(self._i64(self.expr(task.end)), begin)
        n = b.select(b.icmp_signed("<", n, i64c(0)), i64c(0), n)
        done_p, chunk_p, nranges_p = (self.slot_ptr(b, lay.sched_slot + k) for k in range(3))
        self._probe(begin, n, done_p, chunk_p, nranges_p)
        # every thread (and an inline launch): take chunks until they run out
        reds = self._reduction_accumulators()
        copies = self._private_copies()
        chunk = b.load(chunk_p, typ=I64)
        nchunks = b.sdiv(b.add(n, b.sub(chunk, i64c(1))), chunk)
        ranges = b.load(nranges_p, typ=I64)
        run_chunk = self._chunk_body(begin, n, chunk, nchunks, done_p, reds, copies)
        if copies:  # a fixed partition into groups, merged in group order (schedule.py)
            self._group_loop(nchunks, ranges, done_p, copies, run_chunk)
            merge = b.icmp_signed(">", ranges, i64c(1))
            if self.component_major:  # group 0 has a copy too
                merge = ir.Constant(ir.IntType(1), 1)
            with b.if_then(merge):
                self._await_chunks(done_p, nchunks, bounded=False)
                for k, (f, base, _) in enumerate(copies):
                    self._merge_copies(f, k, base, ranges)
        else:
            self._chunk_loop(nchunks, ranges, run_chunk)()
            with b.if_then(b.and_(b.icmp_signed("==", self.tid, i64c(0)),
                                  b.icmp_signed(">", self.nthreads, i64c(1)))):
                self._await_chunks(done_p, nchunks)
        b.ret(i64c(0))

    def _probe(self, begin, n, done_p, chunk_p, nranges_p) -> None:
        """The probe call's part: decide inline or split, store the chunk size and range count,
        reset the counters (and the per-group copies) and return the chunk count if split."""
        b, task = self.b, self.task
        cost = iteration_cost(task, self._invariant)
        with b.if_then(b.icmp_signed("<=", self.nthreads, i64c(0))):
            if cost.heavy:
                per = None
                big = b.icmp_signed(">", n, i64c(1))
            else:
                last = b.add(begin, b.select(b.icmp_signed(">", n, i64c(0)), b.sub(n, i64c(1)),
                                             i64c(0)))
                per = self._emit_cost(cost, (begin, last))
                alone = self._emit_cost(iteration_cost(task, self._invariant, alone=True),
                                        (begin, last))
                work = b.fmul(b.sitofp(n, F64), alone)
                scatters = scatters_floats(task)
                limit = SCATTER_INLINE_WORK if scatters else INLINE_WORK
                big = b.and_(b.fcmp_ordered(">", work, ir.Constant(F64, float(limit))),
                             b.icmp_signed(">", n, i64c(1)))
                if racing_scatters(task, self.debug) and \
                        not reduction_count(task, self.layout.var_slot):
                    # split only if T threads with atomics beat one without (a loop with
                    # chunk partials keeps a decision independent of T: schedule.py)
                    threads = b.sitofp(b.neg(self.nthreads), F64)
                    big = b.and_(big, b.fcmp_ordered("<", per, b.fmul(threads, alone)))
            grouped = bool(private_scatters(task)) and not self.debug
            if grouped:
                groups = self._group_count(n, cost, per)
                big = b.and_(big, b.icmp_signed(">", groups, i64c(1)))
            whole = b.select(b.icmp_signed("<", n, i64c(1)), i64c(1), n)
            chunk = b.select(big, self._chunk_size(n, per), whole)
            nchunks = b.sdiv(b.add(n, b.sub(chunk, i64c(1))), chunk)
            ranges = groups if grouped else b.neg(self.nthreads)
            for bound in (i64c(MAX_RANGES if not grouped else MAX_GROUPS), nchunks):
                ranges = b.select(b.icmp_signed("<", bound, ranges), bound, ranges)
            ranges = b.select(b.and_(big, b.icmp_signed(">", ranges, i64c(1))), ranges, i64c(1))
            b.store(chunk, chunk_p)
            b.store(ranges, nranges_p)
            b.store(i64c(0), done_p)
            if grouped:  # range 0's counter hands out whole groups
                b.store(i64c(0), self._counter_ptr(i64c(0)))
            else:
                r_p = self.eb.alloca(I64, name="range_init")

                def init_counter():
                    r = b.load(r_p, typ=I64)
                    b.store(b.sdiv(b.mul(r, nchunks), ranges), self._counter_ptr(r))

                self._count(r_p, i64c(0), ranges, init_counter)
            self._reset_copies()
            with b.if_then(big):
                b.ret(nchunks)

    def _reduction_accumulators(self) -> list:
        """(dtype, accumulator, apply(partial) to the target, kind) per reduction with chunk
        partials; kind ADD, MAX or MIN (a chunk's partial starts at the kind's identity)."""
        task, lay = self.task, self.layout
        reds = []
        for key, (f, kind) in field_reductions(task).items():
            acc = self.eb.alloca(llvm_type(f.dtype), name=f"{f.name}_acc")
            self.reductions[key] = (acc, kind)
            stub = type("S", (), {"field": f, "comp": key[1], "indices": (), "span": None})
            reds.append((f.dtype, acc, lambda v, stub=stub, dt=f.dtype, kind=kind:
                         self.atomic_update(self.element_ptr(stub), kind, v, dt, atomic=True),
                         kind))
        for v in var_reductions(task, lay.var_slot):
            acc = self.eb.alloca(llvm_type(v.dtype), name=f"{v.name}_acc")
            self.reductions[("var", v)] = (acc, Op.ADD)
            reds.append((v.dtype, acc, lambda s, v=v: self.atomic_update(
                self.var_ptr(v), Op.ADD, s, v.dtype, atomic=True), Op.ADD))
        assert len(reds) <= lay.n_partials
        return reds

    def _chunk_body(self, begin, n, chunk, nchunks, done_p, reds, copies):
        """A function that emits one chunk (its index in c_p): its iterations, partials and
        copies, then marks it done. Returns (emit, c_p)."""
        b = self.b
        c_p = self.eb.alloca(I64, name="chunk_index")
        k_p = self.eb.alloca(I64, name="k")
        hi_p = self.eb.alloca(I64, name="hi")

        def run_chunk():
            c = b.load(c_p, typ=I64)
            lo = b.mul(c, chunk)
            hi = b.add(lo, chunk)
            b.store(b.select(b.icmp_signed("<", hi, n), hi, n), hi_p)
            b.store(lo, k_p)
            for dt, acc, _, kind in reds:
                b.store(identity(kind, dt), acc)
            for f, _, copy_p in copies:
                self._use_copy(f, copy_p)
            self._inner_loop(k_p, hi_p, begin)
            for f, base, _ in copies:
                self.field_bases[id(f)] = base
            self.by_component.clear()
            if reds:
                self._finish_chunk(c, nchunks, done_p, reds)
            else:
                b.atomic_rmw("add", done_p, i64c(1), "release")

        return run_chunk, c_p

    def _chunk_loop(self, nchunks, ranges, body):
        """A function that emits this thread's chunk taking: its own range first, then the
        others' in turn, each chunk taken from the range's counter."""
        b = self.b
        run_chunk, c_p = body
        own = b.srem(self.tid, ranges)
        visit_p, range_p, end_p = (self.eb.alloca(I64, name=x) for x in
                                   ("ranges_seen", "range", "range_end"))

        def enter_range():
            r = b.srem(b.add(own, b.load(visit_p, typ=I64)), ranges)
            b.store(r, range_p)
            b.store(b.sdiv(b.mul(b.add(r, i64c(1)), nchunks), ranges), end_p)
            self._loop(take_chunk, [], run_chunk)

        def take_chunk():
            c = b.atomic_rmw("add", self._counter_ptr(b.load(range_p, typ=I64)), i64c(1),
                             "monotonic")
            b.store(c, c_p)
            return b.icmp_signed("<", c, b.load(end_p, typ=I64))

        return lambda: self._count(visit_p, i64c(0), ranges, enter_range)

    def _await_chunks(self, done_p, nchunks, bounded: bool = True) -> None:
        """Spin until every chunk is done. The calling thread, out of chunks, spins a little
        while the workers finish theirs: blocking right away lets its core go idle, and waking
        an idle core on a VM costs more than a chunk. Bounded (SPIN_ROUNDS), so a descheduled
        worker is waited for by the runtime instead, without burning a core.

        Unbounded before merging per-group copies: group 0 adds into the fields themselves
        and every copy must be complete, so the merge waits for the last chunk; past
        SPIN_ROUNDS each round yields the CPU. Every group is claimed by a running thread,
        whose chunks end without waiting for another thread, so the wait ends."""
        b = self.b
        i_p = self.eb.alloca(I64, name="spin")
        b.store(ir.Constant(I64, 0), i_p)
        pause = None
        if platform.machine().lower() in ("x86_64", "amd64"):
            pause = self.declared("llvm.x86.sse2.pause", ir.VoidType(), [])

        def waiting():
            left = b.icmp_signed("<", b.load_atomic(done_p, "acquire", 8, typ=I64), nchunks)
            if not bounded:
                return left
            return b.and_(left, b.icmp_signed("<", b.load(i_p, typ=I64),
                                              ir.Constant(I64, SPIN_ROUNDS)))

        def spin():
            if pause is not None:
                b.call(pause, [])
            self._increment(i_p)
            if not bounded:
                long = b.icmp_signed(">", b.load(i_p, typ=I64), ir.Constant(I64, SPIN_ROUNDS))
                with b.if_then(long, likely=False):
                    b.call(self.declared("sched_yield", ir.IntType(32), []), [])

        self._loop(waiting, [], spin)

    def _counter_ptr(self, r):
        """Range r's next-chunk counter: a cache line of its own."""
        b = self.b
        slot = b.add(b.mul(r, ir.Constant(I64, RANGE_STRIDE)),
                     ir.Constant(I64, self.layout.sched_slot + RANGE_STRIDE))
        return b.gep(self.ctx, [slot], source_etype=I64)

    def _partial_ptr(self, c, r: int):
        b, lay = self.b, self.layout
        slot = b.add(b.mul(c, ir.Constant(I64, lay.n_partials)),
                     ir.Constant(I64, lay.partial_slot + r))
        return b.gep(self.ctx, [slot], source_etype=I64)

    def _finish_chunk(self, c, nchunks, done_p, reds) -> None:
        """Park this chunk's partial sums; whoever completes the last chunk adds them up in chunk
        order, so a reduction's result depends on neither the thread count nor the schedule."""
        b = self.b
        for r, (dt, acc, _, _) in enumerate(reds):
            b.store(b.load(acc, typ=llvm_type(dt)), self._partial_ptr(c, r))
        done = b.atomic_rmw("add", done_p, ir.Constant(I64, 1), "acq_rel")
        last = b.icmp_signed("==", done, b.sub(nchunks, ir.Constant(I64, 1)))
        with b.if_then(last):
            j_p = self.eb.alloca(I64, name="partial_j")
            for r, (dt, acc, apply, kind) in enumerate(reds):
                t = llvm_type(dt)
                b.store(b.load(self._partial_ptr(i64c(0), r), typ=t), acc)

                def add_partial(r=r, dt=dt, acc=acc, t=t, kind=kind):
                    part = b.load(self._partial_ptr(b.load(j_p, typ=I64), r), typ=t)
                    b.store(self.combine(kind, b.load(acc, typ=t), part, dt), acc)

                self._count(j_p, i64c(1), nchunks, add_partial)
                apply(b.load(acc, typ=t))

    def _inner_loop(self, k_p, hi_p, begin):
        if len(self.task.grid) > 1:
            return self._grid_loop(k_p, hi_p, begin)
        b = self.b
        var_ptr = self.var_ptr(self.task.var)
        saved_targets = self.loop_targets
        self.loop_targets = []

        def cond():
            return b.icmp_signed("<", b.load(k_p, typ=I64), b.load(hi_p, typ=I64))

        def before():
            idx = b.add(begin, b.load(k_p, typ=I64))
            self._begin_iteration(idx, var_ptr)
            self.index64 = idx

        self._loop(cond, self.task.body, before, lambda: self._increment(k_p))
        self.loop_targets = saved_targets
        self.index64 = None

    def _grid_loop(self, k_p, hi_p, begin):
        """An ndrange chunk as rows of the innermost dimension: the outer indices are computed
        once per row, the innermost one counts up, so LLVM sees contiguous accesses (no
        div/mod per iteration, no gathers)."""
        b, task = self.b, self.task
        var_t = llvm_type(task.var.dtype)
        var_ptr = self.var_ptr(task.var)
        low, extent = task.grid[-1]
        m = self._i64(self.expr(extent))
        low = self.expr(low)
        j_p = self.eb.alloca(I64, name="grid_j")
        saved_targets = self.loop_targets
        self.loop_targets = []
        sums: dict = {}  # key -> (per-row sum, first statement with that key)
        stmts = {id(s): s for s in walk(task.body)}
        for sid, key in row_sums(task).items():
            if key not in sums:
                f = stmts[sid].field
                sums[key] = (self.eb.alloca(llvm_type(f.dtype), name=f"{f.name}_row"), stmts[sid])
            self.row_sums[sid] = sums[key]

        def row():
            k = b.load(k_p, typ=I64)
            start = b.mul(b.sdiv(k, m), m)  # first flat index of this row
            j0 = b.sub(k, start)
            jn = b.add(j0, b.sub(b.load(hi_p, typ=I64), k))
            jend = b.select(b.icmp_signed("<", jn, m), jn, m)
            b.store(narrow(b, b.add(begin, start), var_t), var_ptr)
            for e in task.index_exprs[:-1]:
                self.index_values[id(e)] = self.expr(e)
            for acc, s in sums.values():
                b.store(const(s.field.dtype, 0), acc)

            def cell():
                j = b.load(j_p, typ=I64)
                self._begin_iteration(b.add(begin, b.add(start, j)), var_ptr)
                self.index_values[id(task.index_exprs[-1])] = b.add(low, narrow(b, j, low.type))

            self._count(j_p, j0, jend, cell, task.body)
            for acc, s in sums.values():  # the row's indices are still in their locals
                total = b.load(acc, typ=llvm_type(s.field.dtype))
                self.atomic_update(self.element_ptr(s), Op.ADD, total, s.field.dtype,
                                   atomic=self.parallel and id(s.field) not in self.plain,
                                   field=s.field)
            b.store(b.add(start, jend), k_p)

        self._loop(lambda: b.icmp_signed("<", b.load(k_p, typ=I64), b.load(hi_p, typ=I64)), [],
                   row)
        self.index_values, self.row_sums = {}, {}
        self.loop_targets = saved_targets


def identity(kind: Op, dtype):
    """The value a chunk's partial starts from: 0 for sums, the lowest (highest) value of
    the type for maxima (minima)."""
    if kind is Op.ADD:
        return const(dtype, 0)
    if dtype.is_float:
        return const(dtype, float("-inf") if kind is Op.MAX else float("inf"))
    bits = dtype.bits
    unsigned = dtype.kind == "u"
    low, high = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return const(dtype, low if kind is Op.MAX else high)

