"""Host-CPU target machine, O3 with vectorisation (new pass manager), JIT, on-disk object cache.

LLVM (llvmlite.binding) is loaded only to compile: cached objects are mapped by objload,
and the host CPU's name and features that cache keys include are kept in the cache directory
next to the objects, per /proc/cpuinfo identity. LLVM's optimiser runs in a forked child
where the OS can fork, so that an LLVM assertion cannot abort the process (compile_child.py).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import llvmlite

from ..codegen.libm import libm_symbols
from ..errors import InternalCompilerError
from ..settings import Settings
from . import objload
from .compile_child import compile_in_child

ENGINE_VERSION = "simrun-jit-3"
_state: dict = {}     # LLVM: target machine and MCJIT engine, made on first use
_host: dict = {}      # cpu, features
_loaded: set = set()  # cache keys whose objects are in this process
_symbols: dict = {}   # function name -> address, for objects objload mapped

_LIBC = ["realloc", "calloc", "free", "printf", "fflush", "memset", "memcpy", "syscall", "sched_yield"]


def _init():
    if _state:
        return _state
    import llvmlite.binding as llvm  # start-up: LLVM's library loads on first use

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for name in libm_symbols() + _LIBC:
        try:
            llvm.add_symbol(name, objload.resolve_c(name))
        except objload.LoadError:
            pass
    target = llvm.Target.from_default_triple()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    tm = target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="static",
                                      codemodel="jitdefault")
    empty = llvm.parse_assembly("")
    empty.triple = llvm.get_process_triple()
    engine = llvm.create_mcjit_compiler(empty, tm)
    _state.update(llvm=llvm, tm=tm, engine=engine, cpu=cpu, features=features)
    return _state


def host_cpu(cache_dir: Path | None) -> tuple[str, str]:
    """LLVM's name and feature string for this CPU, without loading LLVM when a previous
    process on the same CPU wrote them down (in cache_dir)."""
    if _host:
        return _host["cpu"], _host["features"]
    ident = _cpu_identity()
    path = cache_dir / f"host-{ident}.txt" if ident and cache_dir is not None else None
    try:
        cpu, features = path.read_text().split("\n", 1) if path else ("", "")
    except (OSError, ValueError):
        cpu = features = ""
    if not cpu or not features:
        st = _init()
        cpu, features = st["cpu"], st["features"]
        if path is not None:
            write_atomic(path, f"{cpu}\n{features}".encode())
    _host.update(cpu=cpu, features=features)
    return cpu, features


def _cpu_identity() -> str | None:
    """A hash of what decides LLVM's view of the CPU (vendor, family, model, flags) and of the
    llvmlite version; None where /proc/cpuinfo is not there to read."""
    try:
        with open("/proc/cpuinfo") as fh:
            first = fh.read().split("\n\n", 1)[0]
    except OSError:
        return None
    keep = [line for line in first.splitlines() if line.split(":")[0].strip() in
            ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")]
    if not keep:
        return None
    h = hashlib.sha256("\n".join(keep + [llvmlite.__version__]).encode())
    return h.hexdigest()[:16]


def write_atomic(path: Path, data: bytes) -> None:
    """Write a cache file so that a concurrent reader sees all of it or none; a cache that
    cannot be written is not an error."""
    import tempfile  # start-up: a warm start writes nothing

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


def files_fingerprint(paths) -> str:
    """A hash of these source files' bytes: a cache key that any edit to them changes."""
    h = hashlib.sha256()
    for path in paths:
        h.update(Path(path).read_bytes())
    return h.hexdigest()


@functools.cache
def codegen_fingerprint() -> str:
    """Any change to the code generator invalidates cached objects, with no version to bump:
    codegen/, the IR it reads (ops, access and reduction analyses), the compiler driver, and
    the runtime modules that shape or load objects (this JIT, the pool, the ELF loader).
    The CUDA target adds its own files (compiler_cuda.ptx_fingerprint)."""
    lang = Path(__file__).parent.parent
    runtime, ir = lang / "runtime", lang / "ir"
    return files_fingerprint(sorted((lang / "codegen").glob("*.py")) + [
        lang / "compiler.py", ir / "ops.py", ir / "access.py", ir / "reductions.py",
        runtime / "jit.py", runtime / "objload.py", runtime / "pool.py",
        runtime / "pool_state.py"])


