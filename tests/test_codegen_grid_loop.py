"""ndrange tasks run as rows of their innermost dimension (codegen chunks._grid_loop), with
per-row sums for atomics whose target is the same all along a row (schedule.row_sums).

Results are compared with numpy exactly (integer values, or integer-valued floats) under 1, 2
and 3 threads, for sizes that run inline and sizes that split into chunks which start and end
in the middle of rows.
"""

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang import api
from simrun.lang.codegen import schedule

THREADS = [1, 2, 3]


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)
    yield


A = ti.field(ti.i64, shape=(700, 600))
B = ti.field(ti.i32, shape=(5, 6, 7))
rows = ti.field(ti.f64, shape=700)
cols = ti.field(ti.f64, shape=600)
counts = ti.field(ti.i32, shape=700)
w = ti.field(ti.f64, shape=(700, 600))


vec = ti.Vector.field(3, ti.f64, shape=700)
grid2 = ti.Vector.field(2, ti.f64, shape=(600, 4))


@ti.kernel
def vector_scatters(n: ti.i32, m: ti.i32):
    """A gradient kernel's pattern: one vector field added to at i (row sums) and at j."""
    for i, j in ti.ndrange(n, m):
        d = ti.Vector([w[i, j], 2.0 * w[i, j], -w[i, j]])
        vec[i] += d
        vec[j] -= 3.0 * d
        grid2[j, i % 4] += ti.Vector([w[i, j], 1.0])


@ti.kernel
def fill_offset(lo0: ti.i32, hi0: ti.i32, lo1: ti.i32, hi1: ti.i32):
    for i, j in ti.ndrange((lo0, hi0), (lo1, hi1)):
        A[i, j] = 1000 * i + j + 7


@ti.kernel
def fill_3d():
    for i, j, k in ti.ndrange(5, 6, 7):
        B[i, j, k] = 100 * i + 10 * j + k


@ti.kernel
def fill_grouped():
    for I in ti.grouped(B):
        B[I] = I[0] * 49 + I[1] * 7 + I[2]


@ti.kernel
def fill_struct_for():
    for i, j in A:
        A[i, j] = i * j - j


@ti.kernel
def row_and_column_sums(n: ti.i32, m: ti.i32):
    for i, j in ti.ndrange(n, m):
        rows[i] += w[i, j]          # same target all along a row: one sum per row
        cols[j] -= 2.0 * w[i, j]    # varies along the row: privatised scatter
        if w[i, j] > 0:
            counts[i] += 1          # under an if: still one sum per row


def _integer_weights(seed: int) -> tuple:
    """Integer-valued w, so that sums in any order are exact."""
    rng = np.random.default_rng(seed)
    data = rng.integers(-20, 20, (700, 600)).astype(np.float64)
    w.from_numpy(data)
    return rng, data


def _run(kernel, shape, threads: int, full) -> None:
    """Launch over shape; the full shape must split into chunks when threads > 1."""
    split = _splits(kernel, *shape)
    if shape == full and threads > 1:
        assert split == 1


def _splits(kernel, *args):
    rt = api.runtime()
    before = rt.split_launches
    kernel(*args)
    return rt.split_launches - before


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("bounds", [(0, 700, 0, 600), (3, 9, 5, 6), (650, 700, 1, 599),
                                    (0, 0, 0, 600), (0, 700, 5, 5), (10, 3, 0, 600)])
def test_offset_bounds(threads, bounds):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    A.fill(-1)
    fill_offset(*bounds)
    want = np.full((700, 600), -1, np.int64)
    lo0, hi0, lo1, hi1 = bounds
    i, j = np.meshgrid(np.arange(lo0, max(hi0, lo0)), np.arange(lo1, max(hi1, lo1)),
                       indexing="ij")
    want[i, j] = 1000 * i + j + 7
    np.testing.assert_array_equal(A.to_numpy(), want)


