"""Forward mode on the IR: every float local carries a dual; fields carry .dual companions."""

from __future__ import annotations

import dataclasses

from ..errors import AutodiffError
from ..ir import builder
from ..ir.nodes import (
    Assign,
    Atomic,
    Const,
    For,
    If,
    KernelIR,
    Load,
    OpExpr,
    Random,
    StackPop,
    StackPush,
    Store,
    Task,
    Var,
    VarRef,
    While,
    expr_vars,
    walk,
)
from ..ir.ops import ATOMIC_NAMES, Op
from ..ir.reductions import accumulation
from .rules import partials


def has_dual(f) -> bool:
    return getattr(f, "dual", None) is not None


class Dualizer:
    def __init__(self, kernel_name: str, stopped: frozenset = frozenset(),
                 varied: frozenset | None = None):
        self.kernel_name = kernel_name
        self.stopped = stopped  # ti.stop_grad fields: their loads carry no tangent
        self.varied = varied  # fields whose tangents may be nonzero (None: every one)
        self.active: set | None = None  # float locals whose tangent may be nonzero (None: all)
        self.duals: dict = {}

    def moves(self, v: Var) -> bool:
        return v.dtype.is_float and (self.active is None or v in self.active)

    def loads_dual(self, s: Load) -> bool:
        f = s.field
        return has_dual(f) and not s.no_grad and f not in self.stopped and \
            (self.varied is None or f in self.varied)

    def dual(self, v: Var) -> Var:
        d = self.duals.get(v)
        if d is None:
            d = Var(f"dot_{v.name}", v.dtype)
            self.duals[v] = d
        return d

    def d(self, e):
        """The dual of expression e, or None when it is identically zero."""
        if isinstance(e, Const) or not e.dtype.is_float:
            return None
        if isinstance(e, VarRef):
            return VarRef(self.dual(e.var)) if self.moves(e.var) else None
        if isinstance(e, OpExpr):
            total = None
            for a, p in zip(e.args, partials(e)):
                if p is None:
                    continue
                da = self.d(a)
                if da is None:
                    continue
                term = builder.cast(p * da, e.dtype)
                total = term if total is None else total + term
            return total
        return None

    def zero_or(self, e, dtype):
        return e if e is not None else builder.const(0, dtype)

    def block(self, body) -> list:
        out = []
        for s in body:
            if isinstance(s, (Assign, Load, Random, StackPush, StackPop)) and \
                    not self.moves(s.var):
                out.append(s)  # an integer, or a tangent that stays zero: nothing to add
            elif isinstance(s, Assign):
                delta = accumulation(s)
                if delta is not None and s.var not in expr_vars(delta):
                    # `v += e` gives `dv += de`, again an accumulation: inside a parallel loop
                    # codegen makes both reductions (through a temporary, the tangent's
                    # read-modify-write of a kernel-scope local raced between chunks)
                    out.append(s)
                    de = self.d(delta)
                    if de is not None:
                        dual = self.dual(s.var)
                        out.append(Assign(dual, VarRef(dual) + builder.cast(de, s.var.dtype)))
                else:
                    t = Var("dtmp", s.var.dtype)
                    out.append(Assign(t, self.zero_or(self.d(s.value), s.var.dtype)))
                    out.append(s)
                    out.append(Assign(self.dual(s.var), VarRef(t)))
            elif isinstance(s, Load):
                out.append(s)
                if self.loads_dual(s):
                    out.append(Load(self.dual(s.var), s.field.dual, s.comp, s.indices,
                                    span=s.span))
                else:
                    out.append(Assign(self.dual(s.var), builder.const(0, s.var.dtype)))
            elif isinstance(s, Store):
                out.append(s)
                if has_dual(s.field):
                    out.append(Store(s.field.dual, s.comp, s.indices,
                                     self.zero_or(self.d(s.value), s.field.dtype), span=s.span))
            elif isinstance(s, Atomic):
                out.append(s)
                old = s.result if s.result is not None and s.result.dtype.is_float else None
                if has_dual(s.field):
                    if s.op not in (Op.ADD, Op.SUB):
                        raise AutodiffError("forward mode cannot differentiate "
                                            f"ti.atomic_{ATOMIC_NAMES[s.op]} on field "
                                            f"'{s.field.name}'", s.span,
                                            self.kernel_name)
                    dv = self.d(s.value)
                    if dv is not None or old is not None:
                        # the dual's own atomic returns the old value's tangent
                        out.append(Atomic(s.op, s.field.dual, s.comp, s.indices,
                                          self.zero_or(dv, s.field.dtype),
                                          result=None if old is None else self.dual(old),
                                          span=s.span))
                elif old is not None:
                    out.append(Assign(self.dual(old), builder.const(0, old.dtype)))
            elif isinstance(s, Random):  # a draw does not depend on the inputs
                out.append(s)
                out.append(Assign(self.dual(s.var), builder.const(0, s.var.dtype)))
            elif isinstance(s, If):
                out.append(If(s.cond, self.block(s.then), self.block(s.orelse), span=s.span))
            elif isinstance(s, For):
                out.append(For(s.var, s.begin, s.end, self.block(s.body), span=s.span))
            elif isinstance(s, While):
                w = While(self.block(s.body), span=s.span)
                out.append(w)
            elif isinstance(s, StackPush):
                out.append(s)
                out.append(StackPush(self.dual(s.var)))
            elif isinstance(s, StackPop):
                out.append(StackPop(self.dual(s.var)))
                out.append(s)
            else:
                out.append(s)
        return out


