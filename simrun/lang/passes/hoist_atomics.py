"""Hoist atomic adds whose target does not change inside a serial loop into a local sum.

`for j in range(n): g[i] += e(j)` does one atomic read-modify-write per iteration on the same
element; `s = 0; for j: s += e(j); g[i] += s` does one.  Reverse mode writes this shape for
every load `x[i]` in an inner loop (its adjoint goes to `x.grad[i]`), and users write it too.

Pre: structured IR.  Post: for each serial For, every `atomic add/sub` whose field is neither
loaded nor stored in the loop, whose old value is unused, and whose indices read no local the
loop assigns, becomes `s = s + value` on a fresh local, flushed by one atomic add after the
loop (guarded by `end > begin`, so an empty loop touches nothing, as before).  Other atomics
on the same field stay (adds commute).  Floating-point sums are regrouped, as a parallel
launch regroups them anyway.
"""

from __future__ import annotations

import dataclasses

from ..ir import builder
from ..ir.nodes import (
    Assign,
    Atomic,
    For,
    If,
    KernelIR,
    Var,
    VarRef,
    While,
    expr_vars,
    walk,
)
from ..ir.ops import Op
from ..ir.reductions import hoistable_fields, index_key


def _assigned(body) -> set:
    out = set()
    for s in walk(body):
        for name in ("var", "result"):
            v = getattr(s, name, None)
            if isinstance(v, Var):
                out.add(v)
    return out


def _rewrite(body, fields: set, variant: set, sums: dict) -> list:
    out = []
    for s in body:
        if isinstance(s, Atomic) and id(s.field) in fields and not (
                variant & {v for i in s.indices for v in expr_vars(i)}):
            key = (id(s.field), s.comp) + tuple(index_key(i) for i in s.indices)
            if key not in sums:
                sums[key] = (Var(f"{s.field.name}_sum", s.field.dtype), s)
            acc = sums[key][0]
            value = builder.cast(s.value, acc.dtype)
            out.append(Assign(acc, builder.make(s.op, VarRef(acc), value), span=s.span))
        elif isinstance(s, If):
            out.append(If(s.cond, _rewrite(s.then, fields, variant, sums),
                          _rewrite(s.orelse, fields, variant, sums), span=s.span))
        else:
            out.append(s)
    return out


def _hoist_loop(loop: For) -> list:
    fields = hoistable_fields(loop.body)
    if not fields:
        return [loop]
    variant = _assigned(loop.body) | {loop.var}
    sums: dict = {}
    body = _rewrite(loop.body, fields, variant, sums)
    if not sums:
        return [loop]
    init = [Assign(acc, builder.const(0, acc.dtype), span=loop.span) for acc, _ in sums.values()]
    flush = [Atomic(Op.ADD, s.field, s.comp, s.indices, VarRef(acc), span=s.span)
             for acc, s in sums.values()]
    ran = builder.make(Op.GT, loop.end, loop.begin)
    return init + [For(loop.var, loop.begin, loop.end, body, span=loop.span),
                   If(ran, flush, [], span=loop.span)]


def _block(body) -> list:
    out = []
    for s in body:
        if isinstance(s, For):
            inner = For(s.var, s.begin, s.end, _block(s.body), span=s.span)
            out += _hoist_loop(inner)
        elif isinstance(s, If):
            out.append(If(s.cond, _block(s.then), _block(s.orelse), span=s.span))
        elif isinstance(s, While):
            loop = While(_block(s.body), span=s.span)
            loop.__dict__.update({k: v for k, v in s.__dict__.items() if k not in ("body", "span")})
            out.append(loop)
        else:
            out.append(s)
    return out


def run(kir: KernelIR) -> KernelIR:
    tasks = [dataclasses.replace(t, body=_block(t.body)) for t in kir.tasks]
    return KernelIR(kir.name, tasks, kir.arg_vars, kir.ret_types, kir.span, kir.extra)
