"""A kernel's PTX, for NVIDIA GPUs: `python -m simrun.lang.ptx MODULE.py:KERNEL [--grad] --sm 90`.

The kernel's IR after the pass pipeline (its reverse kernel with --grad, its forward-mode
kernel with --fwd) is lowered by codegen/cuda to one PTX module, one `.entry` per task. Needs
no GPU and no CUDA toolkit: CI checks the PTX with ptxas (tests/test_cuda_ptx.py) and people
debugging codegen read it.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from . import pipeline
from .api import Kernel, init
from .codegen.cuda.target import CudaToolError
from .compiler_cuda import kernel_ptx
from .errors import SimrunError


def lower_kernel(kernel, args: tuple = (), mode: str = "primal"):
    """A Kernel's IR for these arguments after the pass pipeline of `mode` (primal, reverse,
    fwd, fwd_reverse), without compiling it for the CPU."""
    kir, _ = kernel.lower(args)
    return pipeline.run(kir, mode, kernel.name)


def _load_kernel(spec: str) -> tuple[Kernel, object]:
    """The kernel `name` of the Python file `path` (spec "path:name") and its module."""
    path, _, name = spec.rpartition(":")
    if not path.endswith(".py") or not name:
        raise SystemExit(f"error: expected MODULE.py:KERNEL, got {spec!r}")
    init(arch="cpu")
    loader = importlib.util.spec_from_file_location(Path(path).stem, path)
    if loader is None or not Path(path).is_file():
        raise SystemExit(f"error: {path}: no such Python file")
    module = importlib.util.module_from_spec(loader)
    sys.modules[loader.name] = module
    loader.loader.exec_module(module)
    kernel = getattr(module, name, None)
    if not isinstance(kernel, Kernel):
        raise SystemExit(f"error: {path} has no @ti.kernel named {name!r}")
    return kernel, module


def _arguments(kernel: Kernel, module) -> tuple:
    """Arguments to lower the kernel with: scalars and vectors need none (0 stands in), a
    template or ndarray parameter is the module's global of the same name."""
    args = []
    for p in kernel.params()[0]:
        if p.kind in ("scalar", "matrix"):
            args.append(0)
        elif hasattr(module, p.name):
            args.append(getattr(module, p.name))
        else:
            raise SystemExit(f"error: kernel {kernel.name!r} takes {p.kind} argument "
                             f"{p.name!r}: its PTX depends on the value. Give the module a "
                             f"global named {p.name!r} (the field to compile for)")
    return tuple(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simrun.lang.ptx", description=__doc__.split(
        "\n")[0])
    parser.add_argument("kernel", help="MODULE.py:KERNEL (template and ndarray parameters "
                        "are the module's globals of the same names)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--grad", action="store_const", dest="mode", const="reverse",
                      help="the reverse-mode (gradient) kernel")
    mode.add_argument("--fwd", action="store_const", dest="mode", const="fwd",
                      help="the forward-mode kernel")
    parser.add_argument("--sm", type=int, default=90, help="compute capability (80, 90)")
    ns = parser.parse_args(argv)
    kernel, module = _load_kernel(ns.kernel)
    try:
        kir = lower_kernel(kernel, _arguments(kernel, module), ns.mode or "primal")
        ptx = kernel_ptx(kir, ns.sm)
    except (SimrunError, CudaToolError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(ptx.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
