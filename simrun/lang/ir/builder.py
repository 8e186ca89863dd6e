"""Construction helpers: typing, operand casts and constant folding for new IR nodes."""

from __future__ import annotations

import numpy as np

from ..types import DType, defaults, i64, literal_dtype, promote, u64
from . import emitter
from .nodes import Arith, Const, Expr, OpExpr
from .ops import OPS, Op, operand_type, result_type

# The frontend installs a converter for values that are not Expr yet (lazy global loads).
value_hooks: list = []
# Types whose operators apply element-wise (ti.Matrix; matrix.py adds it): an expression's
# operator with one of them returns NotImplemented, so theirs runs instead.
elementwise: tuple = ()


def as_expr(value) -> Expr:
    if isinstance(value, Expr):
        return value
    for hook in value_hooks:
        converted = hook(value)
        if converted is not None:
            return converted
    if isinstance(value, (bool, int, float, np.integer, np.floating)):
        dt = literal_dtype(value)
        raw = float(value) if dt.is_float else int(value)
        if dt.is_int and not _fits(raw, dt):  # 2**40: i64, and it widens what it meets
            return Const(raw, _wide_int(raw))
        return Const(raw, dt, weak=True)
    shape = value.get_shape() if callable(getattr(value, "get_shape", None)) else None
    if shape is not None:  # a ti.Vector / ti.Matrix: its repr would show IR objects
        what = f"a {shape[0]}-vector" if len(shape) == 1 else \
            f"a {' x '.join(map(str, shape))} matrix"
        raise TypeError(f"{what} is used where a single number is needed (stored in a scalar "
                        "field, or in scalar arithmetic): take one component, e.g. v[0], or "
                        "make the field a vector field")
    raise TypeError(f"{type(value).__name__} value {value!r} cannot be used in kernel arithmetic")


def _fits(value: int, dtype: DType) -> bool:
    lo = -(1 << (dtype.bits - 1)) if dtype.kind == "i" else 0
    return lo <= value < lo + (1 << dtype.bits)


def _wide_int(value: int) -> DType:
    for dt in (i64, u64):
        if _fits(value, dt):
            return dt
    raise ValueError(f"the integer {str(value)[:40]}{'...' if len(str(value)) > 40 else ''} "
                     "does not fit in 64 bits")


def _normalize(value, dtype: DType):
    if dtype.is_float:
        return float(np.array(value).astype(dtype.np)) if dtype.bits < 64 else float(value)
    wrapped = int(value) & ((1 << dtype.bits) - 1)  # two's complement, as the machine does
    if dtype.kind == "i" and wrapped >> (dtype.bits - 1):
        wrapped -= 1 << dtype.bits
    return wrapped


def const(value, dtype: DType) -> Const:
    return Const(_normalize(value, dtype), dtype)


def cast(e, dtype: DType) -> Expr:
    e = as_expr(e)
    if e.dtype == dtype and not getattr(e, "weak", False):
        return e
    if isinstance(e, Const):
        v = e.value
        if dtype.is_int and isinstance(v, float):
            v = int(v)  # C semantics: truncation toward zero
        return const(v, dtype)
    return OpExpr(Op.CAST, (e,), dtype)


def _typing_dtypes(exprs, shift: bool = False) -> list:
    """Python literals take the other operands' type (f64 field * 0.1 stays exact f64), but
    an integer literal among integers is default_ip as in Taichi, so a narrow operand widens
    (i8 127 + 1 is 128, u8 200 + 100 is 300); a shift keeps its left operand's type."""
    strong = [e.dtype for e in exprs if not getattr(e, "weak", False)]
    if not strong or len(strong) == len(exprs):
        return [e.dtype for e in exprs]
    if any(getattr(e, "weak", False) and e.dtype.is_float for e in exprs) and \
            not any(t.is_float for t in strong):
        strong.append(defaults.fp)
    elif not shift and all(t.is_int for t in strong):
        strong.append(defaults.ip)
    common = strong[0]
    for t in strong[1:]:
        common = promote(common, t)
    return [common if getattr(e, "weak", False) else e.dtype for e in exprs]


def make(op: Op, *args) -> Expr:
    """Build op(args) with Taichi typing; folds constants."""
    exprs = [as_expr(a) for a in args]
    if op is not Op.SELECT:
        exprs = [cast(e, t) if getattr(e, "weak", False) else e
                 for e, t in zip(exprs, _typing_dtypes(exprs, op in (Op.SHL, Op.SHR)))]
    elif len(exprs) == 3:
        exprs = exprs[:1] + [cast(e, t) if getattr(e, "weak", False) else e
                             for e, t in zip(exprs[1:], _typing_dtypes(exprs[1:]))]
    rtype = result_type(op, [e.dtype for e in exprs])
    otypes = operand_type(op, [e.dtype for e in exprs], rtype)
    exprs = [cast(e, t) for e, t in zip(exprs, otypes)]
    if all(isinstance(e, Const) for e in exprs):
        try:
            value = OPS[op].ref(*[e.value for e in exprs])
            return const(value, rtype)
        except (ArithmeticError, ValueError, OverflowError):
            pass
    return _shallow(OpExpr(op, tuple(exprs), rtype))


# Deeper expressions are split (a temporary per SPILL_DEPTH levels) while a kernel is lowered:
# a 2,000-term sum or a 500-entry vector's sum is then a chain of short assignments.
SPILL_DEPTH = 32


def _shallow(e: OpExpr) -> Expr:
    if e.depth <= SPILL_DEPTH or not emitter.active() or not emitter.current().blocks:
        return e
    return emitter.current().spill(e)


def binary(op: Op, a, b) -> Expr:
    if isinstance(a, elementwise) or isinstance(b, elementwise):
        return NotImplemented
    if op is Op.POW:
        return power(a, b)
    return make(op, a, b)


def unary(op: Op, a) -> Expr:
    return make(op, a)


def _alu(op: Op, *operands) -> Expr:
    """An IR value's Python operator (nodes.Arith): binary or unary by operand count."""
    return binary(op, *operands) if len(operands) == 2 else unary(op, *operands)


Arith.alu = staticmethod(_alu)


def power(a, b) -> Expr:
    """x ** n for a small non-negative integer constant n is unrolled into multiplications."""
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool) and 0 <= b <= 16:
        a = as_expr(a)
        if b == 0:
            return const(1, a.dtype)
        result = a
        for _ in range(b - 1):
            result = make(Op.MUL, result, a)
        return result
    return make(Op.POW, a, b)


def select(c, a, b) -> Expr:
    return make(Op.SELECT, c, a, b)
