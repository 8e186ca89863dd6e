"""The CUDA pipeline: kernel IR -> NVPTX LLVM (codegen/cuda) -> PTX -> a CudaKernel.

PTX, not a cubin: the driver assembles it for the GPU at hand (sm_80 PTX runs on sm_90),
so nothing from the CUDA toolkit is needed at run time beyond the driver.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import llvmlite

from . import cuda_fixed_point as fixed_point
from . import pipeline
from .codegen.cuda.order import races_on_device
from .codegen.cuda.target import libdevice_identity, ptx_of
from .codegen.layout import Layout, build_layout
from .compiler import build_module, kernel_text
from .ir.nodes import AssertStmt, walk
from .runtime import cuda, jit


@dataclass
class PtxModule:
    """PTX text, its kernels' entry names in task order, and the context layout they share."""

    text: str
    kernels: list
    layout: Layout


def cuda_sources() -> list[Path]:
    """The files that write PTX beyond the CPU's code generator: every file of codegen/cuda
    and this driver."""
    here = Path(__file__).parent
    return sorted((here / "codegen" / "cuda").glob("*.py")) + [Path(__file__)]


@functools.cache
def ptx_fingerprint() -> str:
    return jit.files_fingerprint(cuda_sources())


def ptx_cache_key(text: str, sm: int, debug: bool, fast_math: bool) -> str:
    """A PTX module's cache key: the kernel's printed IR and options, and everything that
    turns it into PTX (the engine version, the CPU's and the CUDA target's code generator
    files, llvmlite, and which libdevice is linked in), so an edit to any of them misses."""
    h = hashlib.sha256()
    for part in (jit.ENGINE_VERSION, jit.codegen_fingerprint(), ptx_fingerprint(),
                 llvmlite.__version__, libdevice_identity(),
                 f"sm={sm} debug={debug} fast_math={fast_math}", text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def kernel_ptx(kir, sm: int = 90, debug: bool = False, fast_math: bool = True,
               cache_dir: Path | None = None) -> PtxModule:
    """PTX of a KernelIR that has been through the pass pipeline; with cache_dir, PTX made
    before for the same key (ptx_cache_key) is read from there, and neither the LLVM
    module nor the NVPTX back end with libdevice (~0.5 s) runs. In debug mode, or with an
    assert (the fixed-point sums have one), the module is still built on a hit: building
    it lists the error sites that a failure's message names."""
    from .codegen.cuda.emit import CudaTaskEmitter  # start-up: llvmlite.ir only when compiling

    layout = build_layout(kir)
    key = ptx_cache_key(kernel_text(kir, layout, debug), sm, debug, fast_math)
    path = cache_dir / f"{key}.ptx" if cache_dir is not None else None
    ptx = _read_cached(path)
    asserts = any(isinstance(s, AssertStmt) for task in kir.tasks for s in walk(task.body))
    if ptx is not None and not debug and not asserts:
        return PtxModule(ptx, re.findall(r"\.entry (\w+)", ptx), layout)
    text, names = build_module(kir, layout, f"sm{sm}", debug, fast_math, CudaTaskEmitter)
    if ptx is None:
        ptx = ptx_of(text, names, sm)
        if path is not None:
            jit.write_atomic(path, ptx.encode())
    return PtxModule(ptx, names, layout)


def _read_cached(path: Path | None) -> str | None:
    """A cached PTX module's text; None where there is none (or it cannot be read)."""
    if path is None:
        return None
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def with_fixed_point(kir):
    """A copy of kir with the fixed-point tasks of its racing scatters appended
    (lang/cuda_fixed_point.py), and {task: its fixed-point tasks}; the deterministic mode
    launches those instead of the task on one thread."""
    kir = dataclasses.replace(kir, tasks=list(kir.tasks))
    plans = fixed_point.extend(kir, build_layout(kir).var_slot)
    if plans:
        for check in pipeline.checks:
            check(kir, "fixed_point")
    return kir, plans


def compile_cuda_kernel(kir, runtime, config) -> cuda.CudaKernel:
    """A kernel variant for the process's GPU (runtime/cuda.py)."""
    dev = cuda.device()
    original = len(kir.tasks)
    kir, plans = with_fixed_point(kir)
    ptx = kernel_ptx(kir, min(dev.sm, 90), config.debug, config.fast_math,
                     runtime.settings.cache_dir if config.offline_cache else None)
    slots = [(ptx.layout.var_slot[v], v.dtype) for v in kir.arg_vars]
    serial = [task.kind != "range" for task in kir.tasks]
    compiled = cuda.CudaKernel(kir.name, ptx.layout, ptx.text, ptx.kernels, serial, slots,
                               kir.ret_types, runtime, dev)
    compiled.tasks_run = original
    compiled.fixed_point = plans
    compiled.order_sensitive = frozenset(k for k, task in enumerate(kir.tasks)
                                         if races_on_device(task, ptx.layout.var_slot))
    compiled.may_fail = config.debug or any(isinstance(s, AssertStmt) for task in kir.tasks
                                            for s in walk(task.body))
    return compiled
