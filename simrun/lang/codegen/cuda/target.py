"""LLVM IR of NVPTX kernels -> PTX text: libdevice linked in, O3, NVPTX's assembly printer.

libdevice (NVIDIA's math library as LLVM bitcode) comes from the `nvidia-nvvm` wheel, or a
CUDA toolkit's nvvm/libdevice; only the functions a kernel calls stay in its PTX (the rest
are made internal and dropped). No CUDA toolkit is needed to make PTX.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

TRIPLE = "nvptx64-nvidia-cuda"


class CudaToolError(RuntimeError):
    """A piece the CUDA target needs (libdevice, ptxas) is not installed."""


def _nvidia_dirs() -> list[Path]:
    """Where NVIDIA's wheels put their files (the `nvidia` namespace package)."""
    try:
        import nvidia  # optional dependency: NVIDIA's wheels (pip install simrun[cuda])
    except ImportError:
        return []
    return [Path(p) for p in getattr(nvidia, "__path__", [])]


def find_nvidia_file(pattern: str) -> Path | None:
    """The first file matching pattern: a glob below the wheels' folders, CUDA_HOME, the
    toolkit of the nvcc on PATH, or /usr/local/cuda."""
    roots = _nvidia_dirs()
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        roots.append(Path(home))
    nvcc = shutil.which("nvcc")  # a CUDA toolkit on PATH, or in its usual place
    roots += [Path(nvcc).resolve().parents[1]] if nvcc else []
    roots.append(Path("/usr/local/cuda"))
    for root in roots:
        for path in sorted(root.glob(pattern)):
            return path
    return None


@functools.cache
def libdevice_path() -> Path | None:
    """libdevice.10.bc from the `nvidia-nvvm` wheel or CUDA_HOME; None where neither has it."""
    return find_nvidia_file("**/libdevice/libdevice.10.bc")


def libdevice_identity() -> str:
    """What PTX made with libdevice depends on, without reading it: path, size and mtime
    (a cache key part; "none" where libdevice is not installed)."""
    path = libdevice_path()
    if path is None:
        return "none"
    st = path.stat()
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}"


@functools.cache
def libdevice_bitcode() -> bytes:
    path = libdevice_path()
    if path is None:
        raise CudaToolError(
            "libdevice.10.bc (NVIDIA's math library for GPUs) was not found: install the "
            "`nvidia-nvvm` wheel (pip install 'simrun[cuda]') or set CUDA_HOME to a CUDA "
            "toolkit")
    return path.read_bytes()


@functools.cache
def _llvm():
    import llvmlite.binding as llvm  # start-up: LLVM's library loads on first use

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@functools.cache
def target_machine(sm: int):
    llvm = _llvm()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=f"sm_{sm}", opt=3)


def ptx_of(module_text: str, kernels: list[str], sm: int) -> str:
    """PTX for compute capability sm (80: A100, 90: H100/H200) of an LLVM module whose entry
    points are `kernels`; every other function it defines, or links in, becomes internal."""
    llvm = _llvm()
    tm = target_machine(sm)
    mod = llvm.parse_assembly(module_text)
    mod.triple = TRIPLE
    mod.data_layout = str(tm.target_data)
    if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
        lib = llvm.parse_bitcode(libdevice_bitcode())
        lib.triple, lib.data_layout = TRIPLE, mod.data_layout
        mod.link_in(lib)
    keep = set(kernels)
    for f in mod.functions:
        if not f.is_declaration and f.name not in keep:
            f.linkage = llvm.Linkage.internal
    for g in mod.global_variables:
        if not g.is_declaration:
            g.linkage = llvm.Linkage.internal
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    dce = llvm.create_new_module_pass_manager()
    dce.add_global_dead_code_eliminate_pass()  # libdevice's unused functions, before O3
    dce.run(mod, pb)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


def find_ptxas() -> Path | None:
    """ptxas from the `nvidia-cuda-nvcc` wheel, CUDA_HOME, or PATH."""
    found = find_nvidia_file("**/bin/ptxas")
    if found is None and shutil.which("ptxas"):
        found = Path(shutil.which("ptxas"))
    return found


def assemble(ptx: str, sm: int) -> bytes:
    """ptxas's cubin for sm_<sm>; CudaToolError with ptxas's message if it rejects the PTX."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise CudaToolError("ptxas was not found: install the `nvidia-cuda-nvcc` wheel")
    with tempfile.TemporaryDirectory(prefix="simrun-ptx-") as tmp:
        src, out = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        done = subprocess.run([str(ptxas), f"-arch=sm_{sm}", str(src), "-o", str(out)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CudaToolError(f"ptxas -arch=sm_{sm} rejected the PTX:\n{done.stderr}")
        return out.read_bytes()
