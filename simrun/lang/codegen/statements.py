"""TaskEmitter's statements: one s_<Stmt> method per IR statement, the loops they build on,
atomics and their plain read-modify-write form, random numbers, the autodiff stack.

A mixin: it uses the emitter's builders (b in the body, eb in the entry block), its storage
(var_ptr, element_ptr, slot_ptr) and its expr(); see emit.py.
"""

from __future__ import annotations

from llvmlite import ir

from ..ir.nodes import walk
from ..ir.ops import Op
from ..ir.reductions import accumulation
from ..types import DType
from ..types import f64 as F64T
from ..types import i64 as I64T
from . import llvm_ops
from .layout import STACK_BYTES
from .llvm_types import F64, I32, I64, PTR, i64c, llvm_type, narrow
from .parallel import parallel_group, parallel_loop, parallel_loop_id

_GOLDEN = 0x9E3779B97F4A7C15


def _u64(value: int):
    value %= 2**64
    return ir.Constant(I64, value - 2**64 if value >= 2**63 else value)


def _mix64(b, z):
    """splitmix64's finaliser: a bijection of u64 with full avalanche."""
    for shift, mul in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = b.mul(b.xor(z, b.lshr(z, ir.Constant(I64, shift))), _u64(mul))
    return b.xor(z, b.lshr(z, ir.Constant(I64, 31)))


class Statements:
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
                acc, _ = self.reductions.get(("var", s.var), (None, None))
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
        if self.access_groups:
            instr.set_metadata("llvm.access.group", self.access_groups[-1])

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
            acc, kind = self.reductions[key]
            old = self.b.load(acc, typ=value.type)
            if kind is not Op.ADD:  # a chunk's running maximum (minimum)
                self.b.store(self.combine(kind, old, value, s.field.dtype), acc)
                return
            op = {Op.ADD: "fadd", Op.SUB: "fsub"} if s.field.dtype.is_float else \
                {Op.ADD: "add", Op.SUB: "sub"}
            fn = getattr(self.b, op[s.op])
            self.b.store(fn(old, value, **({"flags": llvm_ops.FAST} if s.field.dtype.is_float
                                           and self.fast_math else {})), acc)
            return
        ptr = self.element_ptr(s)
        atomic = not self.updates_plainly(s.field)
        old = self.atomic_update(ptr, s.op, value, s.field.dtype, atomic=atomic, field=s.field)
        if s.result is not None:
            self.b.store(old, self.var_ptr(s.result))

    def updates_plainly(self, f) -> bool:
        """Whether an update of f here is a plain read-modify-write, never atomic."""
        return not self.parallel or id(f) in self.plain

    def atomic_update(self, ptr, op: Op, value, dtype: DType, atomic: bool, field=None):
        """The update of *ptr by op; ``atomic`` where other threads may update it too. An
        atomic update also gets a plain read-modify-write path, taken when this call runs
        the launch alone (inline, one thread, or the deterministic mode's serial run:
        nthreads <= 1, see runtime/pool.py): no other thread can touch the element then,
        and x86's float add by compare-and-swap costs ~10x a plain one (DiffTaichi's smoke
        gradients; a pair gradient's scatter once x.grad outgrew the per-group copies).
        Both paths leave the same value."""
        if not atomic:
            return self._update(ptr, op, value, dtype, False, field)
        b = self.b
        with b.if_else(self.alone(), likely=True) as (alone, shared):
            with alone:
                plain = self._update(ptr, op, value, dtype, False, field)
                plain_block = b.block
            with shared:
                locked = self._update(ptr, op, value, dtype, True, field)
                locked_block = b.block
        old = b.phi(plain.type)
        old.add_incoming(plain, plain_block)
        old.add_incoming(locked, locked_block)
        return old

    def _update(self, ptr, op: Op, value, dtype: DType, atomic: bool, field=None):
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
        return llvm_ops.emit_op(self, self.b, op, dtype, [old, value])

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
            value = llvm_ops.cast(b, value, F64T, dt, self.native_int_min)
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

    def _loop(self, head_cond, body, before_body=None, latch=None, group=None):
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
        back = b.branch(head)
        if group is not None:
            back.set_metadata("llvm.loop", parallel_loop_id(self.module, group))
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
        b.store(narrow(b, idx, llvm_type(self.task.var.dtype)), var_ptr)
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

        group = parallel_group(self.module) if parallel_loop(
            s, self.task.body, self.updates_plainly) else None
        if group is not None:
            self.access_groups.append(group)
        self._loop(cond, s.body, before, latch, group)
        if group is not None:
            self.access_groups.pop()

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
        self.printf(gv, args)

    def printf(self, fmt, args) -> None:
        """C's printf of a format string and its (i64 or f64) arguments, flushed."""
        printf = self.declared("printf", I32, [PTR], var_arg=True)
        fflush = self.declared("fflush", I32, [PTR])
        self.b.call(printf, [fmt] + args)
        self.b.call(fflush, [ir.Constant(PTR, None)])

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
            data = self.realloc(b.load(st, typ=PTR), cap, newcap)
            b.store(data, st)
            b.store(newcap, cap_p)
        data = b.load(st, typ=PTR)
        slot = b.gep(data, [size], source_etype=ir.IntType(8))
        b.store(b.load(self.var_ptr(s.var), typ=llvm_type(s.var.dtype)), slot)
        b.store(need, size_p)

    def realloc(self, data, size, new_size):
        """C's realloc of a stack's data (size: its bytes now, which C's realloc knows)."""
        return self.b.call(self.declared("realloc", PTR, [PTR, I64]), [data, new_size])

    def s_StackPop(self, s):
        b = self.b
        st = self._stack()
        size_p = b.gep(st, [ir.Constant(I64, 8)], source_etype=ir.IntType(8))
        size = b.sub(b.load(size_p, typ=I64), ir.Constant(I64, 8))
        b.store(size, size_p)
        slot = b.gep(b.load(st, typ=PTR), [size], source_etype=ir.IntType(8))
        b.store(b.load(slot, typ=llvm_type(s.var.dtype)), self.var_ptr(s.var))
