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
from .compiler_cuda import kernel_ptx


def lower_kernel(kernel, args: tuple = (), mode: str = "primal"):
    """A Kernel's IR for these arguments after the pass pipeline of `mode` (primal, reverse,
    fwd, fwd_reverse), without compiling it for the CPU."""
    kir, _ = kernel.lower(args)
    return pipeline.run(kir, mode, kernel.name)


def _load_kernel(spec: str) -> Kernel:
    """The kernel `name` of the Python file `path` (spec "path:name"), its module run."""
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
    return kernel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simrun.lang.ptx", description=__doc__.split(
        "\n")[0])
    parser.add_argument("kernel", help="MODULE.py:KERNEL (a kernel without arguments, or "
                        "with template arguments bound to the module's fields)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--grad", action="store_const", dest="mode", const="reverse",
                      help="the reverse-mode (gradient) kernel")
    mode.add_argument("--fwd", action="store_const", dest="mode", const="fwd",
                      help="the forward-mode kernel")
    parser.add_argument("--sm", type=int, default=90, help="compute capability (80, 90)")
    ns = parser.parse_args(argv)
    kernel = _load_kernel(ns.kernel)
    kir = lower_kernel(kernel, (), ns.mode or "primal")
    sys.stdout.write(kernel_ptx(kir, ns.sm).text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
