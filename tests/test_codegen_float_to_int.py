"""llvm_ops.cast's spelled-out float->int conversion (the GPU's: PTX's cvt saturates, and on
x86 the hardware's cvttss2si gives this rule itself): truncation toward zero, NaN and values
outside a target of at least 32 bits give its minimum, narrower targets wrap. Run here as
native code through llvmlite, against the rule written in Python."""

from __future__ import annotations

import ctypes
import math

import llvmlite.binding as llvm
import pytest
from llvmlite import ir

from simrun.lang.codegen import llvm_ops
from simrun.lang.types import f32, f64, i8, i16, i32, i64

VALUES = [0.0, -0.0, 2.7, -2.7, 127.9, 300.7, -300.7, 65535.5, 2147483647.0, 2147483648.0,
          -2147483648.0, -2147483649.5, 3e9, -3e9, 9.3e18, 1e19, -1e19, math.inf, -math.inf,
          math.nan]


def rule(x: float, bits: int) -> int:
    """The conversion, in Python: at least 32 bits wide first, then wrapped to ``bits``."""
    wide = max(bits, 32)
    low = -(2 ** (wide - 1))
    v = math.trunc(x) if math.isfinite(x) and low <= x < -low else low
    return (v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


@pytest.fixture
def machine():
    """A fresh target machine: the MCJIT engine made from it owns it."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.Target.from_default_triple().create_target_machine()


@pytest.mark.parametrize("src", [f32, f64])
@pytest.mark.parametrize("dst", [i8, i16, i32, i64])
def test_spelled_out_conversion_follows_the_rule(machine, src, dst):
    module = ir.Module("cast")
    module.triple = llvm.get_process_triple()
    fty = ir.FloatType() if src is f32 else ir.DoubleType()
    fn = ir.Function(module, ir.FunctionType(ir.IntType(64), [fty]), "convert")
    b = ir.IRBuilder(fn.append_basic_block())
    v = llvm_ops.cast(b, fn.args[0], src, dst, native_int_min=False)
    b.ret(b.sext(v, ir.IntType(64)) if dst.bits < 64 else v)
    mod = llvm.parse_assembly(str(module))
    engine = llvm.create_mcjit_compiler(mod, machine)
    engine.finalize_object()
    ctype = ctypes.c_float if src is f32 else ctypes.c_double
    convert = ctypes.CFUNCTYPE(ctypes.c_int64, ctype)(engine.get_function_address("convert"))
    for x in VALUES:
        x = float(ctype(x).value)  # the value the source type holds
        assert convert(x) == rule(x, dst.bits), (x, src, dst)