@pytest.mark.parametrize("threads", THREADS)
def test_three_dims_grouped_and_struct_for(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    i, j, k = np.meshgrid(np.arange(5), np.arange(6), np.arange(7), indexing="ij")
    fill_3d()
    np.testing.assert_array_equal(B.to_numpy(), 100 * i + 10 * j + k)
    fill_grouped()
    np.testing.assert_array_equal(B.to_numpy(), i * 49 + j * 7 + k)
    fill_struct_for()
    a, b = np.meshgrid(np.arange(700), np.arange(600), indexing="ij")
    np.testing.assert_array_equal(A.to_numpy(), a * b - b)


def test_which_atomics_get_row_sums():
    kir, _ = row_and_column_sums.lower((700, 600))
    task = kir.tasks[0]
    sums = schedule.row_sums(task)
    from simrun.lang.ir.nodes import Atomic, walk
    targets = {s.field.name for s in walk(task.body) if isinstance(s, Atomic) and id(s) in sums}
    assert targets == {rows.name, counts.name}


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("shape", [(700, 600), (3, 5), (700, 1), (1, 600)])
def test_row_sums_exact(threads, shape):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    _, data = _integer_weights(sum(shape))
    rows.fill(0.5)
    cols.fill(0.0)
    counts.fill(0)
    _run(row_and_column_sums, shape, threads, full=(700, 600))
    n, m = shape
    sub = data[:n, :m]
    want_rows = np.full(700, 0.5)
    want_rows[:n] += sub.sum(axis=1)
    want_cols = np.zeros(600)
    want_cols[:m] -= 2.0 * sub.sum(axis=0)
    want_counts = np.zeros(700, np.int64)
    want_counts[:n] = (sub > 0).sum(axis=1)
    np.testing.assert_array_equal(rows.to_numpy(), want_rows)
    np.testing.assert_array_equal(cols.to_numpy(), want_cols)
    np.testing.assert_array_equal(counts.to_numpy(), want_counts)


def test_which_copies_are_component_major():
    task = vector_scatters.lower((700, 600))[0].tasks[0]
    chosen = schedule.private_scatters(task)
    assert {f.name for f in schedule.component_major(task, chosen)} == {vec.name, grid2.name}
    flat = row_and_column_sums.lower((700, 600))[0].tasks[0]
    assert schedule.component_major(flat, schedule.private_scatters(flat)) == []


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("shape", [(600, 600), (3, 5), (1, 600), (600, 1)])
def test_component_major_copies_exact(threads, shape):
    """Vector fields scattered along rows go through component-major copies, also on one
    thread; the merge puts every component back in place."""
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    rng, data = _integer_weights(7 + sum(shape))
    start = rng.integers(-5, 5, (700, 3)).astype(np.float64)
    vec.from_numpy(start)
    grid2.fill(0.25)
    _run(vector_scatters, shape, threads, full=(600, 600))
    n, m = shape
    sub = data[:n, :m]
    d = np.stack([sub, 2.0 * sub, -sub], axis=-1)
    want = start.copy()
    want[:n] += d.sum(axis=1)
    want[:m] -= 3.0 * d.sum(axis=0)
    want_grid = np.full((600, 4, 2), 0.25)
    for i in range(n):
        want_grid[:m, i % 4, 0] += sub[i]
        want_grid[:m, i % 4, 1] += 1.0
    np.testing.assert_array_equal(vec.to_numpy(), want)
    np.testing.assert_array_equal(grid2.to_numpy(), want_grid)


def test_random_numbers_follow_the_flat_index():
    """Each ndrange cell draws what the same flat iteration of a 1-D loop draws."""
    ti.init(arch=ti.cpu, random_seed=5)
    r2 = ti.field(ti.f64, shape=(40, 30))
    r1 = ti.field(ti.f64, shape=1200)

    @ti.kernel
    def draw2():
        for i, j in ti.ndrange(40, 30):
            r2[i, j] = ti.random()

    @ti.kernel
    def draw1():
        for k in range(1200):
            r1[k] = ti.random()

    draw2()
    first = r2.to_numpy().copy()
    ti.init(arch=ti.cpu, random_seed=5)
    draw1()
    np.testing.assert_array_equal(first.ravel(), r1.to_numpy())


def test_row_sum_index_checked_in_debug_mode():
    ti.init(arch=ti.cpu, debug=True)

    @ti.kernel
    def off_by_one(n: ti.i32):
        for i, _j in ti.ndrange(n, 10):
            rows[i + 1] += 1.0

    with pytest.raises(IndexError, match="rows"):
        off_by_one(700)
