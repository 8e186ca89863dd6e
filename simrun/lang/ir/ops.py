"""The one opcode table: arity, typing, differentiability and a Python reference for each op.

What other layers know about an op are separate tables keyed by the same enum, one per layer:
LLVM emitters (codegen/llvm_ops.py), the C math functions they call (codegen/libm.py), cost
estimates (codegen/schedule.py), derivative rules (autodiff/rules.py; non-differentiable ops
are read from OpInfo) and numpy fallbacks for Python numbers (builtins.py).
tests/test_ops_tables.py asserts that each has an entry for every op.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable

from ..types import DType, defaults, i32, promote


class Op(enum.Enum):
    NEG = "neg"
    ABS = "abs"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    TANH = "tanh"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    LOGICAL_NOT = "not"
    BIT_NOT = "bit_not"
    CAST = "cast"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    TRUEDIV = "truediv"
    FLOORDIV = "floordiv"
    MOD = "mod"
    POW = "pow"
    MIN = "min"
    MAX = "max"
    ATAN2 = "atan2"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    EQ = "eq"
    NE = "ne"
    LOGICAL_AND = "and"
    LOGICAL_OR = "or"
    BIT_AND = "bit_and"
    BIT_OR = "bit_or"
    BIT_XOR = "bit_xor"
    SHL = "shl"
    SHR = "shr"
    SELECT = "select"


class TypeRule(enum.Enum):
    SAME = "same"          # result has the promoted type of the operands
    FLOAT = "float"        # ints are promoted to the default float first
    BOOL = "bool"          # comparisons and logic: i32 holding 0 or 1
    INT = "int"            # bit operations: integer operands only
    EXPLICIT = "explicit"  # cast: the node carries its type
    SELECT = "select"      # promoted type of the two branches


@dataclass(frozen=True)
class OpInfo:
    arity: int
    rule: TypeRule
    differentiable: bool
    ref: Callable


def _floordiv(a, b):
    return a // b


def _pymod(a, b):
    return a - b * math.floor(a / b) if isinstance(a, float) or isinstance(b, float) else a % b


def _round(a):
    """C round() (Taichi's kernels): halfway cases away from zero. Exact for every float,
    unlike floor(a + 0.5), which rounds 0.49999997 (f32) and -0.5 the wrong way."""
    if isinstance(a, int) or not math.isfinite(a):
        return a
    t = float(math.trunc(a))
    if abs(a - t) >= 0.5:
        t += math.copysign(1.0, a)
    return math.copysign(t, a)


def _pow(a, b):
    """Integer ** integer wraps like repeated `*` (const() wraps the value to the type); a
    negative exponent uses its magnitude, matching the generated code (and Taichi 1.7.4)."""
    if isinstance(a, int) and isinstance(b, int):
        return pow(a, abs(b), 1 << 64)  # the low 64 bits: bounded work for 3 ** 2147483647
    return a**b


def _shl(a, b):
    """A shift by 64 or more is not folded (ValueError): the machine's shift decides it, and
    a Python 1 << 2**31 would take gigabytes."""
    if not 0 <= b < 64:
        raise ValueError("shift count out of range")
    return a << b


_U, _B = 1, 2
T = TypeRule
OPS: dict[Op, OpInfo] = {
    Op.NEG: OpInfo(_U, T.SAME, True, lambda a: -a),
    Op.ABS: OpInfo(_U, T.SAME, True, abs),
    Op.SIN: OpInfo(_U, T.FLOAT, True, math.sin),
    Op.COS: OpInfo(_U, T.FLOAT, True, math.cos),
    Op.TAN: OpInfo(_U, T.FLOAT, True, math.tan),
    Op.ASIN: OpInfo(_U, T.FLOAT, True, math.asin),
    Op.ACOS: OpInfo(_U, T.FLOAT, True, math.acos),
    Op.ATAN: OpInfo(_U, T.FLOAT, True, math.atan),
    Op.TANH: OpInfo(_U, T.FLOAT, True, math.tanh),
    Op.EXP: OpInfo(_U, T.FLOAT, True, math.exp),
    Op.LOG: OpInfo(_U, T.FLOAT, True, math.log),
    Op.SQRT: OpInfo(_U, T.FLOAT, True, math.sqrt),
    Op.RSQRT: OpInfo(_U, T.FLOAT, True, lambda a: 1.0 / math.sqrt(a)),
    Op.FLOOR: OpInfo(_U, T.SAME, False, lambda a: a if isinstance(a, int) else
                     math.copysign(float(math.floor(a)), a)),  # C floor(): keeps -0.0
    Op.CEIL: OpInfo(_U, T.SAME, False, lambda a: a if isinstance(a, int) else
                    math.copysign(float(math.ceil(a)), a)),  # ceil(-0.5) is -0.0
    Op.ROUND: OpInfo(_U, T.SAME, False, _round),
    Op.LOGICAL_NOT: OpInfo(_U, T.BOOL, False, lambda a: int(not a)),
    Op.BIT_NOT: OpInfo(_U, T.INT, False, lambda a: ~a),
    Op.CAST: OpInfo(_U, T.EXPLICIT, True, lambda a: a),
    Op.ADD: OpInfo(_B, T.SAME, True, lambda a, b: a + b),
    Op.SUB: OpInfo(_B, T.SAME, True, lambda a, b: a - b),
    Op.MUL: OpInfo(_B, T.SAME, True, lambda a, b: a * b),
    Op.TRUEDIV: OpInfo(_B, T.FLOAT, True, lambda a, b: a / b),
    Op.FLOORDIV: OpInfo(_B, T.SAME, False, _floordiv),
    Op.MOD: OpInfo(_B, T.SAME, True, _pymod),
    Op.POW: OpInfo(_B, T.SAME, True, _pow),
    Op.MIN: OpInfo(_B, T.SAME, True, min),
    Op.MAX: OpInfo(_B, T.SAME, True, max),
    Op.ATAN2: OpInfo(_B, T.FLOAT, True, math.atan2),
    Op.LT: OpInfo(_B, T.BOOL, False, lambda a, b: int(a < b)),
    Op.LE: OpInfo(_B, T.BOOL, False, lambda a, b: int(a <= b)),
    Op.GT: OpInfo(_B, T.BOOL, False, lambda a, b: int(a > b)),
    Op.GE: OpInfo(_B, T.BOOL, False, lambda a, b: int(a >= b)),
    Op.EQ: OpInfo(_B, T.BOOL, False, lambda a, b: int(a == b)),
    Op.NE: OpInfo(_B, T.BOOL, False, lambda a, b: int(a != b)),
    Op.LOGICAL_AND: OpInfo(_B, T.BOOL, False, lambda a, b: int(bool(a) and bool(b))),
    Op.LOGICAL_OR: OpInfo(_B, T.BOOL, False, lambda a, b: int(bool(a) or bool(b))),
    Op.BIT_AND: OpInfo(_B, T.INT, False, lambda a, b: a & b),
    Op.BIT_OR: OpInfo(_B, T.INT, False, lambda a, b: a | b),
    Op.BIT_XOR: OpInfo(_B, T.INT, False, lambda a, b: a ^ b),
    Op.SHL: OpInfo(_B, T.INT, False, _shl),
    Op.SHR: OpInfo(_B, T.INT, False, lambda a, b: a >> b),
    Op.SELECT: OpInfo(3, T.SELECT, True, lambda c, a, b: a if c else b),
}

# `ti.atomic_<name>` and augmented assignments to fields: the op each one applies
ATOMIC_OPS: dict[str, Op] = {"add": Op.ADD, "sub": Op.SUB, "mul": Op.MUL, "min": Op.MIN,
                             "max": Op.MAX, "and": Op.BIT_AND, "or": Op.BIT_OR,
                             "xor": Op.BIT_XOR}
ATOMIC_NAMES: dict[Op, str] = {op: name for name, op in ATOMIC_OPS.items()}


def result_type(op: Op, arg_types: list[DType]) -> DType:
    """The dtype an op produces from its operand dtypes (Taichi's rules)."""
    rule = OPS[op].rule
    if rule is TypeRule.BOOL:
        return i32
    if rule is TypeRule.SELECT:
        return promote(arg_types[1], arg_types[2])
    t = arg_types[0]
    for other in arg_types[1:]:
        t = promote(t, other)
    if rule is TypeRule.FLOAT and not t.is_float:
        return defaults.fp
    if rule is TypeRule.INT and not t.is_int:
        raise TypeError(f"'{op.value}' needs integer operands, got {t}")
    return t


def operand_type(op: Op, arg_types: list[DType], result: DType) -> list[DType]:
    """The dtype each operand is converted to before the op runs."""
    rule = OPS[op].rule
    if op is Op.SELECT:
        return [arg_types[0], result, result]
    if op in (Op.SHL, Op.SHR):
        return [result, result]
    if rule is TypeRule.BOOL:
        common = arg_types[0]
        for other in arg_types[1:]:
            common = promote(common, other)
        return [common] * len(arg_types)
    if rule is TypeRule.EXPLICIT:
        return list(arg_types)
    return [result] * len(arg_types)
