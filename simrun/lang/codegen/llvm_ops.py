"""Opcode -> LLVM emitter table (numba's mathimpl style): one small function per op.

Float functions (sin, erf, ...) have no emitter here: emit_op lowers them from their
registration (ir/ops.py MathFn) through the emitter's math_call, which each target defines
(cpu_math below; codegen/cuda calls libdevice)."""

from __future__ import annotations

import platform

from llvmlite import ir

from ..ir.ops import OPS, MathFn, Op
from ..types import DType
from .llvm_types import I32, llvm_type

FAST = ("reassoc", "nsz", "arcp", "contract", "afn")


def _intrinsic(b: ir.IRBuilder, name: str, args, t):
    suffix = {16: "f16", 32: "f32", 64: "f64"}[t.width] if hasattr(t, "width") else \
        ("f32" if isinstance(t, ir.FloatType) else "f64" if isinstance(t, ir.DoubleType)
         else "f16")
    full = f"{name}.{suffix}"
    fn = b.module.globals.get(full) or ir.Function(b.module,
                                                    ir.FunctionType(t, [t] * len(args)), full)
    return b.call(fn, args)


def _libm(b: ir.IRBuilder, name: str, args, t):
    suffix = "f" if isinstance(t, ir.FloatType) else ""
    fnty = ir.FunctionType(t, [t] * len(args))
    fname = name + suffix
    fn = b.module.globals.get(fname) or ir.Function(b.module, fnty, fname)
    return b.call(fn, args)


def cpu_math(b: ir.IRBuilder, fn: MathFn, args, t):
    """A float function on the CPU: its LLVM intrinsic, or its C function."""
    if fn.cpu.startswith("llvm."):
        return _intrinsic(b, fn.cpu, args, t)
    return _libm(b, fn.cpu, args, t)


def emit_op(cg, b: ir.IRBuilder, op: Op, dt: DType, args):
    """op's LLVM on cg's target: its emitter, else its registered math function."""
    emit = EMITTERS.get(op)
    if emit is not None:
        return emit(cg, b, dt, args)
    return cg.math_call(b, OPS[op].math, args, llvm_type(dt))


def _flags(cg):
    return FAST if cg.fast_math else ()


def _arith(fop, iop, uop=None):
    def emit(cg, b, dt: DType, args):
        if dt.is_float:
            return getattr(b, fop)(*args, flags=_flags(cg))
        return getattr(b, uop if (uop and dt.kind == "u") else iop)(*args)

    return emit


def safe_divisor(b, c, dt):
    """x / 0 on integers yields 0 (and INT_MIN / -1 wraps) instead of a SIGFPE."""
    t = c.type
    bad = b.icmp_unsigned("==", c, ir.Constant(t, 0))
    if dt.kind == "i":
        bad = b.or_(bad, b.icmp_signed("==", c, ir.Constant(t, -1)))
    return b.select(bad, ir.Constant(t, 1), c), bad


def _int_div(cg, b, dt, args):
    a, c = args
    d, bad = safe_divisor(b, c, dt)
    if dt.kind == "u":
        return b.select(bad, ir.Constant(a.type, 0), b.udiv(a, d))
    special = b.select(b.icmp_signed("==", c, ir.Constant(c.type, -1)), b.neg(a),
                       ir.Constant(a.type, 0))
    return b.select(bad, special, b.sdiv(a, d))


def _int_rem(b, a, c, dt):
    d, bad = safe_divisor(b, c, dt)
    r = b.urem(a, d) if dt.kind == "u" else b.srem(a, d)
    return b.select(bad, ir.Constant(a.type, 0), r)


