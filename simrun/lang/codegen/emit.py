"""IR -> llvmlite.ir: one LLVM function per task, `i64 task(ctx, tid, nthreads)`.

nthreads <= 0 is the probe call (-nthreads: the runtime's thread count): a range task whose
estimated work is small runs inline and returns 0; a larger one resets its chunk counters and
returns its chunk count, and the runtime then calls it on each thread (tid < nthreads), which
takes chunks until none are left. The cost model, chunk sizes and reduction partials are
described in schedule.py.
"""

from __future__ import annotations

import math
import platform

from llvmlite import ir

from ..ir.access import stmt_writes
from ..ir.nodes import (
    Assign,
    Const,
    OpExpr,
    Print,
    Random,
    Return,
    StackPop,
    StackPush,
    VarRef,
    walk,
)
from ..ir.ops import Op
from ..ir.reductions import accumulation, field_reductions, var_reductions
from ..types import DType
from ..types import f64 as F64T
from ..types import i64 as I64T
from . import llvm_ops
from .layout import MERGE_STRIDE, STACK_BYTES, Layout
from .llvm_types import F64, I32, I64, PTR, const, llvm_type
from .schedule import (
    CHUNK_ALIGN,
    CHUNK_WORK,
    COPY_THREADS,
    INLINE_WORK,
    MAX_CHUNKS,
    MAX_RANGES,
    MERGE_MIN_SLICE,
    MERGE_SLICES,
    RANGE_STRIDE,
    SCATTER_INLINE_WORK,
    SPIN_ROUNDS,
    component_major,
    field_bytes,
    iteration_cost,
    owned_fields,
    private_scatters,
    row_sums,
    scatters_floats,
)

_GOLDEN = 0x9E3779B97F4A7C15


def _u64(value: int):
    value %= 2**64
    return ir.Constant(I64, value - 2**64 if value >= 2**63 else value)


def _narrow(b, value, typ):
    """value (i64) as the loop variable's type: i32 in Taichi's loops, i64 for wide ranges."""
    return value if value.type == typ else b.trunc(value, typ)


