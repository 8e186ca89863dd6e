"""Autodiff's value_reverse mode: a kernel's adds and its gradient in one launch.

U and dU/dx from the one launch against hand-derived values on random configurations
(gravity over all ordered pairs, a flat parallel loop; cut LJ over pairs i < j, an inner
loop the reverse pass recomputes, in a periodic and an open box; f32 and f64), against the
two launches it replaces, and the kernels it must refuse. Tolerances: a sum of n terms in
any order is within n eps of the sum of the terms' sizes (each term's few roundings add a
few eps more, inside that), and the gradient's components likewise over their pair terms.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang import pipeline
from simrun.lang.errors import AutodiffError
from simrun.lang.ir.access import stmt_exprs
from simrun.lang.ir.nodes import OpExpr, walk
from simrun.lang.ir.ops import Op

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_kernels", KERNELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launch(kernel, args, modes, U, x) -> tuple[float, np.ndarray]:
    """U and dU/dx after the launches of `modes`, from U = 0, dU/dU = 1, x.grad = 0."""
    U.fill(0)
    U.grad.fill(1)
    x.grad.fill(0)
    for mode in modes:
        compiled, flat, _ = kernel.prepare(args, mode)
        compiled.launch(flat)
    return float(U.to_numpy()), x.grad.to_numpy().astype(np.float64)


def _check(got: tuple, terms: np.ndarray, force: np.ndarray, size: np.ndarray,
           per_component: int, eps: float) -> None:
    u, grad = got
    assert abs(u - terms.sum()) <= len(terms) * eps * np.abs(terms).sum()
    assert np.all(np.abs(grad - force) <= per_component * eps * size)


@pytest.mark.parametrize("fp", [ti.f32, ti.f64])
def test_gravity_value_and_gradient_in_one_launch(fp):
    """kernels/gravity.py, 40 bodies of random masses: one launch against the closed form
    (U = -G sum m_i m_j / s, dU/dx_i = 2 G sum_j m_i m_j (x_i - x_j) / s^3), as the two
    launches are."""
    ti.init(arch=ti.cpu, default_fp=fp)
    np_fp = np.float32 if fp == ti.f32 else np.float64
    rng = np.random.default_rng(11)
    n, soft, strength = 40, 1e-3, 1.3
    x_np, m_np = rng.random((n, 2)).astype(np_fp), rng.uniform(0.5, 2.0, n).astype(np_fp)
    x = ti.Vector.field(2, fp, shape=n, needs_grad=True)
    m = ti.field(fp, shape=n)
    U = ti.field(fp, shape=(), needs_grad=True)
    x.from_numpy(x_np)
    m.from_numpy(m_np)
    d = x_np[:, None, :].astype(np.float64) - x_np[None, :, :]
    s = np.sqrt((d * d).sum(-1) + soft)
    mm = strength * np.outer(m_np, m_np).astype(np.float64)
    terms = (-mm / s).ravel()
    pair = (2 * mm / s ** 3)[:, :, None] * d  # both orders (i, j) and (j, i)
    force, size = pair.sum(1), np.abs(pair).sum(1)
    args = (x, m, U, soft, strength)
    kernel = _module("gravity").gravity
    eps = float(np.finfo(np_fp).eps)
    for modes in (["value_reverse"], ["primal", "reverse"]):
        _check(_launch(kernel, args, modes, U, x), terms, force, size, 4 * n, eps)


@pytest.mark.parametrize("fp", [ti.f32, ti.f64])
@pytest.mark.parametrize("periodic", [True, False])
def test_lj_pairs_value_and_gradient_in_one_launch(fp, periodic):
    """kernels/lj.py:lj_all_pairs on a jittered lattice of 64 atoms (no overlaps), cut at
    2.5: the reverse pass recomputes the inner j loop, and the one launch adds U there."""
    ti.init(arch=ti.cpu, default_fp=fp)
    np_fp = np.float32 if fp == ti.f32 else np.float64
    rng = np.random.default_rng(5)
    side, spacing, cutoff = 4, 1.12, 2.5
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)
    x_np = ((grid + rng.uniform(-0.15, 0.15, grid.shape)) * spacing).astype(np_fp)
    n, box = len(x_np), side * spacing
    x = ti.Vector.field(3, fp, shape=n, needs_grad=True)
    low, high = ti.Vector.field(3, fp, shape=()), ti.Vector.field(3, fp, shape=())
    U = ti.field(fp, shape=(), needs_grad=True)
    x.from_numpy(x_np)
    high.from_numpy(np.full(3, box, np_fp))
    i, j = np.triu_indices(n, 1)
    d = x_np[j].astype(np.float64) - x_np[i]
    if periodic:
        d -= box * np.floor(d / box + 0.5)
    r2 = (d * d).sum(1)
    inside = r2 < cutoff ** 2
    i, j, d, r2 = i[inside], j[inside], d[inside], r2[inside]
    s6 = 1 / r2 ** 3
    terms = 4 * (s6 * s6 - s6)
    c = (-24 * (2 * s6 * s6 - s6) / r2)[:, None] * d
    force, size = np.zeros((n, 3)), np.zeros((n, 3))
    for idx, sign in ((j, 1), (i, -1)):
        np.add.at(force, idx, sign * c)
        np.add.at(size, idx, np.abs(c))
    args = (x, low, high, periodic, U, 1.0, 1.0, cutoff)
    kernel = _module("lj").lj_all_pairs
    eps = float(np.finfo(np_fp).eps)
    for modes in (["value_reverse"], ["primal", "reverse"]):
        _check(_launch(kernel, args, modes, U, x), terms, force, size, 4 * n, eps)


@ti.kernel
def row_sums(x: ti.template(), U: ti.template()):
    """A local sum over an inner loop, added to U after it: the one launch keeps the
    forward loop (its total is needed) besides the recomputed reverse."""
    for i in range(x.shape[0]):
        acc = 0.0
        for j in range(x.shape[0]):
            acc += ti.sin(x[i] * x[j])
        U[None] += acc * acc


@ti.kernel
def total_then_add(x: ti.template(), U: ti.template()):
    """A kernel-level total of a parallel loop, added to U by the serial code after it
    (the gradient kernel rebuilds the total first)."""
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i] * x[i]
    U[None] += ti.sqrt(total)


@ti.kernel
def reassigned(x: ti.template(), U: ti.template()):
    """Two divisions by `a` with `a` changed between them: two divisors, not one."""
    for i in range(x.shape[0]):
        a = x[i] + 2.0
        U[None] += 1.0 / a
        a = a * a
        U[None] += 3.0 / a


@ti.kernel
def reads_what_it_writes(x: ti.template(), U: ti.template()):
    for i in range(x.shape[0]):
        U[None] += x[i] * U[None]


@ti.kernel
def stores(x: ti.template(), U: ti.template()):
    for i in range(1):
        U[None] = x[i] * x[1]


def test_an_inner_sum_added_after_its_loop():
    """row_sums: U = sum_i (sum_j sin(x_i x_j))^2, its gradient by hand."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    rng = np.random.default_rng(2)
    n = 23
    x_np = rng.uniform(-1, 1, n)
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(x_np)
    acc = np.sin(np.outer(x_np, x_np)).sum(1)
    cos = np.cos(np.outer(x_np, x_np))
    want = 2 * (acc[:, None] * cos * x_np[None, :]).sum(1) + 2 * (acc[:, None] * cos).T @ x_np
    u, grad = _launch(row_sums, (x, U), ["value_reverse"], U, x)
    eps = float(np.finfo(np.float64).eps)
    assert abs(u - (acc * acc).sum()) <= 4 * n * n * eps * (acc * acc).sum()
    assert np.abs(grad - want).max() <= 16 * n * n * eps * np.abs(want).max()


