"""One reciprocal for a divisor that several divisions of a block share.

A value_reverse kernel (autodiff: U and dU/dx in one launch) divides by one quantity many
times: gravity's pair term is ``A / s`` for U, and its derivative ``-(A / s) / s * (0.5 / s)``
with ``s = sqrt(r2 + eps)``. LLVM merges the derivative's divisions into ``X / (s * s)``
(fast math's reassociation) but keeps that beside ``A / s``: two vector divisions a pair, the
dearest instruction of the loop, where a hand-written loop takes ``inv = 1 / s`` once and
multiplies. This pass does what the hand-coder does: within one block, every float division
by the same expression becomes a product with one ``r = 1 / divisor`` computed before the
first of them (fast math's `arcp` already allows ``a / b = a * (1 / b)``, so the results
change by rounding only).

Pre: structured IR. Post: in each statement list, a float divisor that at least two
divisions share (compared as expression trees), whose locals no statement between the first
and last of them assigns, is divided once, into a new local; those divisions read it.
"""

from __future__ import annotations

import dataclasses

from ..ir import builder
from ..ir.access import stmt_exprs, stmt_writes
from ..ir.nodes import (
    AssertStmt,
    Assign,
    Atomic,
    Const,
    For,
    If,
    KernelIR,
    Load,
    OpExpr,
    Store,
    Var,
    VarRef,
    While,
    expr_vars,
    walk,
)
from ..ir.ops import Op


def run(kir: KernelIR) -> KernelIR:
    tasks = [dataclasses.replace(t, body=_block(t.body)) for t in kir.tasks]
    return dataclasses.replace(kir, tasks=tasks)


def _key(e):
    """A structural key: equal for expressions that compute the same value from the same
    locals (expressions are pure trees)."""
    if isinstance(e, Const):
        return ("c", repr(e.value), e.dtype.name)
    if isinstance(e, VarRef):
        return ("v", e.var.id)
    if isinstance(e, OpExpr):
        return (e.op, e.dtype.name, *(_key(a) for a in e.args))
    return ("?", id(e))


def _divisions(e, out: list) -> None:
    if not isinstance(e, OpExpr):
        return
    if e.op is Op.TRUEDIV and e.dtype.is_float and e.args[1].dtype == e.dtype:
        out.append(e)
    for a in e.args:
        _divisions(a, out)


def _block(body: list) -> list:
    body = [_nested(s) for s in body]
    at: dict = {}  # divisor key -> (divisor, indices of the statements dividing by it)
    for n, s in enumerate(body):
        found: list = []
        for e in stmt_exprs(s):
            _divisions(e, found)
        for d in found:
            at.setdefault(_key(d.args[1]), (d.args[1], []))[1].append(n)
    shared = {k: (divisor, spots) for k, (divisor, spots) in at.items()
              if len(spots) > 1 and _unchanged(body, divisor, spots[0], spots[-1])}
    inserts: dict = {}
    for k, (divisor, spots) in shared.items():
        r = Var("recip", divisor.dtype)
        inserts.setdefault(spots[0], []).append(
            Assign(r, builder.make(Op.TRUEDIV, builder.const(1, divisor.dtype), divisor)))
        for n in sorted(set(spots)):
            body[n] = _rewrite(body[n], k, r)
    out: list = []
    for n, s in enumerate(body):
        out += inserts.get(n, []) + [s]
    return out


def _unchanged(body: list, divisor, first: int, last: int) -> bool:
    """No statement from the first division's to the one before the last's assigns a local
    the divisor reads (the first one's own assignment happens after it divides)."""
    reads = set(expr_vars(divisor))
    return not any(v in reads for s in walk(body[first:last]) for v in stmt_writes(s))


def _nested(s):
    if isinstance(s, If):
        return dataclasses.replace(s, then=_block(s.then), orelse=_block(s.orelse))
    if isinstance(s, (For, While)):
        return dataclasses.replace(s, body=_block(s.body))
    return s


def _rewrite(s, key, r: Var):
    """s with its own expressions' divisions by `key` reading r instead."""
    def expr(e):
        if not isinstance(e, OpExpr):
            return e
        args = tuple(expr(a) for a in e.args)
        if e.op is Op.TRUEDIV and e.dtype.is_float and e.args[1].dtype == e.dtype \
                and _key(e.args[1]) == key:
            num = args[0]
            if isinstance(num, Const) and num.value == 1:
                return VarRef(r)
            return OpExpr(Op.MUL, (num, VarRef(r)), e.dtype)
        changed = any(a is not b for a, b in zip(args, e.args))  # (== builds IR)
        return OpExpr(e.op, args, e.dtype) if changed else e

    if isinstance(s, Assign):
        return dataclasses.replace(s, value=expr(s.value))
    if isinstance(s, Load):
        return dataclasses.replace(s, indices=tuple(expr(i) for i in s.indices))
    if isinstance(s, (Store, Atomic)):
        return dataclasses.replace(s, indices=tuple(expr(i) for i in s.indices),
                                   value=expr(s.value))
    if isinstance(s, (If, AssertStmt)):
        return dataclasses.replace(s, cond=expr(s.cond))
    if isinstance(s, For):
        return dataclasses.replace(s, begin=expr(s.begin), end=expr(s.end))
    return s
