"""Tangents of kernel-scope accumulators in parallel loops.

`s = 0; for i in x: s += e(i)` is a reduction: each chunk sums its part and the parts are
combined. Forward mode gave the tangent of such a sum as `t = 1.0 * ds + 1.0 * de; ds = t`,
which codegen did not see as a reduction: every chunk read and wrote the shared local, and the
chunks' updates overwrote each other. Forward-over-reverse writes exactly this shape for the
adjoint of a kernel-scope value read in the loop (a cutoff's shift in a pair energy), so the
mixed derivative d/dx (dU/d eps) of an LJ-like energy came out a different number on each
launch (up to 5x off on two threads), and `simrun grad` differentiating an energy
parameter inherited it. The tangent of `v += e` is now `dv += de`, a reduction too.
"""

from __future__ import annotations

import numpy as np
import pytest

import simrun.lang as ti

EPS = np.finfo(np.float64).eps


def _lattice(n: int) -> np.ndarray:
    side = int(np.ceil(np.sqrt(n)))
    grid = np.stack(np.meshgrid(np.arange(side), np.arange(side)), -1).reshape(-1, 2)[:n]
    return grid * 1.3 + np.random.default_rng(0).normal(0.0, 0.1, (n, 2))


def _setup(n: int, threads: int):
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=threads)
    x = ti.Vector.field(2, ti.f64, shape=n, needs_grad=True, needs_dual=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    eps = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def energy(x: ti.template(), U: ti.template(), eps: ti.template()):
        epsilon = eps[None]
        cutoff = 2.5
        c6 = (1.0 / (cutoff * cutoff)) ** 3
        shift = 4.0 * epsilon * (c6 * c6 - c6)  # read in the loop: its adjoint accumulates
        slope = -24.0 * epsilon * (2.0 * c6 * c6 - c6) / cutoff
        for i in range(x.shape[0]):
            for j in range(i + 1, x.shape[0]):
                r = x[j] - x[i]
                r2 = r.dot(r)
                if r2 < cutoff * cutoff:
                    s6 = (1.0 / r2) ** 3
                    U[None] += 4.0 * epsilon * (s6 * s6 - s6) - shift \
                        - (ti.sqrt(r2) - cutoff) * slope

    x.from_numpy(_lattice(n))
    eps[None] = 1.0
    return x, U, eps, energy


def _mixed(x, U, eps, energy, lam: np.ndarray) -> float:
    """d/dt dU/d eps at x + t lam (forward over reverse)."""
    with ti.ad.FwdMode(loss=U, param=x, seed=lam.ravel().tolist()):
        U[None] = 0
        x.grad.fill(0)
        eps.grad.fill(0)
        U.grad[None] = 1
        energy(x, U, eps)
        energy.grad(x, U, eps)
    return float(eps.grad.dual[None])


def _deps(x, U, eps, energy) -> float:
    with ti.ad.Tape(loss=U):
        U[None] = 0
        energy(x, U, eps)
    return float(eps.grad[None])


@pytest.mark.parametrize("threads", [2, 4])
def test_mixed_derivative_repeats_and_matches_central_differences(threads: int) -> None:
    n = 36
    x, U, eps, energy = _setup(n, threads)
    lam = np.random.default_rng(1).normal(size=(n, 2))
    got = [_mixed(x, U, eps, energy, lam) for _ in range(40)]
    # every launch sums the same terms; chunks regroup them, so equal to rounding
    scale = max(abs(v) for v in got)
    assert np.ptp(got) <= 64 * n * n * EPS * max(scale, 1.0), got
    x0 = x.to_numpy()
    h = 1e-5
    values = []
    for sign in (1, -1):
        x.from_numpy(x0 + sign * h * lam)
        values.append(_deps(x, U, eps, energy))
    x.from_numpy(x0)
    fd = (values[0] - values[1]) / (2 * h)
    # central differences: truncation ~h^2 |third derivative|, rounding ~eps |dU/deps| / h
    assert abs(got[0] - fd) <= 1e-6 * max(abs(fd), 1.0), (got[0], fd)


def test_tangent_of_a_kernel_scope_sum_under_threads() -> None:
    """A user's own `s += ...` in a parallel loop under FwdMode: ds is the sum of the
    per-element tangents, as on one thread."""
    n = 4096
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=4)
    a = ti.field(ti.f64, shape=n, needs_dual=True)
    L = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def total(a: ti.template(), L: ti.template()):
        s = 0.0
        for i in a:
            s += a[i] * a[i]
        L[None] = s

    values = np.linspace(-1.0, 1.0, n)
    a.from_numpy(values)
    seed = np.cos(np.arange(n))
    for _ in range(20):
        with ti.ad.FwdMode(loss=L, param=a, seed=seed.tolist()):
            total(a, L)
        want = float(np.sum(2 * values * seed))
        assert abs(float(L.dual[None]) - want) <= 8 * n * EPS * np.sum(np.abs(2 * values *
                                                                              seed))
