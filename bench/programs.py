"""Benchmark programs written once in the common Taichi subset.

Every builder takes the kernel-language module as ``ti`` (``taichi`` or ``simrun.lang``), so
both implementations compile the exact same kernel source; only the import differs.
Builders allocate their own fields and return a ``Program`` of plain callables. No
``from __future__ import annotations`` here: Taichi needs real objects as kernel annotations.
"""

from typing import Callable

import numpy as np
from p2g import build_p2g, build_p2g_polar, build_p2g_sorted
from program import Program


def _positions(n: int, dim: int, seed: int, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    """Deterministic f32 positions so both modules start from identical data."""
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, size=(n, dim)).astype(np.float32)


def build_launch_empty(ti, size: int = 0) -> Program:
    """Launch overhead alone: a kernel whose body does nothing."""

    @ti.kernel
    def empty():
        pass

    return Program(run=empty)


def build_launch_scalar(ti, size: int = 0) -> Program:
    """Launch overhead with two scalar arguments marshalled and one scalar written."""
    out = ti.field(ti.f32, shape=())

    @ti.kernel
    def write_scalar(a: ti.f32, n: ti.i32):
        out[None] = a * n

    def check() -> float:
        write_scalar(1.5, 4)
        return float(out[None])

    return Program(run=lambda: write_scalar(0.5, 3), check=check)


def build_saxpy(ti, size: int = 1 << 24) -> Program:
    """Memory-bound streaming: two f32 loads and one store per element."""
    a = 2.0
    x = ti.field(ti.f32, shape=size)
    y = ti.field(ti.f32, shape=size)
    x0 = np.linspace(0.0, 1.0, size, dtype=np.float32)
    y0 = np.ones(size, dtype=np.float32)
    x.from_numpy(x0)
    y.from_numpy(y0)

    @ti.kernel
    def saxpy():
        for i in x:
            y[i] = a * x[i] + y[i]

    def check() -> float:
        y.from_numpy(y0)
        saxpy()
        return float(y.to_numpy().astype(np.float64).sum())

    return Program(run=saxpy, check=check)


def _pair_energy_program(ti, kernel, x, U) -> Program:
    """Shared check/grad plumbing of the two pair-energy formulations."""
    U.grad[None] = 1.0

    def check() -> float:
        U[None] = 0.0
        kernel()
        return float(U[None])

    def grad_check() -> float:
        x.grad.fill(0.0)
        U[None] = 0.0
        kernel()
        kernel.grad()
        return float(np.abs(x.grad.to_numpy().astype(np.float64)).sum())

    return Program(run=kernel, check=check, grad=kernel.grad, grad_check=grad_check)


def build_pair_energy_local(ti, size: int = 4096) -> Program:
    """O(N^2) softened 1/r energy; per-i register accumulator, one atomic add per i."""
    n = size
    x = ti.Vector.field(2, dtype=ti.f32, shape=n, needs_grad=True)
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    x.from_numpy(_positions(n, 2, seed=1))

    @ti.kernel
    def pair_energy_local():
        for i in range(n):
            acc = 0.0
            for j in range(n):
                r = x[i] - x[j]
                acc += -1.0 / r.norm(1e-3)
            U[None] += acc

    return _pair_energy_program(ti, pair_energy_local, x, U)


def build_pair_energy_ndrange(ti, size: int = 4096) -> Program:
    """Same energy as the gravity example writes it: ndrange(N, N), direct ``U[None] +=``."""
    n = size
    x = ti.Vector.field(2, dtype=ti.f32, shape=n, needs_grad=True)
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    x.from_numpy(_positions(n, 2, seed=1))

    @ti.kernel
    def pair_energy_ndrange():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            U[None] += -1 / r.norm(1e-3)

    return _pair_energy_program(ti, pair_energy_ndrange, x, U)


def build_gravity(ti, size: int = 8, dt: float = 1e-5):
    """The docs' autodiff gravity example; returns (substep, x) for timing and checking."""
    n = size
    x = ti.Vector.field(2, dtype=ti.f32, shape=n, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f32, shape=n)
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    x.from_numpy(_positions(n, 2, seed=2))

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            U[None] += -1 / r.norm(1e-3)

    @ti.kernel
    def advance():
        for i in x:
            v[i] += dt * -x.grad[i]
        for i in x:
            x[i] += dt * v[i]

    def substep():
        with ti.ad.Tape(loss=U):
            compute_U()
        advance()

    return substep, x, v


def build_gravity_substep(ti, size: int = 8) -> Program:
    """Per-substep cost of Tape(compute_U) + advance: launch- and tape-overhead bound."""
    substep, x, v = build_gravity(ti, size)
    x0 = x.to_numpy()

    def check() -> float:
        x.from_numpy(x0)
        v.fill(0.0)
        for _ in range(100):
            substep()
        return float(np.abs(v.to_numpy().astype(np.float64)).sum())

    return Program(run=substep, check=check)


# name -> (builder, full size, quick size). Grad rows are "<name>.grad" when a grad exists.
# gravity runs before the big programs: Taichi's Tape clears the gradients of every field
# alive in the process, so fields left over from other benchmarks would inflate its time.
BENCHMARKS: dict[str, tuple[Callable[..., Program], int, int]] = {
    "launch_empty": (build_launch_empty, 0, 0),
    "launch_scalar_args": (build_launch_scalar, 0, 0),
    "gravity_substep_8": (build_gravity_substep, 8, 8),
    "saxpy_2^24": (build_saxpy, 1 << 24, 1 << 16),
    "pair_energy_local_4096": (build_pair_energy_local, 4096, 256),
    "pair_energy_ndrange_4096": (build_pair_energy_ndrange, 4096, 256),
    "p2g_8192": (build_p2g, 8192, 512),
    "p2g_polar_8192": (build_p2g_polar, 8192, 512),
    "p2g_sorted_8192": (build_p2g_sorted, 8192, 512),
    "p2g_65536": (build_p2g, 65536, 1024),
}

# Large kernels re-timed with cpu_max_num_threads=1 to measure parallel speedup.
SCALING_BENCHMARKS = [
    "saxpy_2^24",
    "pair_energy_local_4096",
    "pair_energy_ndrange_4096",
    "p2g_8192",
    "p2g_sorted_8192",
    "p2g_65536",
]
