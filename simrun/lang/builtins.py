"""Math and utility functions that work on Python numbers, kernel expressions and matrices alike.

Called from Python scope they compute numbers; called while a kernel is being compiled they
build IR; given a Matrix they apply element-wise.  This is what makes matrix functions, SVD and
polar decomposition plain Python code.
"""

from __future__ import annotations

import builtins as _py
import math as _math
import numbers

import numpy as np

from .ir import builder
from .ir.emitter import active
from .ir.nodes import Arith, Const, Expr
from .ir.ops import OPS, Op, TypeRule
from .types import DType, constructors, to_dtype


def _is_matrix(x) -> bool:
    """A ti.Matrix (matrix.py imports this module; it registers the class in the builder)."""
    return isinstance(x, builder.elementwise)


def _is_number(x) -> bool:
    return isinstance(x, (numbers.Number, np.number)) and not isinstance(x, Arith)


def _apply(op: Op, *args, _kernel_matrix: bool = False):
    """Element-wise over matrices, numeric in Python scope, IR inside kernels."""
    mat = next((a for a in args if _is_matrix(a)), None)
    if mat is not None:
        in_kernel = active()  # a ti.Vector([2.5, ...]) built in a kernel holds expressions
        return mat.zip_map(lambda *xs: _apply(op, *xs, _kernel_matrix=in_kernel), args)
    if all(_is_number(a) for a in args):
        ref = OPS[op].ref if _kernel_matrix else _PYTHON_NUMBER_REFS.get(op, OPS[op].ref)
        values = [float(a) if OPS[op].rule is TypeRule.FLOAT else a for a in args]
        try:
            return ref(*values)
        except (ValueError, OverflowError, ZeroDivisionError):
            if OPS[op].ieee is None:
                raise
            with np.errstate(all="ignore"):  # Taichi's numpy: sqrt(-1) nan, log(0) -inf
                return float(OPS[op].ieee(*values))
    return builder.make(op, *args)


# Taichi evaluates ti.* functions of plain Python numbers with numpy, in Python scope and
# also inside kernels (a literal or a Python global never becomes a kernel expression):
# ti.round(2.5) is numpy's round-half-to-even 2.0 there, while a kernel expression rounds
# halfway cases away from zero (ti.round(x) with x = 2.5 at run time is 3.0). Same here.
_PYTHON_NUMBER_REFS = {Op.ROUND: lambda a: float(np.round(a)),
                       Op.FLOOR: lambda a: float(np.floor(a)),
                       Op.CEIL: lambda a: float(np.ceil(a))}


def rsqrt(x): return _apply(Op.RSQRT, x)
def floor(x, dtype=None): return _rounding(Op.FLOOR, x, dtype)
def ceil(x, dtype=None): return _rounding(Op.CEIL, x, dtype)
def round(x, dtype=None): return _rounding(Op.ROUND, x, dtype)  # noqa: A001
def pow(x, y): return x**y  # noqa: A001
def truediv(a, b): return _apply(Op.TRUEDIV, a, b)
def abs(x): return _apply(Op.ABS, x)  # noqa: A001
def logical_and(a, b): return _apply(Op.LOGICAL_AND, a, b)
def logical_or(a, b): return _apply(Op.LOGICAL_OR, a, b)
def logical_not(a): return _apply(Op.LOGICAL_NOT, a)
def bit_shl(a, b): return a << b
def bit_shr(a, b): return a >> b
def bit_sar(a, b): return a >> b


def _math_function(op: Op):
    arity = OPS[op].arity

    def fn(*args):
        if len(args) != arity:
            raise TypeError(f"ti.{op.value} takes {arity} argument(s), got {len(args)}")
        return _apply(op, *args)

    fn.__name__ = fn.__qualname__ = op.value
    fn.__doc__ = f"ti.{op.value}: element-wise on matrices, numeric on numbers, IR in kernels."
    return fn


# ti.sin, ti.atan2, ti.erf, ...: one per float function of the op registry (ir/ops.py)
MATH_FUNCTIONS = {op.value: _math_function(op) for op, info in OPS.items()
                  if info.math is not None and info.rule is TypeRule.FLOAT}
globals().update(MATH_FUNCTIONS)


def _rounding(op, x, dtype):
    r = _apply(op, x)
    return cast(r, dtype) if dtype is not None else r


def max(*args):  # noqa: A001
    args = _flatten_args(args)
    out = args[0]
    for a in args[1:]:
        out = _apply(Op.MAX, out, a)
    return out


def min(*args):  # noqa: A001
    args = _flatten_args(args)
    out = args[0]
    for a in args[1:]:
        out = _apply(Op.MIN, out, a)
    return out


def _flatten_args(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return list(args[0])
    return list(args)


def select(cond, a, b):
    if _is_matrix(cond) or _is_matrix(a) or _is_matrix(b):
        return _apply(Op.SELECT, cond, a, b)
    if all(_is_number(v) for v in (cond, a, b)):
        return a if cond else b
    return builder.select(cond, a, b)


ifte = select


def cast(x, dtype):
    dtype = to_dtype(dtype)
    if _is_matrix(x):
        return x.map(lambda e: cast(e, dtype))
    if _is_number(x):
        if dtype.is_int and isinstance(x, (float, np.floating)):
            x = _float_to_int(float(x), dtype)
        if active():  # a typed constant: `x: ti.f64 = 0.1` keeps f64
            return builder.const(x if dtype.is_float else int(x), dtype)
        if dtype.is_float:
            return float(np.array(x).astype(dtype.np))
        return int(np.array(int(x)).astype(dtype.np))
    return builder.cast(x, dtype)


def _float_to_int(x: float, dtype: DType) -> int:
    """Truncation toward zero. Out of range (undefined in C) gives what the generated code
    gives on x86-64 and what Taichi gives: the minimum of a signed 32/64-bit type."""
    if dtype.kind == "i" and dtype.bits >= 32:
        low = -(1 << (dtype.bits - 1))
        if not _math.isfinite(x) or not low <= _math.trunc(x) < -low:
            return low
    return int(x) if _math.isfinite(x) else 0


def bit_cast(x, dtype):
    raise NotImplementedError("ti.bit_cast is not supported by simrun yet")


def static_int(x) -> int:
    """Matrix indices must be known at compile time (Taichi's rule for local matrices)."""
    if isinstance(x, Const):
        return int(x.value)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, Expr):
        raise TypeError(
            "a local Vector/Matrix can only be indexed by a compile-time constant; "
            "use ti.static(range(n)) for the loop over its components"
        )
    return int(x)


def python_value(x):
    if isinstance(x, Const):
        return x.value
    if isinstance(x, Arith):
        raise TypeError("a kernel expression has no value in Python scope")
    return x


constructors["cast"] = cast


def is_dtype(x) -> bool:
    return isinstance(x, DType)


_py_math = _math
_py_builtins = _py
