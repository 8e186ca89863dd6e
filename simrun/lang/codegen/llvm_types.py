"""simrun dtypes -> LLVM types."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..types import DType

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F64 = ir.DoubleType()
PTR = ir.PointerType()


def i64c(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def narrow(b, value, typ):
    """value (i64) as the loop variable's type: i32 in Taichi's loops, i64 for wide ranges."""
    return value if value.type == typ else b.trunc(value, typ)


def llvm_type(dtype: DType) -> ir.Type:
    if dtype.is_float:
        return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[dtype.bits]
    return ir.IntType(8 if dtype.bits == 1 else dtype.bits)


def const(dtype: DType, value) -> ir.Constant:
    t = llvm_type(dtype)
    if dtype.is_float:
        return ir.Constant(t, float(np.array(value).astype(dtype.np)))
    return ir.Constant(t, int(value) & ((1 << t.width) - 1))
