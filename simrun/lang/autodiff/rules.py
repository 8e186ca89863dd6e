"""Partial derivatives of an op, from its registration's derivative rule (ir/ops.py).

Reverse mode multiplies them by the output adjoint; forward mode by the operand duals.  `None`
means the partial is zero.
"""

from __future__ import annotations

from ..ir import builder
from ..ir.nodes import Const
from ..ir.ops import OPS, Op


class IRMath:
    """What a derivative rule builds IR with: m.cos(x) is the op COS of x, and so on."""

    def __getattr__(self, name: str):
        op = Op[name.upper()]
        return lambda *args: builder.make(op, *args)

    @staticmethod
    def select(c, a, b):
        return builder.select(c, a, b)

    @staticmethod
    def one(x):
        return builder.const(1, x.dtype)

    @staticmethod
    def const_value(x):
        """x's value where x is a constant, else None."""
        return x.value if isinstance(x, Const) else None


_M = IRMath()


def partials(e):
    """Partials of OpExpr e with respect to each operand (None where zero or not float)."""
    info = OPS[e.op]
    if not info.differentiable or not e.dtype.is_float:
        return [None] * len(e.args)
    ps = info.deriv(_M, list(e.args), e)
    return [p if (p is not None and a.dtype.is_float) else None for p, a in zip(ps, e.args)]
