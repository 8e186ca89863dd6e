"""The native pool's LLVM module (runtime/pool.py): its text is golden (a change to the
hand-off protocol shows up in review as a diff), and it compiles to an object that objload
maps without MCJIT (no unwind tables, only 64-bit absolute relocations)."""

import llvmlite
import pytest
from golden_ir import check_golden

from simrun.lang.runtime import jit, objload, pool, pool_state

GOLDEN_LLVMLITE = "0.50.0"  # another llvmlite may print the same module differently


@pytest.mark.skipif(llvmlite.__version__ != GOLDEN_LLVMLITE,
                    reason=f"golden text printed by llvmlite {GOLDEN_LLVMLITE}")
def test_pool_module_is_golden():
    check_golden("native_pool", pool.build_module())


@pytest.mark.skipif(not objload.supported(), reason="objload maps x86-64 Linux objects")
def test_pool_object_maps_without_llvm_jit():
    st = jit._init()
    llvm = st["llvm"]
    mod = llvm.parse_assembly(pool.build_module())
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(st["tm"].target_data)
    mod.verify()
    jit._optimize(mod)
    symbols = objload.load(st["tm"].emit_object(mod))
    assert {pool_state.WORKER_FN, pool_state.RUN_FN, pool_state.STOP_FN} <= set(symbols)
