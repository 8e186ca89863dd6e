"""The CUDA pipeline: kernel IR -> NVPTX LLVM (codegen/cuda) -> PTX -> a CudaKernel.

PTX, not a cubin: the driver assembles it for the GPU at hand (sm_80 PTX runs on sm_90),
so nothing from the CUDA toolkit is needed at run time beyond the driver.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import llvmlite

from .codegen.cuda.target import ptx_of
from .codegen.layout import Layout, build_layout
from .compiler import build_module
from .runtime import cuda
from .runtime.jit import write_atomic


@dataclass
class PtxModule:
    """PTX text, its kernels' entry names in task order, and the context layout they share."""

    text: str
    kernels: list
    layout: Layout


def kernel_ptx(kir, sm: int = 90, debug: bool = False, fast_math: bool = True,
               cache_dir: Path | None = None) -> PtxModule:
    """PTX of a KernelIR that has been through the pass pipeline; with cache_dir, PTX made
    before from the same LLVM module (the NVPTX back end with libdevice takes ~0.5 s) is read
    from there."""
    from .codegen.cuda.emit import CudaTaskEmitter  # llvmlite.ir only when compiling

    layout = build_layout(kir)
    text, names = build_module(kir, layout, f"sm{sm}", debug, fast_math, CudaTaskEmitter)
    key = hashlib.sha256(f"{llvmlite.__version__}\0{sm}\0{text}".encode()).hexdigest()[:24]
    path = cache_dir / f"{key}.ptx" if cache_dir is not None else None
    if path is not None and path.exists():
        return PtxModule(path.read_text(), names, layout)
    ptx = ptx_of(text, names, sm)
    if path is not None:
        write_atomic(path, ptx.encode())
    return PtxModule(ptx, names, layout)


def compile_cuda_kernel(kir, runtime, config) -> cuda.CudaKernel:
    """A kernel variant for the process's GPU (runtime/cuda.py)."""
    dev = cuda.device()
    ptx = kernel_ptx(kir, min(dev.sm, 90), config.debug, config.fast_math,
                     runtime.settings.cache_dir if config.offline_cache else None)
    slots = [(ptx.layout.var_slot[v], v.dtype) for v in kir.arg_vars]
    serial = [task.kind != "range" for task in kir.tasks]
    return cuda.CudaKernel(kir.name, ptx.layout, ptx.text, ptx.kernels, serial, slots,
                           kir.ret_types, runtime, dev)
