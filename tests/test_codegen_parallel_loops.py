"""Scatters through a neighbour row run as parallel loops (codegen/parallel.py) only where
the row's promise reaches: a field flagged ``distinct_rows`` (row i's entries 1..row[i, 0]
are distinct), read at k + 1 for k over [0, row[i, 0]). Anywhere else (no flag, the stale
tail past the count, the count itself) the loop stays as it was, and the sums stay right
when those entries repeat.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.codegen.layout import build_layout
from simrun.lang.compiler import build_module

N, CAP = 48, 12
weight = ti.field(ti.f64, shape=N)
total = ti.field(ti.f64, shape=N)
listed = ti.field(ti.i32, shape=(N, CAP + 1))
listed.distinct_rows = True
unflagged = ti.field(ti.i32, shape=(N, CAP + 1))


@ti.kernel
def scatter_rows(nb: ti.template()):
    for i in range(N):
        for k in range(nb[i, 0]):
            total[nb[i, k + 1]] += weight[i]


@ti.kernel
def scatter_whole_rows(nb: ti.template()):
    for i in range(N):
        for k in range(nb.shape[1] - 1):
            total[nb[i, k + 1]] += weight[i]


@ti.kernel
def scatter_from_count(nb: ti.template()):
    for i in range(N):
        for k in range(nb[i, 0]):
            total[nb[i, k]] += weight[i]


def _rows(rng) -> np.ndarray:
    """Distinct partners up to each row's count, then a tail of repeats (a stale list)."""
    rows = np.zeros((N, CAP + 1), np.int32)
    for i in range(N):
        count = rng.integers(0, CAP + 1)
        rows[i, 0] = count
        rows[i, 1:1 + count] = rng.choice(N, size=count, replace=False)
        rows[i, 1 + count:] = rng.integers(0, 3)
    return rows


def _parallel(kernel, field) -> bool:
    kir, _ = kernel.lower((field,))
    text, _ = build_module(kir, build_layout(kir), "k", False, True)
    return "llvm.loop.parallel_accesses" in text


def test_only_listed_partners_make_a_parallel_loop():
    ti.init(arch=ti.cpu)
    assert _parallel(scatter_rows, listed)
    assert not _parallel(scatter_rows, unflagged)
    assert not _parallel(scatter_whole_rows, listed)
    assert not _parallel(scatter_from_count, listed)


@pytest.mark.parametrize("threads", [1, 2])
def test_scatter_sums_are_exact(threads):
    """Integer weights: every order of the adds gives the same exact sums."""
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    rng = np.random.default_rng(7)
    rows = _rows(rng)
    w = rng.integers(1, 100, N).astype(np.float64)
    weight.from_numpy(w)
    for field in (listed, unflagged):
        field.from_numpy(rows)
        for kernel, cols in ((scatter_rows, lambda c: slice(1, 1 + c)),
                             (scatter_whole_rows, lambda c: slice(1, None)),
                             (scatter_from_count, lambda c: slice(0, c))):
            total.fill(0)
            kernel(field)
            want = np.zeros(N)
            for i in range(N):
                np.add.at(want, rows[i, cols(rows[i, 0])], w[i])
            np.testing.assert_array_equal(total.to_numpy(), want)


def _lj_kernel():
    path = Path(__file__).resolve().parents[1] / "kernels" / "lj.py"
    spec = importlib.util.spec_from_file_location("lj_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lj


@pytest.mark.parametrize("fp", [ti.f32, ti.f64])
def test_lj_forces_in_open_space_match_closed_form(fp):
    """kernels/lj.py over a flagged half list in an open box (no images): dU/dx by the
    vectorised reverse pass against 24 eps (2 s^12 - s^6) / r^2 per pair, to 1e3 eps of the
    largest component (each sums up to ~20 pair terms; cancellation within one costs
    ~10x); U to 1e3 eps of the sum of its terms' sizes."""
    ti.init(arch=ti.cpu, default_fp=fp)
    np_fp = np.float32 if fp == ti.f32 else np.float64
    rng = np.random.default_rng(3)
    n = 64
    x_np = (rng.random((n, 3)) * 4.0).astype(np_fp)
    d = x_np[None, :, :] - x_np[:, None, :]
    r2 = (d * d).sum(-1)
    near = np.triu((r2 < 2.5 ** 2) & (r2 > 0.7 ** 2), 1)  # no overlaps: U stays moderate
    rows = np.zeros((n, n), np.int32)
    for i in range(n):
        js = rng.permutation(np.nonzero(near[i])[0])
        rows[i, 0], rows[i, 1:1 + len(js)] = len(js), js
    x = ti.Vector.field(3, fp, shape=n, needs_grad=True)
    nb = ti.field(ti.i32, shape=(n, n))
    nb.distinct_rows = True
    low = ti.Vector.field(3, fp, shape=())
    high = ti.Vector.field(3, fp, shape=())
    u = ti.field(fp, shape=(), needs_grad=True)
    x.from_numpy(x_np)
    nb.from_numpy(rows)
    lj = _lj_kernel()
    with ti.ad.Tape(loss=u):
        lj(x, nb, low, high, False, u, 1.0, 1.0, 2.5)
    i, j = np.nonzero(near)
    dij = (x_np[j] - x_np[i]).astype(np.float64)
    s6 = 1.0 / (dij * dij).sum(1) ** 3
    c = (-24.0 * (2 * s6 * s6 - s6) / (dij * dij).sum(1))[:, None] * dij
    want = np.zeros((n, 3))
    np.add.at(want, j, c)
    np.add.at(want, i, -c)
    eps = float(np.finfo(np_fp).eps)
    got = x.grad.to_numpy().astype(np.float64)
    assert np.abs(got - want).max() < 1e3 * eps * np.abs(want).max()
    terms = 4 * (s6 * s6 - s6)
    assert abs(float(u[None]) - terms.sum()) < 1e3 * eps * np.abs(terms).sum()