def _active(kir: KernelIR, dz: Dualizer) -> set:
    """The float locals whose tangent may be nonzero when only `dz.varied`'s fields carry
    tangents into the kernel (activity analysis, to a fixpoint over loops): those loaded
    from such a field or from one the kernel writes, an atomic's old value, and those
    assigned from an active local."""
    stmts = [s for t in kir.tasks for s in walk(t.body)]
    active: set = set()
    while True:
        size = len(active)
        for s in stmts:
            if isinstance(s, Load) and dz.loads_dual(s):
                active.add(s.var)
            elif isinstance(s, Atomic) and s.result is not None and has_dual(s.field):
                active.add(s.result)
            elif isinstance(s, Assign) and any(v in active for v in expr_vars(s.value)):
                active.add(s.var)
        if len(active) == size:
            return {v for v in active if v.dtype.is_float}


def forward_kernel(kir: KernelIR, varied: frozenset | None = None) -> KernelIR:
    """Tangents of every float local; `varied`: the fields whose tangents may be nonzero
    on entry (a Hessian-vector product seeds x alone), so the others' terms are left out."""
    if varied is not None:  # a field the kernel writes may carry a tangent it made
        varied = frozenset(varied) | {s.field for t in kir.tasks for s in walk(t.body)
                                      if isinstance(s, (Store, Atomic))}
    dz = Dualizer(kir.name, frozenset(kir.extra.get("stop_grad", ())), varied)
    if varied is not None:
        dz.active = _active(kir, dz)
    tasks = []
    for t in kir.tasks:
        body = dz.block(t.body)
        tasks.append(dataclasses.replace(t, body=body))
    extra = dict(kir.extra)
    slot_vars = set(kir.extra.get("top_level_vars", []))
    extra["top_level_vars"] = list(slot_vars) + [d for v, d in dz.duals.items() if v in slot_vars]
    for v in kir.arg_vars:
        if v in dz.duals:
            tasks.insert(0, Task("serial", [Assign(dz.duals[v], builder.const(0, v.dtype))]))
            extra["top_level_vars"].append(dz.duals[v])
    return KernelIR(kir.name + "_fwd", tasks, kir.arg_vars, kir.ret_types, kir.span, extra)
