"""A kernel's PTX, for NVIDIA GPUs: `python -m simrun.lang.ptx MODULE.py:KERNEL [--grad] --sm 90`.

A template (field) or ndarray parameter is compiled for a value, since the PTX depends on
its type and shape: `--arg NAME=EXPR` (EXPR in Python, with `ti` and the module's globals:
`--arg 'x=ti.Vector.field(2, ti.f32, shape=8)'`), else the module's global of that name.

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

import numpy as np

from .. import lang as ti
from . import pipeline, types
from .api import Kernel, init
from .codegen.cuda.target import CudaToolError
from .compiler_cuda import kernel_ptx
from .errors import SimrunError


def lower_kernel(kernel, args: tuple = (), mode: str = "primal"):
    """A Kernel's IR for these arguments after the pass pipeline of `mode` (primal, reverse,
    fwd, fwd_reverse), without compiling it for the CPU."""
    kir, _ = kernel.lower(args)
    return pipeline.run(kir, mode, kernel.name)


def _load_kernel(spec: str, fp: str = "f32") -> tuple[Kernel, object]:
    """The kernel `name` of the Python file `path` (spec "path:name") and its module."""
    path, _, name = spec.rpartition(":")
    if not path.endswith(".py") or not name:
        raise SystemExit(f"error: expected MODULE.py:KERNEL, got {spec!r}")
    init(arch="cpu", default_fp=getattr(types, fp))
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


def _value(kernel: Kernel, module, text: str) -> tuple[str, object]:
    """NAME and the value of EXPR, from a --arg NAME=EXPR."""
    name, _, expr = text.partition("=")
    if not name.strip().isidentifier() or not expr.strip():
        raise _Refused(f"--arg {text!r}: expected NAME=EXPR, e.g. "
                       "--arg 'x=ti.Vector.field(2, ti.f32, shape=8)'")
    try:
        value = eval(expr, {**vars(module), "ti": ti, "np": np})  # noqa: S307 (the user's)
    except Exception as exc:  # noqa: BLE001 (any error in the user's expression)
        raise _Refused(f"--arg {text!r}: cannot evaluate {expr.strip()!r} "
                       f"({type(exc).__name__}: {exc})") from None
    return name.strip(), value


class _Refused(Exception):
    """A command line this tool cannot use (the message says what to pass)."""


def _arguments(kernel: Kernel, module, given: list[str]) -> tuple:
    """Arguments to lower the kernel with: scalars and vectors need none (0 stands in), a
    template or ndarray parameter is its --arg, else the module's global of the same name."""
    values = dict(_value(kernel, module, text) for text in given)
    params = kernel.params()[0]
    unknown = sorted(set(values) - {p.name for p in params})
    if unknown:
        raise _Refused(f"--arg {unknown[0]}: kernel {kernel.name!r} has no parameter of that "
                       f"name (its parameters: {', '.join(p.name for p in params)})")
    args = []
    for p in params:
        if p.kind in ("scalar", "matrix"):
            args.append(values.get(p.name, 0))
        elif p.name in values:
            args.append(values[p.name])
        elif hasattr(module, p.name):
            args.append(getattr(module, p.name))
        else:
            example = ("ti.ndarray(ti.f32, shape=8)" if p.kind == "ndarray" else
                       "ti.field(ti.f32, shape=8)")
            raise _Refused(
                f"kernel {kernel.name!r} takes {p.kind} argument {p.name!r}: its PTX depends "
                f"on the field's type and shape. Pass one, e.g. --arg '{p.name}={example}' "
                f"(ti.Vector.field(2, ti.f32, shape=8) for 2-vectors, shape=() for a 0-D "
                f"field), or give the module a global named {p.name!r}")
    return tuple(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simrun.lang.ptx", description=__doc__.split(
        "\n")[0])
    parser.add_argument("kernel", help="MODULE.py:KERNEL")
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=EXPR",
                        help="a value to compile a template or ndarray parameter for, a "
                        "Python expression with `ti` and the module's globals, e.g. "
                        "--arg 'x=ti.Vector.field(2, ti.f32, shape=8)' (default: the "
                        "module's global NAME)")
    parser.add_argument("--fp", choices=["f32", "f64"], default="f32",
                        help="the type of `float` (a scene's precision; default f32)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--grad", action="store_const", dest="mode", const="reverse",
                      help="the reverse-mode (gradient) kernel")
    mode.add_argument("--fwd", action="store_const", dest="mode", const="fwd",
                      help="the forward-mode kernel")
    parser.add_argument("--sm", type=int, default=90, help="compute capability (80, 90)")
    ns = parser.parse_args(argv)
    kernel, module = _load_kernel(ns.kernel, ns.fp)
    try:
        kir = lower_kernel(kernel, _arguments(kernel, module, ns.arg), ns.mode or "primal")
        ptx = kernel_ptx(kir, ns.sm)
    except (SimrunError, CudaToolError, _Refused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(ptx.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