def _floordiv(cg, b, dt, args):
    a, c = args
    t = llvm_type(dt)
    if dt.is_float:
        return _intrinsic(b, "llvm.floor", [b.fdiv(a, c)], t)
    if dt.kind == "u":
        return _int_div(cg, b, dt, args)
    q = _int_div(cg, b, dt, args)
    r = _int_rem(b, a, c, dt)
    zero = ir.Constant(t, 0)
    adjust = b.and_(b.icmp_signed("!=", r, zero),
                    b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", c, zero)))
    return b.sub(q, b.zext(adjust, t))


def _mod(cg, b, dt, args):
    a, c = args
    t = llvm_type(dt)
    if dt.is_float:
        return b.fsub(a, b.fmul(c, _intrinsic(b, "llvm.floor", [b.fdiv(a, c)], t)))
    if dt.kind == "u":
        return _int_rem(b, a, c, dt)
    r = _int_rem(b, a, c, dt)
    zero = ir.Constant(t, 0)
    adjust = b.and_(b.icmp_signed("!=", r, zero),
                    b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", c, zero)))
    return b.select(adjust, b.add(r, c), r)


def _pow(cg, b, dt, args):
    t = llvm_type(dt)
    if dt.is_float:
        return cg.math_call(b, OPS[Op.POW].math, args, t)
    return _int_pow(cg, b, args[0], args[1], dt)


def _int_pow(cg, b, base, exp, dt):
    """Integer ** integer by repeated squaring, wrapping like integer `*` (Taichi 1.7.4:
    3 ** 21 in i32 is 1870418611). A negative exponent uses its magnitude, as Taichi does
    without debug mode (2 ** -1 == 2); the double-precision pow this replaces returned 0 and
    saturated on overflow."""
    t = base.type
    zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
    if dt.kind == "i":
        exp = b.select(b.icmp_signed("<", exp, zero), b.neg(exp), exp)
    before = b.block
    loop = cg.fn.append_basic_block("ipow")
    done = cg.fn.append_basic_block("ipow_done")
    b.branch(loop)
    b.position_at_end(loop)
    acc, sq, n = b.phi(t), b.phi(t), b.phi(t)
    odd = b.icmp_unsigned("!=", b.and_(n, one), zero)
    acc2 = b.select(odd, b.mul(acc, sq), acc)
    sq2 = b.mul(sq, sq)
    n2 = b.lshr(n, one)  # logical: INT_MIN's magnitude is 2**31 as unsigned
    acc.add_incoming(one, before)
    sq.add_incoming(base, before)
    n.add_incoming(exp, before)
    acc.add_incoming(acc2, loop)
    sq.add_incoming(sq2, loop)
    n.add_incoming(n2, loop)
    b.cbranch(b.icmp_unsigned("!=", n2, zero), loop, done)
    b.position_at_end(done)
    result = b.phi(t)
    result.add_incoming(acc2, loop)
    return result


def _minmax(fname, pred):
    def emit(cg, b, dt, args):
        if dt.is_float:
            return _intrinsic(b, fname, args, llvm_type(dt))
        cmp = b.icmp_unsigned(pred, *args) if dt.kind == "u" else b.icmp_signed(pred, *args)
        return b.select(cmp, *args)

    return emit


def _compare(pred):
    def emit(cg, b, dt, args):
        odt = cg.operand_dtype
        if odt.is_float:
            c = b.fcmp_ordered(pred, *args) if pred != "!=" else b.fcmp_unordered(pred, *args)
        elif odt.kind == "u":
            c = b.icmp_unsigned(pred, *args)
        else:
            c = b.icmp_signed(pred, *args)
        return b.zext(c, I32)

    return emit


def truthy(b, value, dtype: DType):
    if dtype.is_float:
        return b.fcmp_unordered("!=", value, ir.Constant(value.type, 0.0))
    return b.icmp_unsigned("!=", value, ir.Constant(value.type, 0))


def _logical(kind):
    def emit(cg, b, dt, args):
        odt = cg.operand_dtype
        x = truthy(b, args[0], odt)
        if kind == "not":
            return b.zext(b.not_(x), I32)
        y = truthy(b, args[1], odt)
        return b.zext(b.and_(x, y) if kind == "and" else b.or_(x, y), I32)

    return emit


def _neg(cg, b, dt, args):
    return b.fneg(args[0], flags=_flags(cg)) if dt.is_float else b.neg(args[0])


def _abs(cg, b, dt, args):
    if dt.is_float:
        return _intrinsic(b, "llvm.fabs", args, llvm_type(dt))
    if dt.kind == "u":
        return args[0]
    neg = b.icmp_signed("<", args[0], ir.Constant(args[0].type, 0))
    return b.select(neg, b.neg(args[0]), args[0])


def _rounding(intr):
    def emit(cg, b, dt, args):
        if not dt.is_float:
            return args[0]
        t = llvm_type(dt)
        if intr == "round":  # C round(): halfway cases away from zero, like Taichi's kernels
            return _intrinsic(b, "llvm.round", args, t)
        return _intrinsic(b, intr, args, t)

    return emit


def _rsqrt(cg, b, dt, args):
    t = llvm_type(dt)
    return b.fdiv(ir.Constant(t, 1.0), _intrinsic(b, "llvm.sqrt", args, t), flags=_flags(cg))


def _shift_in_range(b, amount, dt):
    """0 <= amount < bits (negative amounts compare as huge): LLVM's shift is poison outside,
    which made writes vanish and indices point anywhere. Outside, simrun defines the result
    as the shift would leave it bit by bit: 0, or the sign in every bit for >> of signed."""
    return b.icmp_unsigned("<", amount, ir.Constant(amount.type, dt.bits))


def _shl(cg, b, dt, args):
    x, n = args
    return b.select(_shift_in_range(b, n, dt), b.shl(x, n), ir.Constant(x.type, 0))


def _shr(cg, b, dt, args):
    x, n = args
    ok = _shift_in_range(b, n, dt)
    if dt.kind == "u":
        return b.select(ok, b.lshr(x, n), ir.Constant(x.type, 0))
    return b.ashr(x, b.select(ok, n, ir.Constant(n.type, dt.bits - 1)))


def _select(cg, b, dt, args):
    c, x, y = args
    return b.select(truthy(b, c, cg.cond_dtype), x, y)


# x86's cvttss2si already gives a float->int conversion's rule (_float_to_int) in hardware
NATIVE_INT_MIN = platform.machine().lower() in ("x86_64", "amd64")


def cast(b, value, src: DType, dst: DType, native_int_min: bool = NATIVE_INT_MIN):
    """Convert between scalar types with C semantics (float->int truncates toward zero);
    ``native_int_min``: the target's own conversion gives _float_to_int's results (x86),
    so a plain fptosi does (the explicit form costs diffmpm's iteration 3%)."""
    if src == dst:
        return value
    t = llvm_type(dst)
    if src.is_float and dst.is_float:
        return b.fpext(value, t) if dst.bits > src.bits else b.fptrunc(value, t)
    if src.is_float:
        if dst.kind != "i":
            return b.fptoui(value, t)
        return b.fptosi(value, t) if native_int_min else _float_to_int(b, value, t)
    if dst.is_float:
        return b.sitofp(value, t) if src.kind == "i" else b.uitofp(value, t)
    sw, dw = value.type.width, t.width
    if dw == sw:
        return value
    if dw < sw:
        return b.trunc(value, t)
    return b.sext(value, t) if src.kind == "i" else b.zext(value, t)


def _float_to_int(b, x, t):
    """Truncation toward zero; NaN and values outside the target (at least 32 bits wide)
    give its minimum, then narrower targets wrap. That is x86's cvttss2si, which Taichi
    follows; LLVM leaves such an fptosi undefined, and NVPTX and ARM saturate instead, so it
    is spelled out: the same integers on every CPU and on the GPU."""
    if isinstance(x.type, ir.HalfType):
        x = b.fpext(x, ir.FloatType())
    wide = t if t.width >= 32 else ir.IntType(32)
    bound = float(2 ** (wide.width - 1))
    inside = b.and_(b.fcmp_ordered(">=", x, ir.Constant(x.type, -bound)),
                    b.fcmp_ordered("<", x, ir.Constant(x.type, bound)))
    v = b.select(inside, b.fptosi(x, wide), ir.Constant(wide, -(2 ** (wide.width - 1))))
    return v if wide is t else b.trunc(v, t)


# ops whose LLVM is code; the float functions are lowered from ir/ops.py (emit_op)
EMITTERS = {
    Op.NEG: _neg,
    Op.ABS: _abs,
    Op.RSQRT: _rsqrt,
    Op.FLOOR: _rounding("llvm.floor"),
    Op.CEIL: _rounding("llvm.ceil"),
    Op.ROUND: _rounding("round"),
    Op.LOGICAL_NOT: _logical("not"),
    Op.BIT_NOT: lambda cg, b, dt, a: b.not_(a[0]),
    Op.CAST: None,  # handled by cast() with the operand's type
    Op.ADD: _arith("fadd", "add"),
    Op.SUB: _arith("fsub", "sub"),
    Op.MUL: _arith("fmul", "mul"),
    Op.TRUEDIV: lambda cg, b, dt, a: (b.fdiv(*a, flags=_flags(cg)) if dt.is_float
                                      else _int_div(cg, b, dt, a)),
    Op.FLOORDIV: _floordiv,
    Op.MOD: _mod,
    Op.POW: _pow,
    Op.MIN: _minmax("llvm.minnum", "<"),
    Op.MAX: _minmax("llvm.maxnum", ">"),
    Op.LT: _compare("<"),
    Op.LE: _compare("<="),
    Op.GT: _compare(">"),
    Op.GE: _compare(">="),
    Op.EQ: _compare("=="),
    Op.NE: _compare("!="),
    Op.LOGICAL_AND: _logical("and"),
    Op.LOGICAL_OR: _logical("or"),
    Op.BIT_AND: lambda cg, b, dt, a: b.and_(*a),
    Op.BIT_OR: lambda cg, b, dt, a: b.or_(*a),
    Op.BIT_XOR: lambda cg, b, dt, a: b.xor(*a),
    Op.SHL: _shl,
    Op.SHR: _shr,
    Op.SELECT: _select,
}
