"""The names `import simrun.lang as ti` offers (Taichi's, and simrun's own): the package
loads this module on the first name a program uses (simrun/lang/__init__.py)."""
# ruff: noqa: F401  (re-exports, as an __init__'s)

import numpy as np

from . import ad, lang
from . import tmath as math
from .ad import Tape, clear_all_gradients, stop_grad
from .api import (
    Kernel,
    amdgpu,
    arm64,
    cpu,
    cuda,
    data_oriented,
    dx11,
    dx12,
    func,
    gles,
    gpu,
    init,
    kernel,
    metal,
    opengl,
    pyfunc,
    real_func,
    reset,
    sync,
    vulkan,
    x64,
)
from .builtins import MATH_FUNCTIONS as _MATH_FUNCTIONS
from .builtins import (
    abs,
    bit_shl,
    bit_shr,
    cast,
    ceil,
    floor,
    logical_and,
    logical_not,
    logical_or,
    max,
    min,
    pow,
    round,
    rsqrt,
    select,
)
from .errors import (
    AutodiffError,
    CompileError,
    SimrunError,
    TaichiAssertionError,
    TaichiCompilationError,
    TaichiIndexError,
    TaichiNameError,
    TaichiRuntimeError,
    TaichiSyntaxError,
    TaichiTypeError,
)
from .fields import (
    Field,
    MatrixField,
    Ndarray,
    ScalarField,
    axes,
    field,
    i,
    ij,
    ijk,
    ijkl,
    ik,
    j,
    jk,
    k,
    l,
    ndarray,
    root,
)
from .frontend.special import ATOMICS as _ATOMICS
from .frontend.special import Grouped as grouped
from .frontend.special import NDRange as ndrange
from .frontend.special import _loop_config as loop_config
from .frontend.special import randn, random, static, static_assert, static_print
from .linalg import polar_decompose, svd, sym_eig
from .matrix import Matrix, Vector
from .types import (
    f16,
    f32,
    f64,
    float16,
    float32,
    float64,
    i8,
    i16,
    i32,
    i64,
    int8,
    int16,
    int32,
    int64,
    template,
    types,
    u1,
    u8,
    u16,
    u32,
    u64,
    uint8,
    uint16,
    uint32,
    uint64,
)

atomic_add = _ATOMICS["add"]
atomic_sub = _ATOMICS["sub"]
atomic_mul = _ATOMICS["mul"]
atomic_min = _ATOMICS["min"]
atomic_max = _ATOMICS["max"]
atomic_and = _ATOMICS["and"]
atomic_or = _ATOMICS["or"]
atomic_xor = _ATOMICS["xor"]
ifte = select



def is_active() -> bool:
    return True


def rgb_to_hex(c) -> int:
    """Taichi's GUI colour helper: (r, g, b) in [0, 1] (numbers or numpy arrays of them) to
    0xRRGGBB integers."""
    r, g, b = (np.clip(np.asarray(x, dtype=np.float64) * 255, 0, 255).astype(np.int64)
               for x in c)
    out = (r << 16) | (g << 8) | b
    return int(out) if out.ndim == 0 else out


def hex_to_rgb(color: int) -> tuple:
    return ((color >> 16) & 255) / 255, ((color >> 8) & 255) / 255, (color & 255) / 255


def block_local(*fields) -> None:
    """Taichi's hint to cache fields in GPU block-local memory: nothing to do on the CPU."""


class extension:  # noqa: N801 - Taichi's name
    """Taichi's backend extensions, for `require=ti.extension.adstack`: the CPU backend
    has them all (simrun's autodiff stack grows as needed)."""

    sparse = "sparse"
    quant = quant_basic = "quant"
    data64 = "data64"
    adstack = "adstack"
    bls = "bls"
    assertion = "assertion"
    extfunc = "extfunc"
    mesh = "mesh"


globals().update(_MATH_FUNCTIONS)  # ti.sin, ti.atan2, ti.erf, ...: the op registry's functions
