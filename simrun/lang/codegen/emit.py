"""IR -> llvmlite.ir: one LLVM function per task, `i64 task(ctx, tid, nthreads)`.

nthreads <= 0 is the probe call (-nthreads: the runtime's thread count): a range task whose
estimated work is small runs inline and returns 0; a larger one resets its chunk counters and
returns its chunk count, and the runtime then calls it on each thread (tid < nthreads), which
takes chunks until none are left. The cost model, chunk sizes and reduction partials are
described in schedule.py.

TaskEmitter is assembled from one class per concern: statements.py (IR statements and
expressions of a loop body), chunks.py (a range task's probe, chunk taking, reductions and
loops), copies.py (per-group copies of scatter targets and their merge); this file holds
the function, its storage (context slots, locals, field bases) and indexing.
"""

from __future__ import annotations

import math

from llvmlite import ir

from ..ir.access import cell_offset, stmt_writes
from ..ir.nodes import Const, OpExpr, Random, VarRef, walk
from ..ir.ops import Op
from ..types import DType
from . import llvm_ops
from .chunks import RangeTask
from .copies import PrivateCopies
from .layout import Layout
from .llvm_types import I64, PTR, const, i64c, llvm_type
from .schedule import owned_fields
from .statements import Statements


class TaskEmitter(Statements, RangeTask, PrivateCopies):
    """Emits one task as `i64 task(ctx, tid, nthreads)` into an LLVM module."""

    native_int_min = llvm_ops.NATIVE_INT_MIN  # float->int as x86 converts: in hardware

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
        self.access_groups: list = []  # the enclosing parallel loop's llvm.access.group
        self.parallel = task.kind == "range"
        self.reductions: dict = {}  # key -> (chunk partial's alloca, kind: ADD, MAX or MIN)
        self.index_values: dict = {}  # id(index expression) -> its value (_grid_loop)
        self.row_sums: dict = {}      # id(atomic) -> (per-row sum, statement) (_grid_loop)
        # ids of fields whose atomics need no atomicity: each iteration touches its own
        # elements, or the adds go to a per-group copy (_private_copies)
        self.plain: set = owned_fields(task) if self.parallel else set()
        self._alone = None  # alone(): this call runs the launch on one thread
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

    def alone(self):
        """i1: whether this call runs the launch on one thread (nthreads <= 1), computed once
        in the entry block."""
        if self._alone is None:
            self._alone = self.eb.icmp_signed("<=", self.nthreads, ir.Constant(I64, 1),
                                              name="alone")
        return self._alone

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
                return llvm_ops.cast(b, args[0], e.args[0].dtype, e.dtype,
                                     self.native_int_min)
            self.operand_dtype = e.args[0].dtype
            if e.op is Op.SELECT:
                self.cond_dtype = e.args[0].dtype
            return llvm_ops.emit_op(self, b, e.op, e.dtype, args)
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
        offset = cell_offset(idx, f.shape, f.cell_strides, zero=ir.Constant(I64, 0),
                             mul=lambda v, n: b.mul(v, ir.Constant(I64, n)), add=b.add)
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

    def _i64(self, value):
        return self.b.sext(value, I64) if value.type.width < 64 else value
    def math_call(self, b, fn, args, t):
        """A registered float function (ir/ops.py MathFn) on this target: the CPU's."""
        return llvm_ops.cpu_math(b, fn, args, t)

    def declared(self, name: str, ret, args, var_arg: bool = False):
        """An external function (libc, an intrinsic), declared once per module. None of them
        throws: a caller LLVM cannot prove nounwind would get unwind tables, which objload
        does not map (the kernel would fall back to MCJIT)."""
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name)
            fn.attributes.add("nounwind")
        return fn

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