def i64c(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def _mix64(b, z):
    """splitmix64's finaliser: a bijection of u64 with full avalanche."""
    for shift, mul in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = b.mul(b.xor(z, b.lshr(z, ir.Constant(I64, shift))), _u64(mul))
    return b.xor(z, b.lshr(z, ir.Constant(I64, 31)))


class TaskEmitter:
    def __init__(self, module: ir.Module, name: str, task, layout: Layout, debug: bool,
                 fast_math: bool = True):
        self.module, self.task, self.layout = module, task, layout
        self.debug, self.fast_math = debug, fast_math
        self.fn = ir.Function(module, ir.FunctionType(I64, [PTR, I64, I64]), name)
        self.fn.args[0].add_attribute("noalias")
        self.ctx, self.tid, self.nthreads = self.fn.args
        self.entry = self.fn.append_basic_block("entry")
        self.eb = ir.IRBuilder(self.entry)
        self.start = self.fn.append_basic_block("start")
        self.b = ir.IRBuilder(self.start)
        self.var_ptrs: dict = {}
        self.field_bases: dict = {}
        self.loop_targets: list = []
        self.parallel = task.kind == "range"
        self.reductions: dict = {}
        self.index_values: dict = {}  # id(index expression) -> its value (_grid_loop)
        self.row_sums: dict = {}      # id(atomic) -> (per-row sum, statement) (_grid_loop)
        # ids of fields whose atomics need no atomicity: each iteration touches its own
        # elements, or the adds go to a per-thread copy (_private_copies)
        self.plain: set = owned_fields(task) if self.parallel else set()
        self.index64 = None  # the 64-bit iteration index of a range task's loop, in its body
        self.scopes: dict | None = None  # id(field) -> (alias.scope, noalias) metadata
        self.by_component: set = set()  # ids of fields accessed through a component-major copy
        self.component_major: set = set()  # ids of the fields whose copies are component-major
        self.operand_dtype: DType | None = None
        self.cond_dtype: DType | None = None
        self.written = {v for s in walk(task.body) for v in stmt_writes(s)}
        self.rng_iter = self.rng_ctr = None
        if any(isinstance(s, Random) for s in walk(task.body)):
            self.rng_iter = self.eb.alloca(I64, name="rng_iter")
            self.rng_ctr = self.eb.alloca(I64, name="rng_ctr")
            self.eb.store(ir.Constant(I64, 0), self.rng_iter)
            self.eb.store(ir.Constant(I64, 0), self.rng_ctr)

    # ------------------------------------------------------------ storage
    def slot_ptr(self, builder, slot: int):
        return builder.gep(self.ctx, [ir.Constant(I64, slot)], source_etype=I64)

    def var_ptr(self, var):
        ptr = self.var_ptrs.get(var)
        if ptr is not None:
            return ptr
        t = llvm_type(var.dtype)
        slot = self.layout.var_slot.get(var)
        if slot is not None and var in self.written:
            ptr = self.slot_ptr(self.eb, slot)  # shared by all iterations (Taichi's global temp)
        else:
            ptr = self.eb.alloca(t, name=var.name)
            if slot is not None:
                self.eb.store(self.eb.load(self.slot_ptr(self.eb, slot), typ=t), ptr)
        self.var_ptrs[var] = ptr
        return ptr

    def field_base(self, f):
        base = self.field_bases.get(id(f))
        if base is None:
            slot = self.layout.slot_of_field(f)
            base = self.eb.load(self.slot_ptr(self.eb, slot), typ=PTR, name=f"{f.name}_base")
            self.field_bases[id(f)] = base
        return base

    # ------------------------------------------------------------ expressions
    def expr(self, e):
        b = self.b
        if isinstance(e, Const):
            return const(e.dtype, e.value)
        if isinstance(e, VarRef):
            return b.load(self.var_ptr(e.var), typ=llvm_type(e.var.dtype))
        if isinstance(e, OpExpr):
            args = [self.expr(a) for a in e.args]
            if e.op is Op.CAST:
                return llvm_ops.cast(b, args[0], e.args[0].dtype, e.dtype)
            self.operand_dtype = e.args[0].dtype
            if e.op is Op.SELECT:
                self.cond_dtype = e.args[0].dtype
            return llvm_ops.EMITTERS[e.op](self, b, e.dtype, args)
        raise TypeError(f"cannot emit {e!r}")

    def element_ptr(self, s):
        f = s.field
        b = self.b
        idx = []
        for i in s.indices:
            if self.index64 is not None and isinstance(i, VarRef) and i.var is self.task.var:
                idx.append(self.index64)  # not sext(trunc(k)): LLVM sees an affine index
                continue
            idx.append(self._i64(self.expr(i)))
        if self.debug:
            self.bounds_check(s, idx)
        offset = ir.Constant(I64, 0)
        for k, (i, n) in enumerate(zip(idx, f.shape)):
            offset = b.add(b.mul(offset, ir.Constant(I64, n)), i) if k else i
        if id(f) in self.by_component:
            offset = b.add(offset, i64c(s.comp * math.prod(f.shape)))
        elif f.ncomp > 1:
            offset = b.add(b.mul(offset, ir.Constant(I64, f.ncomp)), ir.Constant(I64, s.comp))
        return b.gep(self.field_base(f), [offset], source_etype=llvm_type(f.dtype))

    def bounds_check(self, s, idx) -> None:
        b = self.b
        site = len(self.layout.sites)
        self.layout.sites.append(("index", s.field.name, s.span, s.field.shape))
        bad = ir.Constant(ir.IntType(1), 0)
        for i, n in zip(idx, s.field.shape):
            bad = b.or_(bad, b.icmp_unsigned(">=", i, ir.Constant(I64, n)))
        with b.if_then(bad, likely=False):
            self.record_error(1, site, idx)

    def record_error(self, code: int, site: int, values=()) -> None:
        b = self.b
        base = self.layout.err_slot
        b.store(ir.Constant(I64, site), self.slot_ptr(b, base + 1))
        for k, v in enumerate(list(values)[:5]):
            b.store(v, self.slot_ptr(b, base + 2 + k))
        b.store(ir.Constant(I64, code), self.slot_ptr(b, base))
        b.ret(ir.Constant(I64, -1))
        # code after the return goes into an unreachable block that if_then closes
        b.position_at_end(self.fn.append_basic_block("dead"))

    # ------------------------------------------------------------ statements
    def stmts(self, body) -> None:
        for s in body:
            getattr(self, f"s_{type(s).__name__}")(s)

    def s_Assign(self, s):
        value = self.index_values.get(id(s.value))
        if value is not None:  # an ndrange index, computed by the loop (_grid_loop)
            self.b.store(value, self.var_ptr(s.var))
            return
        if self.parallel and s.var in self.layout.var_slot:
            delta = accumulation(s)
            if delta is not None:  # `total += ...` on a top-level local: atomic / reduction
                value = self.expr(delta)
                acc = self.reductions.get(("var", s.var))
                if acc is not None:
                    old = self.b.load(acc, typ=value.type)
                    self.b.store(self.combine(Op.ADD, old, value, s.var.dtype), acc)
                else:
                    self.atomic_update(self.var_ptr(s.var), Op.ADD, value, s.var.dtype, True)
                return
        self.b.store(self.expr(s.value), self.var_ptr(s.var))

    def s_Load(self, s):
        ptr = self.element_ptr(s)
        v = self.b.load(ptr, typ=llvm_type(s.field.dtype))
        self.scoped(v, s.field)
        self.b.store(v, self.var_ptr(s.var))

    def s_Store(self, s):
        value = self.expr(s.value)
        self.scoped(self.b.store(value, self.element_ptr(s)), s.field)

    def scoped(self, instr, f) -> None:
        """Tell LLVM that an access to f touches no other field's memory (fields own their
        arrays; ndarray arguments may be the same array twice and get no scope)."""
        if getattr(f, "is_ndarray_arg", False):
            return
        if self.scopes is None:
            fields = {}
            for st in walk(self.task.body):
                g = getattr(st, "field", None)
                if g is not None and not getattr(g, "is_ndarray_arg", False):
                    fields[id(g)] = g
            m = self.module
            domain = m.add_metadata([ir.MetaDataString(m, "simrun.fields")])
            own = {k: m.add_metadata([ir.MetaDataString(
                m, f"field f{self.layout.slot_of_field(g)}"), domain])
                for k, g in fields.items()}
            self.scopes = {k: (m.add_metadata([own[k]]),
                               m.add_metadata([own[j] for j in own if j != k]))
                           for k in own}
        pair = self.scopes.get(id(f))
        if pair is not None:
            instr.set_metadata("alias.scope", pair[0])
            instr.set_metadata("noalias", pair[1])

    def s_Atomic(self, s):
        key = (id(s.field), s.comp)
        value = self.expr(s.value)
        row = self.row_sums.get(id(s))
        if row is not None:  # the same target all along an ndrange row (_grid_loop)
            acc = row[0]
            self.b.store(self.combine(s.op, self.b.load(acc, typ=value.type), value,
                                      s.field.dtype), acc)
            return
        if key in self.reductions and s.result is None:
            acc = self.reductions[key]
            old = self.b.load(acc, typ=value.type)
            op = {Op.ADD: "fadd", Op.SUB: "fsub"} if s.field.dtype.is_float else \
                {Op.ADD: "add", Op.SUB: "sub"}
            fn = getattr(self.b, op[s.op])
            self.b.store(fn(old, value, **({"flags": llvm_ops.FAST} if s.field.dtype.is_float
                                           and self.fast_math else {})), acc)
            return
        ptr = self.element_ptr(s)
        atomic = self.parallel and id(s.field) not in self.plain
        old = self.atomic_update(ptr, s.op, value, s.field.dtype, atomic=atomic, field=s.field)
        if s.result is not None:
            self.b.store(old, self.var_ptr(s.result))

    def atomic_update(self, ptr, op: Op, value, dtype: DType, atomic: bool, field=None):
        b = self.b
        isf = dtype.is_float
        if atomic and op is not Op.MUL:
            name = {Op.ADD: "fadd" if isf else "add", Op.SUB: "fsub" if isf else "sub",
                    Op.MIN: "fmin" if isf else ("umin" if dtype.kind == "u" else "min"),
                    Op.MAX: "fmax" if isf else ("umax" if dtype.kind == "u" else "max"),
                    Op.BIT_AND: "and", Op.BIT_OR: "or", Op.BIT_XOR: "xor"}[op]
            return b.atomic_rmw(name, ptr, value, "monotonic")
        t = llvm_type(dtype)
        old = b.load(ptr, typ=t)
        new = self.combine(op, old, value, dtype)
        if not atomic:
            st = b.store(new, ptr)
            if field is not None:
                self.scoped(old, field)
                self.scoped(st, field)
            return old
        # compare-and-swap loop for operations without a native atomicrmw (mul)
        loop = self.fn.append_basic_block("cas")
        done = self.fn.append_basic_block("cas_done")
        before = b.block
        b.branch(loop)
        b.position_at_end(loop)
        cur = b.phi(t)
        cur.add_incoming(old, before)
        new = self.combine(op, cur, value, dtype)
        itype = ir.IntType(t.width if not isf else (32 if dtype.bits == 32 else 64))
        if isf:
            res = b.cmpxchg(ptr, b.bitcast(cur, itype), b.bitcast(new, itype), "monotonic",
                            "monotonic")
            seen = b.bitcast(b.extract_value(res, 0), t)
        else:
            res = b.cmpxchg(ptr, cur, new, "monotonic", "monotonic")
            seen = b.extract_value(res, 0)
        cur.add_incoming(seen, b.block)
        b.cbranch(b.extract_value(res, 1), done, loop)
        b.position_at_end(done)
        return seen

    def combine(self, op: Op, old, value, dtype):
        return llvm_ops.EMITTERS[op](self, self.b, dtype, [old, value])

    def s_Random(self, s):
        """Counter-based: a hash of (launch key, draw site, iteration, draw number).

        The numbers depend neither on thread count nor on schedule, and a gradient kernel
        replaying its forward sweep with the forward launch's key draws the very same ones.
        """
        b = self.b
        ctr = b.load(self.rng_ctr, typ=I64)
        b.store(b.add(ctr, ir.Constant(I64, 1)), self.rng_ctr)
        key = b.load(self.slot_ptr(b, self.layout.rng_slot), typ=I64)
        h = _mix64(b, b.xor(key, _u64(s.site * _GOLDEN)))
        h = _mix64(b, b.xor(h, b.load(self.rng_iter, typ=I64)))
        r = _mix64(b, b.add(h, ctr))
        dt = s.var.dtype
        if dt.is_float:
            bits = 24 if dt.bits <= 32 else 53
            mant = b.lshr(r, ir.Constant(I64, 64 - bits))
            value = b.fmul(b.uitofp(mant, F64), ir.Constant(F64, 2.0 ** -bits))
            value = llvm_ops.cast(b, value, F64T, dt)
        else:
            value = b.trunc(b.lshr(r, ir.Constant(I64, 32)), llvm_type(dt)) \
                if dt.bits < 64 else r
        b.store(value, self.var_ptr(s.var))

    def s_If(self, s):
        b = self.b
        cond = llvm_ops.truthy(b, self.expr(s.cond), s.cond.dtype)
        if s.orelse:
            with b.if_else(cond) as (then, otherwise):
                with then:
                    self.stmts(s.then)
                with otherwise:
                    self.stmts(s.orelse)
        else:
            with b.if_then(cond):
                self.stmts(s.then)

    def _loop(self, head_cond, body, before_body=None, latch=None):
        b = self.b
        head = self.fn.append_basic_block("loop_head")
        body_bb = self.fn.append_basic_block("loop_body")
        latch_bb = self.fn.append_basic_block("loop_latch")
        exit_bb = self.fn.append_basic_block("loop_exit")
        b.branch(head)
        b.position_at_end(head)
        if head_cond is not None:
            b.cbranch(head_cond(), body_bb, exit_bb)
        else:
            b.branch(body_bb)
        b.position_at_end(body_bb)
        if before_body:
            before_body()
        self.loop_targets.append((exit_bb, latch_bb))
        self.stmts(body)
        self.loop_targets.pop()
        if not b.block.is_terminated:
            b.branch(latch_bb)
        b.position_at_end(latch_bb)
        if latch:
            latch()
        b.branch(head)
        b.position_at_end(exit_bb)

    def _increment(self, p) -> None:
        self.b.store(self.b.add(self.b.load(p, typ=I64), i64c(1)), p)

    def _count(self, p, lo, hi, before_body, body=()) -> None:
        """for (*p = lo; *p < hi; ++*p): before_body(), then the statements of body."""
        b = self.b
        b.store(lo, p)
        self._loop(lambda: b.icmp_signed("<", b.load(p, typ=I64), hi), list(body),
                   before_body, lambda: self._increment(p))

    def _begin_iteration(self, idx, var_ptr) -> None:
        """The range task's loop variable, and the random-number counters, for iteration idx."""
        b = self.b
        b.store(_narrow(b, idx, llvm_type(self.task.var.dtype)), var_ptr)
        if self.rng_iter is not None:
            b.store(idx, self.rng_iter)
            b.store(i64c(0), self.rng_ctr)

    def s_For(self, s):
        b = self.b
        t = llvm_type(s.var.dtype)
        begin, end = self.expr(s.begin), self.expr(s.end)
        counter = self.eb.alloca(t, name="for_i")
        b.store(begin, counter)
        var_ptr = self.var_ptr(s.var)

        def cond():
            return b.icmp_signed("<", b.load(counter, typ=t), end)

        def before():
            b.store(b.load(counter, typ=t), var_ptr)

        def latch():
            b.store(b.add(b.load(counter, typ=t), ir.Constant(t, 1)), counter)

        self._loop(cond, s.body, before, latch)

    def s_While(self, s):
        self._loop(None, s.body)

    def s_Break(self, s):
        self.b.branch(self.loop_targets[-1][0])
        self.b.position_at_end(self.fn.append_basic_block("after_break"))

    def s_Continue(self, s):
        self.b.branch(self.loop_targets[-1][1])
        self.b.position_at_end(self.fn.append_basic_block("after_continue"))

    def s_AssertStmt(self, s):
        b = self.b
        site = len(self.layout.sites)
        self.layout.sites.append(("assert", s.message, s.span, None))
        failed = b.not_(llvm_ops.truthy(b, self.expr(s.cond), s.cond.dtype))
        with b.if_then(failed, likely=False):
            self.record_error(2, site)

    def s_Print(self, s):
        b = self.b
        fmt, args = [], []
        for item in s.items:
            if isinstance(item, str):
                fmt.append(item.replace("%", "%%"))
            elif item.dtype.is_float:
                fmt.append("%g")
                args.append(b.fpext(self.expr(item), F64) if item.dtype.bits < 64
                            else self.expr(item))
            else:
                fmt.append("%lld")
                v = self.expr(item)
                args.append(llvm_ops.cast(b, v, item.dtype, I64T) if item.dtype.bits < 64 else v)
        text = (" ".join(fmt) + "\n").encode() + b"\0"
        gv = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), len(text)),
                               name=self.module.get_unique_name("fmt"))
        gv.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(text)), bytearray(text))
        gv.global_constant = True
        printf = self.declared("printf", I32, [PTR], var_arg=True)
        fflush = self.declared("fflush", I32, [PTR])
        b.call(printf, [gv] + args)
        b.call(fflush, [ir.Constant(PTR, None)])

    def s_Return(self, s):
        b = self.b
        for k, v in enumerate(s.values):
            b.store(self.expr(v), self.slot_ptr(b, self.layout.ret_slot + k))
        b.ret(ir.Constant(I64, 0))
        b.position_at_end(self.fn.append_basic_block("after_return"))

    # ------------------------------------------------------------ autodiff stack
    def _stack(self):
        b = self.b
        base = b.load(self.slot_ptr(b, self.layout.stack_slot), typ=PTR)
        return b.gep(base, [b.mul(self.tid, ir.Constant(I64, STACK_BYTES))],
                     source_etype=ir.IntType(8))

    def s_StackPush(self, s):
        b = self.b
        st = self._stack()
        size_p = b.gep(st, [ir.Constant(I64, 8)], source_etype=ir.IntType(8))
        cap_p = b.gep(st, [ir.Constant(I64, 16)], source_etype=ir.IntType(8))
        size = b.load(size_p, typ=I64)
        cap = b.load(cap_p, typ=I64)
        need = b.add(size, ir.Constant(I64, 8))
        with b.if_then(b.icmp_unsigned(">", need, cap), likely=False):
            newcap = b.select(b.icmp_unsigned("<", cap, ir.Constant(I64, 4096)),
                              ir.Constant(I64, 4096), b.mul(cap, ir.Constant(I64, 2)))
            realloc = self.declared("realloc", PTR, [PTR, I64])
            data = b.call(realloc, [b.load(st, typ=PTR), newcap])
            b.store(data, st)
            b.store(newcap, cap_p)
        data = b.load(st, typ=PTR)
        slot = b.gep(data, [size], source_etype=ir.IntType(8))
        b.store(b.load(self.var_ptr(s.var), typ=llvm_type(s.var.dtype)), slot)
        b.store(need, size_p)

    def s_StackPop(self, s):
        b = self.b
        st = self._stack()
        size_p = b.gep(st, [ir.Constant(I64, 8)], source_etype=ir.IntType(8))
        size = b.sub(b.load(size_p, typ=I64), ir.Constant(I64, 8))
        b.store(size, size_p)
        slot = b.gep(b.load(st, typ=PTR), [size], source_etype=ir.IntType(8))
        b.store(b.load(slot, typ=llvm_type(s.var.dtype)), self.var_ptr(s.var))

    # ------------------------------------------------------------ task skeletons
    def build(self):
        if self.task.kind == "serial":
            self.stmts(self.task.body)
            if not self.b.block.is_terminated:
                self.b.ret(ir.Constant(I64, 0))
        else:
            self.build_range()
        self.eb.branch(self.start)
        return self.fn

    # ------------------------------------------------------------ range tasks: chunked loops
    def _invariant(self, var) -> bool:
        """Whether the probe may read var: set before the launch and not written by the task."""
        return var in self.layout.var_slot and var not in self.written \
            and var is not self.task.var

    def _i64(self, value):
        return self.b.sext(value, I64) if value.type.width < 64 else value

    def _emit_cost(self, cost):
        """f64 estimate of one iteration (see schedule.py), inner trip counts evaluated now."""
        b = self.b
        total = ir.Constant(F64, float(cost.const))
        for lo, hi, inner in cost.loops:
            trips = b.sub(self._i64(self.expr(hi)), self._i64(self.expr(lo)))
            trips = b.select(b.icmp_signed("<", trips, ir.Constant(I64, 0)),
                             ir.Constant(I64, 0), trips)
            total = b.fadd(total, b.fmul(b.sitofp(trips, F64), self._emit_cost(inner)))
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
        the OS deschedules, or that starts late, has its chunks taken by the others."""
        b, task, lay = self.b, self.task, self.layout
        begin = self._i64(self.expr(task.begin))
        n = b.sub(self._i64(self.expr(task.end)), begin)
        n = b.select(b.icmp_signed("<", n, i64c(0)), i64c(0), n)
        done_p, chunk_p, nranges_p = (self.slot_ptr(b, lay.sched_slot + k) for k in range(3))
        cost = iteration_cost(task, self._invariant)
        with b.if_then(b.icmp_signed("<=", self.nthreads, i64c(0))):
            if cost.heavy:
                per = None
                big = b.icmp_signed(">", n, i64c(1))
            else:
                per = self._emit_cost(cost)
                work = b.fmul(b.sitofp(n, F64), per)
                limit = SCATTER_INLINE_WORK if scatters_floats(task) else INLINE_WORK
                big = b.and_(b.fcmp_ordered(">", work, ir.Constant(F64, float(limit))),
                             b.icmp_signed(">", n, i64c(1)))
            whole = b.select(b.icmp_signed("<", n, i64c(1)), i64c(1), n)
            chunk = b.select(big, self._chunk_size(n, per), whole)
            nchunks = b.sdiv(b.add(n, b.sub(chunk, i64c(1))), chunk)
            ranges = b.neg(self.nthreads)
            for bound in (i64c(MAX_RANGES), nchunks):
                ranges = b.select(b.icmp_signed("<", bound, ranges), bound, ranges)
            ranges = b.select(b.and_(big, b.icmp_signed(">", ranges, i64c(1))), ranges, i64c(1))
            b.store(chunk, chunk_p)
            b.store(ranges, nranges_p)
            b.store(i64c(0), done_p)
            r_p = self.eb.alloca(I64, name="range_init")

            def init_counter():
                r = b.load(r_p, typ=I64)
                b.store(b.sdiv(b.mul(r, nchunks), ranges), self._counter_ptr(r))

            self._count(r_p, i64c(0), ranges, init_counter)
            self._reset_copies(b.neg(self.nthreads))
            with b.if_then(big):
                b.ret(nchunks)
        # every thread (and an inline launch): take chunks until they run out
        reds = []  # (dtype, accumulator, apply(sum) to the target)
        for key, f in field_reductions(task).items():
            acc = self.eb.alloca(llvm_type(f.dtype), name=f"{f.name}_acc")
            self.reductions[key] = acc
            stub = type("S", (), {"field": f, "comp": key[1], "indices": (), "span": None})
            reds.append((f.dtype, acc, lambda v, stub=stub, dt=f.dtype: self.atomic_update(
                self.element_ptr(stub), Op.ADD, v, dt, atomic=True)))
        for v in var_reductions(task, lay.var_slot):
            acc = self.eb.alloca(llvm_type(v.dtype), name=f"{v.name}_acc")
            self.reductions[("var", v)] = acc
            reds.append((v.dtype, acc, lambda s, v=v: self.atomic_update(
                self.var_ptr(v), Op.ADD, s, v.dtype, atomic=True)))
        assert len(reds) <= lay.n_partials
        copies = self._private_copies()
        chunk = b.load(chunk_p, typ=I64)
        nchunks = b.sdiv(b.add(n, b.sub(chunk, i64c(1))), chunk)
        ranges = b.load(nranges_p, typ=I64)
        own = b.srem(self.tid, ranges)
        visit_p, range_p, end_p, c_p = (self.eb.alloca(I64, name=x) for x in
                                        ("ranges_seen", "range", "range_end", "chunk_index"))
        k_p = self.eb.alloca(I64, name="k")
        hi_p = self.eb.alloca(I64, name="hi")

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

        def run_chunk():
            c = b.load(c_p, typ=I64)
            lo = b.mul(c, chunk)
            hi = b.add(lo, chunk)
            b.store(b.select(b.icmp_signed("<", hi, n), hi, n), hi_p)
            b.store(lo, k_p)
            for dt, acc, _ in reds:
                b.store(const(dt, 0), acc)
            for k, (f, _, copy_p) in enumerate(copies):
                self._allocate_copy(f, k, copy_p, done_p)
            self._inner_loop(k_p, hi_p, begin)
            for f, base, _ in copies:
                self.field_bases[id(f)] = base
            self.by_component.clear()
            if reds:
                self._finish_chunk(c, nchunks, done_p, reds)
            else:
                b.atomic_rmw("add", done_p, i64c(1), "release")

        if copies:
            with b.if_then(b.icmp_signed("<", self.tid, i64c(COPY_THREADS))):
                self._count(visit_p, i64c(0), ranges, enter_range)
            merge = b.icmp_signed(">", self.nthreads, i64c(1))
            if self.component_major:  # copied even when the thread runs alone
                merge = ir.Constant(ir.IntType(1), 1)
            with b.if_then(merge):
                self._await_chunks(done_p, nchunks, bounded=False)
                for k, (f, base, _) in enumerate(copies):
                    self._merge_copies(f, k, base)
        else:
            self._count(visit_p, i64c(0), ranges, enter_range)
            with b.if_then(b.and_(b.icmp_signed("==", self.tid, i64c(0)),
                                  b.icmp_signed(">", self.nthreads, i64c(1)))):
                self._await_chunks(done_p, nchunks)
        b.ret(i64c(0))

    # ------------------------------------------------------------ per-thread scatter copies
    def declared(self, name: str, ret, args, var_arg: bool = False):
        """An external function (libc, an intrinsic), declared once per module. None of them
        throws: a caller LLVM cannot prove nounwind would get unwind tables, which objload
        does not map (the kernel would fall back to MCJIT)."""
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name)
            fn.attributes.add("nounwind")
        return fn

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

    def _await_chunks(self, done_p, nchunks, bounded: bool = True) -> None:
        """Spin until every chunk is done. The calling thread, out of chunks, spins a little
        while the workers finish theirs: blocking right away lets its core go idle, and waking
        an idle core on a VM costs more than a chunk. Bounded (SPIN_ROUNDS), so a descheduled
        worker is waited for by the runtime instead, without burning a core.

        Unbounded before merging per-thread copies: thread 0 adds into the fields themselves
        and every copy must be complete, so the merge waits for the last chunk; past
        SPIN_ROUNDS each round yields the CPU. Every chunk is taken by a running thread and
        ends without waiting for another thread, so the wait ends."""
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
        for r, (dt, acc, _) in enumerate(reds):
            b.store(b.load(acc, typ=llvm_type(dt)), self._partial_ptr(c, r))
        done = b.atomic_rmw("add", done_p, ir.Constant(I64, 1), "acq_rel")
        last = b.icmp_signed("==", done, b.sub(nchunks, ir.Constant(I64, 1)))
        with b.if_then(last):
            j_p = self.eb.alloca(I64, name="partial_j")
            for r, (dt, acc, apply) in enumerate(reds):
                t = llvm_type(dt)
                b.store(b.load(self._partial_ptr(i64c(0), r), typ=t), acc)

                def add_partial(r=r, dt=dt, acc=acc, t=t):
                    part = b.load(self._partial_ptr(b.load(j_p, typ=I64), r), typ=t)
                    b.store(self.combine(Op.ADD, b.load(acc, typ=t), part, dt), acc)

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
            b.store(_narrow(b, b.add(begin, start), var_t), var_ptr)
            for e in task.index_exprs[:-1]:
                self.index_values[id(e)] = self.expr(e)
            for acc, s in sums.values():
                b.store(const(s.field.dtype, 0), acc)

            def cell():
                j = b.load(j_p, typ=I64)
                self._begin_iteration(b.add(begin, b.add(start, j)), var_ptr)
                self.index_values[id(task.index_exprs[-1])] = b.add(low, _narrow(b, j, low.type))

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


__all__ = ["TaskEmitter", "Assign", "Random", "Return", "StackPop", "StackPush", "Print"]