def cache_key(text: str, settings: Settings) -> str:
    cpu, features = host_cpu(settings.cache_dir)
    h = hashlib.sha256()
    for part in (ENGINE_VERSION, codegen_fingerprint(), llvmlite.__version__, cpu, features,
                 text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _optimize(mod, tm=None, slp: bool = True, loop_vectorize: bool = True) -> None:
    """O3 on ``mod`` for the target machine ``tm`` (this CPU's by default)."""
    st = _init()
    llvm, tm = st["llvm"], tm or st["tm"]
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = loop_vectorize
    pto.slp_vectorization = slp
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def object_code(module_text: str, kernel: str = "?", slp: bool = True,
                cpu: str | None = None, print_llvm: bool = False) -> bytes:
    """A module's object code after O3, for this CPU, or for the named one (``cpu``, an LLVM
    name such as skylake-avx512: tests compile for CPUs they do not run on, since LLVM's
    cost models, and its assertions, differ by target). An invalid module is an
    InternalCompilerError naming the kernel, never a crash inside the optimiser, and an LLVM
    that aborts takes only the compiling child with it (compile_child.py)."""
    _init()  # the child inherits LLVM initialised
    if hasattr(os, "fork"):
        return compile_in_child(_object_code, module_text, kernel, slp, cpu, print_llvm)
    return _object_code(module_text, kernel, slp, cpu, print_llvm)


def _object_code(module_text: str, kernel: str, slp: bool, cpu: str | None,
                 print_llvm: bool, loop_vectorize: bool = True) -> bytes:
    st = _init()
    llvm = st["llvm"]
    tm = st["tm"] if cpu is None else llvm.Target.from_default_triple().create_target_machine(
        cpu=cpu, features="", opt=3, reloc="static", codemodel="jitdefault")
    try:
        mod = llvm.parse_assembly(module_text)
        mod.triple = llvm.get_process_triple()
        mod.data_layout = str(tm.target_data)
        mod.verify()
    except RuntimeError as err:
        detail = "\n".join(str(err).strip().splitlines()[:6])
        raise InternalCompilerError(
            f"simrun's code generator wrote an invalid LLVM module for kernel '{kernel}' (a "
            f"bug in simrun; SIMRUN_PRINT_IR=1 prints the kernel's IR for a report):\n"
            f"{detail}") from None
    _optimize(mod, tm, slp, loop_vectorize)
    if print_llvm:
        print(str(mod))
    return tm.emit_object(mod)


def load_cached(key: str, settings: Settings, use_disk: bool = True) -> bool:
    if key in _loaded:
        return True
    d = settings.cache_dir if use_disk else None
    path = d / f"{key}.o" if d else None
    if path is None or not path.exists():
        return False
    try:
        _load_object(path.read_bytes(), settings.mcjit)
    except Exception:  # a corrupt cache entry is recompiled, never fatal
        return False
    _loaded.add(key)
    return True


def _load_object(obj: bytes, mcjit: bool) -> None:
    """Make an object's functions callable: objload where it handles the object, else MCJIT."""
    if objload.supported() and not mcjit:
        try:
            _symbols.update(objload.load(obj))
            return
        except objload.LoadError:
            pass
    st = _init()
    st["engine"].add_object_file(st["llvm"].ObjectFileRef.from_data(obj))
    st["engine"].finalize_object()


def compile_module(key: str, module_text: str, settings: Settings, kernel: str = "?",
                   slp: bool = True) -> None:
    """Verify, optimise and JIT an LLVM module (object_code); store its object code for the
    next process."""
    obj = object_code(module_text, kernel, slp, print_llvm=settings.print_llvm)
    _load_object(obj, settings.mcjit)
    _loaded.add(key)
    d = settings.cache_dir
    if d is not None:
        write_atomic(d / f"{key}.o", obj)


def function_address(name: str) -> int:
    addr = _symbols.get(name) or _init()["engine"].get_function_address(name)
    if not addr:
        raise RuntimeError(f"JIT: function {name} not found")
    return addr
