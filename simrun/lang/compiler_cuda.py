"""The CUDA pipeline: kernel IR -> NVPTX LLVM (codegen/cuda) -> PTX -> a CudaKernel.

PTX, not a cubin: the driver assembles it for the GPU at hand (sm_80 PTX runs on sm_90),
so nothing from the CUDA toolkit is needed at run time beyond the driver.
"""

from __future__ import annotations

from dataclasses import dataclass

from .codegen.cuda.target import ptx_of
from .codegen.layout import Layout, build_layout
from .compiler import build_module
from .runtime import cuda


@dataclass
class PtxModule:
    """PTX text, its kernels' entry names in task order, and the context layout they share."""

    text: str
    kernels: list
    layout: Layout


def kernel_ptx(kir, sm: int = 90, debug: bool = False, fast_math: bool = True) -> PtxModule:
    """PTX of a KernelIR that has been through the pass pipeline."""
    from .codegen.cuda.emit import CudaTaskEmitter  # llvmlite.ir only when compiling

    layout = build_layout(kir)
    text, names = build_module(kir, layout, f"sm{sm}", debug, fast_math, CudaTaskEmitter)
    return PtxModule(ptx_of(text, names, sm), names, layout)


def compile_cuda_kernel(kir, runtime, config) -> cuda.CudaKernel:
    """A kernel variant for the process's GPU (runtime/cuda.py)."""
    dev = cuda.device()
    ptx = kernel_ptx(kir, min(dev.sm, 90), config.debug, config.fast_math)
    slots = [(ptx.layout.var_slot[v], v.dtype) for v in kir.arg_vars]
    serial = [task.kind != "range" for task in kir.tasks]
    return cuda.CudaKernel(kir.name, ptx.layout, ptx.text, ptx.kernels, serial, slots,
                           kir.ret_types, runtime, dev)
