"""Host-CPU target machine, O3 with vectorisation (new pass manager), JIT, on-disk object cache."""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import tempfile
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

ENGINE_VERSION = "simrun-jit-3"
_state: dict = {}

_LIBM = ["sinf", "cosf", "tanf", "asinf", "acosf", "atanf", "tanhf", "expf", "logf", "powf",
         "atan2f", "sin", "cos", "tan", "asin", "acos", "atan", "tanh", "exp", "log", "pow",
         "atan2", "floorf", "floor", "ceilf", "ceil", "sqrtf", "sqrt", "fmodf", "fmod"]
_LIBC = ["realloc", "calloc", "free", "printf", "fflush", "memset", "memcpy"]


def _init():
    if _state:
        return _state
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    libc = ctypes.CDLL(None)
    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    for lib, names in ((libm, _LIBM), (libc, _LIBC)):
        for name in names:
            try:
                llvm.add_symbol(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
            except AttributeError:
                pass
    target = llvm.Target.from_default_triple()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    tm = target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="static",
                                      codemodel="jitdefault")
    empty = llvm.parse_assembly("")
    empty.triple = llvm.get_process_triple()
    engine = llvm.create_mcjit_compiler(empty, tm)
    _state.update(tm=tm, engine=engine, cpu=cpu, features=features, loaded=set())
    return _state


def cache_dir() -> Path | None:
    if os.environ.get("SIMRUN_NO_DISK_CACHE"):
        return None
    base = os.environ.get("SIMRUN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "simrun")
    return Path(base) / "kernels"


def _codegen_fingerprint() -> str:
    """Any change to the code generator invalidates cached objects, with no version to bump."""
    if "fingerprint" not in _state:
        h = hashlib.sha256()
        here = Path(__file__).parent
        for path in sorted(here.glob("*.py")) + [here.parent / "compiler.py",
                                                  here.parent / "ir" / "ops.py"]:
            h.update(path.read_bytes())
        _state["fingerprint"] = h.hexdigest()
    return _state["fingerprint"]


def cache_key(text: str) -> str:
    st = _init()
    h = hashlib.sha256()
    for part in (ENGINE_VERSION, _codegen_fingerprint(), llvmlite.__version__, st["cpu"],
                 st["features"], text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _optimize(mod) -> None:
    st = _init()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(st["tm"], pto)
    pb.getModulePassManager().run(mod, pb)


def load_cached(key: str, use_disk: bool = True) -> bool:
    st = _init()
    if key in st["loaded"]:
        return True
    d = cache_dir() if use_disk else None
    path = d / f"{key}.o" if d else None
    if path is None or not path.exists():
        return False
    try:
        st["engine"].add_object_file(llvm.ObjectFileRef.from_data(path.read_bytes()))
        st["engine"].finalize_object()
    except Exception:  # a corrupt cache entry is recompiled, never fatal
        return False
    st["loaded"].add(key)
    return True


def compile_module(key: str, module_text: str) -> None:
    """Verify, optimise and JIT an LLVM module; store its object code for the next process."""
    st = _init()
    mod = llvm.parse_assembly(module_text)
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(st["tm"].target_data)
    mod.verify()
    _optimize(mod)
    if os.environ.get("SIMRUN_PRINT_LLVM"):
        print(str(mod))
    obj = st["tm"].emit_object(mod)
    st["engine"].add_object_file(llvm.ObjectFileRef.from_data(obj))
    st["engine"].finalize_object()
    st["loaded"].add(key)
    d = cache_dir()
    if d is not None:
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                fh.write(obj)
            os.replace(tmp, d / f"{key}.o")
        except OSError:
            pass


def function_address(name: str) -> int:
    addr = _init()["engine"].get_function_address(name)
    if not addr:
        raise RuntimeError(f"JIT: function {name} not found")
    return addr
