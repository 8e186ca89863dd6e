"""The probe's cost estimate for inner loops whose bounds are affine in the task's own index
(`for j in range(i)`, `range(i + 1, n)`: the triangular pair loops of DiffTaichi's billiards
`collide`). They were "heavy" (trip count unknown before the launch) and so split over the
threads at any size: ~10 us of waking a worker for a 4 us launch, 1023 times an iteration.
Now the probe evaluates the trip count at the first and last index: a small launch runs
inline, a large one still splits. Results are compared exactly with numpy (integer-valued
floats) at sizes on both sides, under 1 and 2 threads."""

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang import api

w = ti.field(ti.f64, shape=4096)
lower = ti.field(ti.f64, shape=4096)
upper = ti.field(ti.f64, shape=4096)
squares = ti.field(ti.f64, shape=64)
q = ti.field(ti.f64, shape=4096, needs_grad=True)
energy = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def triangles(n: ti.i32):
    for i in range(n):
        for j in range(i):
            lower[i] += w[i] * w[j]
    for i in range(n):
        for j in range(2 * i + 1 - i, n):  # affine: 2i + 1 - i
            upper[i] += w[i] - w[j]


@ti.kernel
def quadratic_bound(n: ti.i32):
    for i in range(n):
        for _j in range(i * i):  # not affine in i: still heavy, split whenever n > 1
            squares[i] += 1.0


@ti.kernel
def pair_energy(n: ti.i32):
    for i in range(n):
        for j in range(i + 1, n):
            energy[None] += q[i] * q[j]


def _splits(kernel, *args) -> int:
    rt = api.runtime()
    before = rt.split_launches
    kernel(*args)
    return rt.split_launches - before


def _want(data, n):
    lo = np.array([sum(data[i] * data[j] for j in range(i)) for i in range(n)])
    up = np.array([sum(data[i] - data[j] for j in range(i + 1, n)) for i in range(n)])
    return lo, up


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [11, 3000])
def test_triangular_loops_run_inline_when_small_and_split_when_large(threads, n):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    data = np.random.default_rng(n).integers(-9, 9, 4096).astype(np.float64)
    w.from_numpy(data)
    lower.fill(0)
    upper.fill(0)
    splits = _splits(triangles, n)
    assert splits == (0 if n == 11 else 2)  # large: both loops, ~n^2/2 pairs each
    if n == 11:
        lo, up = _want(data, n)
    else:  # the same sums by cumulative sums (exact: integers far below 2^53)
        d = data[:n]
        lo = d * np.concatenate([[0.0], np.cumsum(d)[:-1]])
        up = d * (n - 1 - np.arange(n)) - (d.sum() - np.cumsum(d))
    np.testing.assert_array_equal(lower.to_numpy()[:n], lo)
    np.testing.assert_array_equal(upper.to_numpy()[:n], up)


def test_a_bound_that_is_not_affine_in_the_index_still_splits():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    squares.fill(0)
    assert _splits(quadratic_bound, 3) == 1
    np.testing.assert_array_equal(squares.to_numpy()[:3], [0.0, 1.0, 4.0])


@pytest.mark.parametrize("n", [11, 3000])
def test_the_gradient_of_a_triangular_loop_is_sized_the_same_way(n):
    """The reverse pass reads its loop bounds from locals it assigns before the reversed
    loop (`lo = i + 1`): the probe resolves them to the index."""
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    data = np.random.default_rng(n).integers(-9, 9, 4096).astype(np.float64)
    q.from_numpy(data)
    energy[None] = 0.0
    q.grad.fill(0)
    energy.grad[None] = 1.0
    assert _splits(pair_energy.grad, n) == (0 if n == 11 else 1)
    d = data[:n]
    np.testing.assert_array_equal(q.grad.to_numpy()[:n], d.sum() - d)  # dE/dq_k = S - q_k