def test_a_total_added_after_its_loop():
    """total_then_add: U = |x|, dU/dx = x / |x|."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x_np = np.random.default_rng(4).uniform(-1, 1, 300)
    x = ti.field(ti.f64, shape=300, needs_grad=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(x_np)
    norm = np.sqrt((x_np * x_np).sum())
    u, grad = _launch(total_then_add, (x, U), ["value_reverse"], U, x)
    eps = float(np.finfo(np.float64).eps)
    assert abs(u - norm) <= 300 * eps * norm
    np.testing.assert_allclose(grad, x_np / norm, rtol=0, atol=300 * eps / norm)


def test_a_divisor_changed_between_divisions_is_not_shared():
    """reassigned: U = sum 1/(x+2) + 3/(x+2)^2, dU/dx = -1/(x+2)^2 - 6/(x+2)^3."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x_np = np.linspace(-1, 1, 9)
    x = ti.field(ti.f64, shape=9, needs_grad=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(x_np)
    a = x_np + 2
    u, grad = _launch(reassigned, (x, U), ["value_reverse"], U, x)
    eps = float(np.finfo(np.float64).eps)
    assert abs(u - (1 / a + 3 / a ** 2).sum()) <= 64 * eps * (1 / a + 3 / a ** 2).sum()
    np.testing.assert_allclose(grad, -1 / a ** 2 - 6 / a ** 3, rtol=16 * eps, atol=0)


def test_kernels_whose_writes_are_not_adds_are_refused():
    """Reading U, or storing into it, makes the order of the launch's writes matter: no
    one launch (the caller launches the value, then the gradient)."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True)
    for kernel, words in ((reads_what_it_writes, "reads the field"), (stores, "other than")):
        with pytest.raises(AutodiffError, match=words):
            kernel.prepare((x, U), "value_reverse")


def test_one_reciprocal_for_a_shared_divisor():
    """gravity in value_reverse mode divides by its softened distance once a pair (U's
    term and the derivative's three divisions share it)."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.Vector.field(2, ti.f64, shape=8, needs_grad=True)
    m = ti.field(ti.f64, shape=8)
    U = ti.field(ti.f64, shape=(), needs_grad=True)
    kernel = _module("gravity").gravity
    divisions = {}
    for mode in ("reverse", "value_reverse"):
        out = pipeline.run(kernel.lower((x, m, U, 1e-3, 1.0))[0], mode, "gravity")
        divisions[mode] = sum(_count(e, Op.TRUEDIV) for t in out.tasks for s in walk(t.body)
                              for e in stmt_exprs(s))
    assert divisions == {"reverse": 3, "value_reverse": 1}


def test_hessian_vector_matches_central_differences():
    """gravity's H lambda (forward over reverse: the adjoint's reverse step) against
    central differences of dU/dx along lambda, extrapolated from steps h and h/2. Tolerance:
    the two differences' gap (four times the truncation left in the h/2 one; the
    extrapolation's is of order h^4) plus their rounding (eps |dU/dx| / h, 16-fold)."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    rng = np.random.default_rng(3)
    x_np = rng.uniform(0, 1, size=(8, 2))
    lam = rng.normal(size=(8, 2))
    x = ti.Vector.field(2, ti.f64, shape=8, needs_grad=True, needs_dual=True)
    m = ti.field(ti.f64, shape=8)
    U = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    m.from_numpy(rng.uniform(0.5, 2, size=8))
    kernel = _module("gravity").gravity
    args = (x, m, U, 1e-3, 1.0)

    def gradient(at) -> np.ndarray:
        x.from_numpy(at)
        return _launch(kernel, args, ["primal", "reverse"], U, x)[1]

    x.from_numpy(x_np)
    with ti.ad.FwdMode(loss=U, param=x, seed=lam.reshape(-1)):
        x.grad.fill(0)
        U.fill(0)
        kernel(*args)
        U.grad.fill(1)
        kernel.grad(*args)
    hvp = x.grad.dual.to_numpy()
    h = 1e-5
    wide, narrow = ((gradient(x_np + s * lam) - gradient(x_np - s * lam)) / (2 * s)
                    for s in (h, h / 2))
    eps = float(np.finfo(np.float64).eps)
    rounding = 16 * eps * np.abs(gradient(x_np)).max() / (h / 2)
    assert np.abs(hvp).max() > 1
    assert np.all(np.abs(hvp - (4 * narrow - wide) / 3) <= np.abs(wide - narrow) + rounding)


def _count(e, op) -> int:
    if not isinstance(e, OpExpr):
        return 0
    return (e.op is op) + sum(_count(a, op) for a in e.args)
