"""The C math functions generated CPU code may call, from the op registry (ir/ops.py).

LLVM lowers intrinsics like llvm.sin.f32 to calls to sinf; the JIT registers every name here
(with and without the `f` suffix of the float version) before it links compiled code.
"""

from __future__ import annotations

from ..ir.ops import OPS


def libm_symbols() -> list[str]:
    """Every C function an op's CPU code may call, float (`sinf`) and double (`sin`)."""
    names = sorted({name for info in OPS.values() for name in info.libm})
    return [n + suffix for n in names for suffix in ("f", "")]
