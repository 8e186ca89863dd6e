"""The op registry: everything the compiler knows about an op, in one registration per op.

Each OpInfo holds the op's arity, type rule, Python reference, cost estimate, derivative rule
(or NOT_DIFFERENTIABLE), the numpy result that replaces a raised math error for Python numbers,
and, for float functions, its MathFn: the CPU's LLVM intrinsic or C function and libdevice's
`__nv_<name>` on NVIDIA GPUs. Codegen lowers a MathFn op with no code of its own from that
alone; the other ops (arithmetic, comparisons, bits: the same LLVM on every target) have an
emitter in codegen/llvm_ops.py. Adding a math function (ti.erf) is one registration here;
tests/test_ops_tables.py fails if an op lacks a lowering, has two, or lacks a rule.

Derivative rules take (m, args, out): m builds IR (m.cos(x), m.select(c, a, b), m.one(x),
m.const_value(x)); autodiff passes it in, so this module imports nothing above ir/.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

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
    ERF = "erf"


class TypeRule(enum.Enum):
    SAME = "same"          # result has the promoted type of the operands
    FLOAT = "float"        # ints are promoted to the default float first
    BOOL = "bool"          # comparisons and logic: i32 holding 0 or 1
    INT = "int"            # bit operations: integer operands only
    EXPLICIT = "explicit"  # cast: the node carries its type
    SELECT = "select"      # promoted type of the two branches


@dataclass(frozen=True)
class MathFn:
    """A float function every target calls by name: on the CPU an LLVM intrinsic ("llvm.sin",
    which LLVM may turn into a libm call) or a C function ("tan"); on NVIDIA GPUs libdevice's
    `__nv_<libdevice>` (`f` appended for f32: `__nv_sinf`), or an LLVM intrinsic that NVPTX
    has an instruction for ("llvm.sqrt")."""

    cpu: str
    libdevice: str

    @property
    def libm(self) -> str:
        """The C function the CPU code may end up calling."""
        return self.cpu.removeprefix("llvm.")


def NOT_DIFFERENTIABLE(m, a, o):  # noqa: N802 (a marker, spelt as a constant)
    """The derivative rule of an op with no derivative (comparisons, bits, rounding)."""
    raise TypeError("not differentiable")


@dataclass(frozen=True)
class OpInfo:
    """One op's registration. Every field but math and calls is required: a row that forgets
    its cost or derivative rule does not construct."""

    arity: int
    rule: TypeRule
    ref: Callable            # Python semantics: constant folding and Python-scope numbers
    cost: int                # work units of one evaluation (codegen/schedule.py)
    deriv: Callable          # (m, args, out) -> one partial per operand (None: zero)
    ieee: Callable | None    # numpy's result where ref raises (sqrt(-1) is nan), or None
    math: MathFn | None = None  # a float function lowered by name on every target
    calls: tuple[str, ...] = ()  # C functions the CPU code calls beyond `math`

    @property
    def differentiable(self) -> bool:
        return self.deriv is not NOT_DIFFERENTIABLE

    @property
    def libm(self) -> tuple[str, ...]:
        return self.calls + ((self.math.libm,) if self.math else ())

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


def _pow_base(m, a):
    base, exp = a
    e = m.const_value(exp)
    if e == 0:
        return None
    if e == 1:
        return m.one(base)
    return exp * m.pow(base, exp - 1)


def _pow_exp(m, a, o):
    base, exp = a
    if m.const_value(exp) is not None:
        return None
    # d(b^e)/de = b^e log b; define it as 0 where b == 0 (the limit from the right)
    tiny = 1e-300 if base.dtype.bits == 64 else 1e-38
    return m.select(base > 0, o * m.log(m.max(base, tiny)), 0 * base)


def _fn(arity: int, ref, cost: int, deriv, ieee, cpu: str, libdevice: str | None = None):
    """A float function: ints are promoted to the default float, lowered by name."""
    name = libdevice or cpu.removeprefix("llvm.")
    return OpInfo(arity, TypeRule.FLOAT, ref, cost, deriv, ieee, MathFn(cpu, name))


def _exact(rule: TypeRule, ref, arity: int = 2, cost: int = 1):
    """An op without a derivative (comparisons, logic, bits), one unit of work."""
    return OpInfo(arity, rule, ref, cost, NOT_DIFFERENTIABLE, None)


_U, _B = 1, 2
T = TypeRule
_ND = NOT_DIFFERENTIABLE
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
OPS: dict[Op, OpInfo] = {
    Op.NEG: OpInfo(_U, T.SAME, lambda a: -a, 1, lambda m, a, o: [-m.one(a[0])], None),
    Op.ABS: OpInfo(_U, T.SAME, abs, 1, lambda m, a, o: [
        m.select(a[0] >= 0, m.one(a[0]), -m.one(a[0]))], None),
    Op.SIN: _fn(_U, math.sin, 24, lambda m, a, o: [m.cos(a[0])], np.sin, "llvm.sin"),
    Op.COS: _fn(_U, math.cos, 24, lambda m, a, o: [-m.sin(a[0])], np.cos, "llvm.cos"),
    Op.TAN: _fn(_U, math.tan, 32, lambda m, a, o: [1.0 + o * o], np.tan, "tan"),
    Op.ASIN: _fn(_U, math.asin, 32, lambda m, a, o: [m.rsqrt(1.0 - a[0] * a[0])],
                 np.arcsin, "asin"),
    Op.ACOS: _fn(_U, math.acos, 32, lambda m, a, o: [-m.rsqrt(1.0 - a[0] * a[0])],
                 np.arccos, "acos"),
    Op.ATAN: _fn(_U, math.atan, 32, lambda m, a, o: [1.0 / (1.0 + a[0] * a[0])],
                 np.arctan, "atan"),
    Op.TANH: _fn(_U, math.tanh, 32, lambda m, a, o: [1.0 - o * o], np.tanh, "tanh"),
    Op.EXP: _fn(_U, math.exp, 20, lambda m, a, o: [o], np.exp, "llvm.exp"),
    Op.LOG: _fn(_U, math.log, 20, lambda m, a, o: [1.0 / a[0]], np.log, "llvm.log"),
    Op.SQRT: _fn(_U, math.sqrt, 6, lambda m, a, o: [0.5 / o], np.sqrt, "llvm.sqrt",
                 "llvm.sqrt"),  # NVPTX's sqrt.rn: libdevice's __nv_sqrtf is approximate
    Op.ERF: _fn(_U, math.erf, 24, lambda m, a, o: [
        _TWO_OVER_SQRT_PI * m.exp(-(a[0] * a[0]))], None, "erf"),
    Op.RSQRT: OpInfo(_U, T.FLOAT, lambda a: 1.0 / math.sqrt(a), 8,
                     lambda m, a, o: [-0.5 * o / a[0]], lambda a: 1.0 / np.sqrt(a),
                     calls=("sqrt",)),
    Op.FLOOR: OpInfo(_U, T.SAME, lambda a: a if isinstance(a, int) else
                     math.copysign(float(math.floor(a)), a), 1, _ND, None,
                     calls=("floor",)),  # C floor(): keeps -0.0
    Op.CEIL: OpInfo(_U, T.SAME, lambda a: a if isinstance(a, int) else
                    math.copysign(float(math.ceil(a)), a), 1, _ND, None,
                    calls=("ceil",)),  # ceil(-0.5) is -0.0
    Op.ROUND: OpInfo(_U, T.SAME, _round, 4, _ND, None),
    Op.LOGICAL_NOT: _exact(T.BOOL, lambda a: int(not a), _U),
    Op.BIT_NOT: _exact(T.INT, lambda a: ~a, _U),
    # casts between floats pass the adjoint through (an int operand gets none: rules.partials)
    Op.CAST: OpInfo(_U, T.EXPLICIT, lambda a: a, 1, lambda m, a, o: [m.one(o)], None),
    Op.ADD: OpInfo(_B, T.SAME, lambda a, b: a + b, 1,
                   lambda m, a, o: [m.one(a[0]), m.one(a[1])], None),
    Op.SUB: OpInfo(_B, T.SAME, lambda a, b: a - b, 1,
                   lambda m, a, o: [m.one(a[0]), -m.one(a[1])], None),
    Op.MUL: OpInfo(_B, T.SAME, lambda a, b: a * b, 1, lambda m, a, o: [a[1], a[0]], None),
    Op.TRUEDIV: OpInfo(_B, T.FLOAT, lambda a, b: a / b, 6,
                       lambda m, a, o: [1.0 / a[1], -o / a[1]], None),
    Op.FLOORDIV: OpInfo(_B, T.SAME, _floordiv, 12, _ND, None, calls=("floor",)),
    Op.MOD: OpInfo(_B, T.SAME, _pymod, 12, lambda m, a, o: [
        m.one(a[0]), -m.floor(a[0] / a[1])], None, calls=("floor", "fmod")),
    # float pow is a math function; integer pow has its own code (codegen/llvm_ops.py)
    Op.POW: OpInfo(_B, T.SAME, _pow, 1, lambda m, a, o: [_pow_base(m, a), _pow_exp(m, a, o)],
                   None, MathFn("llvm.pow", "pow")),
    Op.MIN: OpInfo(_B, T.SAME, min, 1, lambda m, a, o: [
        m.select(a[0] <= a[1], m.one(a[0]), 0 * a[0]),
        m.select(a[0] <= a[1], 0 * a[1], m.one(a[1]))], None),
    Op.MAX: OpInfo(_B, T.SAME, max, 1, lambda m, a, o: [
        m.select(a[0] >= a[1], m.one(a[0]), 0 * a[0]),
        m.select(a[0] >= a[1], 0 * a[1], m.one(a[1]))], None),
    Op.ATAN2: _fn(_B, math.atan2, 40, lambda m, a, o: [
        a[1] / (a[0] * a[0] + a[1] * a[1]), -a[0] / (a[0] * a[0] + a[1] * a[1])],
        np.arctan2, "atan2"),
    Op.LT: _exact(T.BOOL, lambda a, b: int(a < b)),
    Op.LE: _exact(T.BOOL, lambda a, b: int(a <= b)),
    Op.GT: _exact(T.BOOL, lambda a, b: int(a > b)),
    Op.GE: _exact(T.BOOL, lambda a, b: int(a >= b)),
    Op.EQ: _exact(T.BOOL, lambda a, b: int(a == b)),
    Op.NE: _exact(T.BOOL, lambda a, b: int(a != b)),
    Op.LOGICAL_AND: _exact(T.BOOL, lambda a, b: int(bool(a) and bool(b))),
    Op.LOGICAL_OR: _exact(T.BOOL, lambda a, b: int(bool(a) or bool(b))),
    Op.BIT_AND: _exact(T.INT, lambda a, b: a & b),
    Op.BIT_OR: _exact(T.INT, lambda a, b: a | b),
    Op.BIT_XOR: _exact(T.INT, lambda a, b: a ^ b),
    Op.SHL: _exact(T.INT, _shl),
    Op.SHR: _exact(T.INT, lambda a, b: a >> b),
    Op.SELECT: OpInfo(3, T.SELECT, lambda c, a, b: a if c else b, 1, lambda m, a, o: [
        None, m.select(a[0], m.one(a[1]), 0 * a[1]), m.select(a[0], 0 * a[2], m.one(a[2]))],
        None),
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
