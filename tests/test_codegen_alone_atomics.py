"""Atomics of a launch that runs alone (inline, one thread, or the deterministic mode's serial
run) are plain read-modify-writes (statements.atomic_update), and the probe's inline
estimate counts them as such (schedule.iteration_cost(alone=True)).

A float atomic add by compare-and-swap costs ~10x a plain one: the gradient of DiffTaichi's
smoke `compute_p` (a 5-point periodic stencil on 128 x 128, four adds into neighbours per
cell) took ~450 us a launch split over two threads with atomics, ~40 us inline with plain
adds. Results are compared exactly (integer-valued floats, so any order of adds is exact)
under 1, 2 and 3 threads, the deterministic mode, and at sizes that run inline and split.
"""

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang import api

M = 512
src = ti.field(ti.f64, shape=(M, M))
dst = ti.field(ti.f64, shape=(M, M))
hits = ti.field(ti.i32, shape=M)
smooth = ti.field(ti.f64, shape=(M, M))


@ti.func
def down(i, n):
    j = i - 1
    if j < 0:
        j = n - 1
    return j


@ti.kernel
def scatter_to_neighbours(n: ti.i32):
    """What a stencil's gradient does: each cell adds into its neighbours' entries."""
    for y in range(n):
        for x in range(n):
            v = src[y, x]
            dst[down(y, n), x] += v
            dst[(y + 1) % n, x] += 2.0 * v
            dst[y, down(x, n)] -= v
            dst[y, (x + 1) % n] += 3.0 * v
            hits[(x * 7 + y) % n] += 1
            s = v * 0.01  # work of its own, so that many threads pay off despite the atomics
            for _ in ti.static(range(6)):
                s = ti.sin(s) + ti.cos(s) * 0.5
            smooth[y, x] = s


def _want(data, n):
    d = data[:n, :n]
    want = np.roll(d, -1, 0) + 2.0 * np.roll(d, 1, 0) - np.roll(d, -1, 1) + 3.0 * np.roll(d, 1, 1)
    counts = np.bincount(((np.arange(n)[None, :] * 7 + np.arange(n)[:, None]) % n).ravel(),
                         minlength=n)
    return want, counts


def _splits(*args) -> int:
    rt = api.runtime()
    before = rt.split_launches
    scatter_to_neighbours(*args)
    return rt.split_launches - before


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("threads", [1, 2, 8])
@pytest.mark.parametrize("n", [64, 512])
def test_scatters_are_exact_alone_and_split(n, threads, deterministic):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads, deterministic=deterministic)
    data = np.random.default_rng(n).integers(-50, 50, (M, M)).astype(np.float64)
    src.from_numpy(data)
    dst.fill(0)
    hits.fill(0)
    splits = _splits(n)
    # 64 x 64 with plain adds is well inside the inline limit at any thread count; 512 x
    # 512 is not, and splits where 8 threads with atomics beat one thread without (one
    # thread, or the deterministic mode, runs it alone; 2 threads: the estimates decide)
    if n == 64 or threads == 1 or deterministic:
        assert splits == 0
    elif threads == 8:
        assert splits == 1
    want, counts = _want(data, n)
    np.testing.assert_array_equal(dst.to_numpy()[:n, :n], want)
    np.testing.assert_array_equal(hits.to_numpy()[:n], counts)
    want_s = data[:n, :n] * 0.01
    for _ in range(6):
        want_s = np.sin(want_s) + np.cos(want_s) * 0.5
    np.testing.assert_allclose(smooth.to_numpy()[:n, :n], want_s, rtol=1e-14, atol=1e-14)


def test_a_split_launch_called_again_inline_keeps_every_add():
    """Alternating the two paths in one process (the same compiled task) loses nothing."""
    ti.init(arch=ti.cpu, cpu_max_num_threads=8)
    data = np.random.default_rng(7).integers(-50, 50, (M, M)).astype(np.float64)
    src.from_numpy(data)
    for n in (64, 512, 64, 512):
        dst.fill(0)
        hits.fill(0)
        scatter_to_neighbours(n)
        want, counts = _want(data, n)
        np.testing.assert_array_equal(dst.to_numpy()[:n, :n], want)
        np.testing.assert_array_equal(hits.to_numpy()[:n], counts)
