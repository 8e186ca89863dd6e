"""The C math functions each op's generated code may call, keyed by Op.

LLVM lowers intrinsics like llvm.sin.f32 to calls to sinf; the JIT registers every name here
(with and without the `f` suffix of the float version) before it links compiled code. Every
op has an entry, an empty one where its code calls nothing (tests/test_ops_tables.py).
"""

from __future__ import annotations

from ..ir.ops import Op

LIBM_CALLS: dict[Op, tuple[str, ...]] = {op: () for op in Op} | {
    Op.SIN: ("sin",), Op.COS: ("cos",), Op.TAN: ("tan",), Op.ASIN: ("asin",),
    Op.ACOS: ("acos",), Op.ATAN: ("atan",), Op.TANH: ("tanh",), Op.EXP: ("exp",),
    Op.LOG: ("log",), Op.POW: ("pow",), Op.ATAN2: ("atan2",), Op.FLOOR: ("floor",),
    Op.CEIL: ("ceil",), Op.SQRT: ("sqrt",), Op.RSQRT: ("sqrt",), Op.FLOORDIV: ("floor",),
    Op.MOD: ("floor", "fmod"),
}


def libm_symbols() -> list[str]:
    """Every C symbol in LIBM_CALLS, float (`sinf`) and double (`sin`) versions."""
    names = sorted({name for calls in LIBM_CALLS.values() for name in calls})
    return [n + suffix for n in names for suffix in ("f", "")]
