"""Partial derivatives of every differentiable opcode, written once.

Reverse mode multiplies them by the output adjoint; forward mode by the operand duals.  `None`
means the partial is zero.  tests/test_ops_tables.py checks every Op is covered.
"""

from __future__ import annotations

from .. import builtins as B
from ..ir import builder
from ..ir.nodes import Const
from ..ir.ops import OPS, Op


def _one(x):
    return builder.const(1, x.dtype)


RULES = {
    Op.NEG: lambda a, o: [-_one(a[0])],
    Op.ABS: lambda a, o: [B.select(a[0] >= 0, _one(a[0]), -_one(a[0]))],
    Op.SIN: lambda a, o: [B.cos(a[0])],
    Op.COS: lambda a, o: [-B.sin(a[0])],
    Op.TAN: lambda a, o: [1.0 + o * o],
    Op.ASIN: lambda a, o: [B.rsqrt(1.0 - a[0] * a[0])],
    Op.ACOS: lambda a, o: [-B.rsqrt(1.0 - a[0] * a[0])],
    Op.ATAN: lambda a, o: [1.0 / (1.0 + a[0] * a[0])],
    Op.TANH: lambda a, o: [1.0 - o * o],
    Op.EXP: lambda a, o: [o],
    Op.LOG: lambda a, o: [1.0 / a[0]],
    Op.SQRT: lambda a, o: [0.5 / o],
    Op.RSQRT: lambda a, o: [-0.5 * o / a[0]],
    Op.ADD: lambda a, o: [_one(a[0]), _one(a[1])],
    Op.SUB: lambda a, o: [_one(a[0]), -_one(a[1])],
    Op.MUL: lambda a, o: [a[1], a[0]],
    Op.TRUEDIV: lambda a, o: [1.0 / a[1], -o / a[1]],
    Op.MOD: lambda a, o: [_one(a[0]), -B.floor(a[0] / a[1])],
    Op.POW: lambda a, o: [_pow_base(a), _pow_exp(a, o)],
    Op.MIN: lambda a, o: [B.select(a[0] <= a[1], _one(a[0]), 0 * a[0]),
                          B.select(a[0] <= a[1], 0 * a[1], _one(a[1]))],
    Op.MAX: lambda a, o: [B.select(a[0] >= a[1], _one(a[0]), 0 * a[0]),
                          B.select(a[0] >= a[1], 0 * a[1], _one(a[1]))],
    Op.ATAN2: lambda a, o: [a[1] / (a[0] * a[0] + a[1] * a[1]),
                            -a[0] / (a[0] * a[0] + a[1] * a[1])],
    Op.SELECT: lambda a, o: [None, B.select(a[0], _one(a[1]), 0 * a[1]),
                             B.select(a[0], 0 * a[2], _one(a[2]))],
}


def _pow_base(a):
    base, exp = a
    if isinstance(exp, Const):
        if exp.value == 0:
            return None
        if exp.value == 1:
            return _one(base)
    return exp * builder.make(Op.POW, base, exp - 1)


def _pow_exp(a, o):
    base, exp = a
    if isinstance(exp, Const):
        return None
    # d(b^e)/de = b^e log b; define it as 0 where b == 0 (the limit from the right)
    return B.select(base > 0, o * B.log(B.max(base, 1e-300 if base.dtype.bits == 64 else 1e-38)),
                    0 * base)


NON_DIFFERENTIABLE = frozenset(op for op, info in OPS.items() if not info.differentiable)


def partials(e):
    """Partials of OpExpr e with respect to each operand (None where zero or not float)."""
    if e.op in NON_DIFFERENTIABLE or not e.dtype.is_float:
        return [None] * len(e.args)
    if e.op is Op.CAST:
        return [builder.const(1, e.dtype) if e.args[0].dtype.is_float else None]
    ps = RULES[e.op](list(e.args), e)
    return [p if (p is not None and a.dtype.is_float) else None for p, a in zip(ps, e.args)]
