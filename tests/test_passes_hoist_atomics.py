"""passes/hoist_atomics.py: golden IR, and results that would change if it hoisted wrongly."""


import numpy as np
import pytest
from golden_ir import check_kernel_golden

import simrun.lang as ti
from simrun.lang.passes import hoist_atomics


@pytest.fixture(autouse=True)
def _init():
    ti.init(default_fp=ti.f32)


def test_golden_invariant_and_variant_targets():
    g = ti.field(ti.f32, shape=8)
    x = ti.field(ti.f32, shape=8)

    @ti.kernel
    def scatter(n: ti.i32):
        for i in range(8):
            for j in range(n):
                g[i] += x[j]        # invariant target: one local sum, one atomic after
                g[j] -= x[i]        # varies with j: stays atomic
                if x[j] > 0:
                    g[i] -= 2 * x[j]  # same target under an if: same local sum

    kir, _ = scatter.lower((3,))
    check_kernel_golden("hoist_atomics", hoist_atomics.run(kir))


def test_results_match_numpy():
    g = ti.field(ti.f64, shape=8)
    x = ti.field(ti.f64, shape=8)
    xs = np.linspace(-1, 1, 8)
    x.from_numpy(xs)

    @ti.kernel
    def scatter(n: ti.i32):
        for i in range(8):
            for j in range(n):
                g[i] += x[j]
                g[j] -= x[i]
                if x[j] > 0:
                    g[i] -= 2 * x[j]

    scatter(5)
    want = np.zeros(8)
    for i in range(8):
        for j in range(5):
            want[i] += xs[j]
            want[j] -= xs[i]
            if xs[j] > 0:
                want[i] -= 2 * xs[j]
    np.testing.assert_allclose(g.to_numpy(), want, rtol=1e-12, atol=1e-12)


def test_a_field_read_in_the_loop_is_not_hoisted():
    f = ti.field(ti.i32, shape=4)
    seen = ti.field(ti.i32, shape=4)

    @ti.kernel
    def count():
        for i in range(4):
            for _ in range(i + 2):
                f[i] += 1
                seen[i] += f[i]  # reads the running count: 1 + 2 + ... + (i + 2)

    count()
    k = np.arange(4) + 2
    np.testing.assert_array_equal(seen.to_numpy(), k * (k + 1) // 2)


def test_used_old_values_are_not_hoisted():
    f = ti.field(ti.i32, shape=3)
    last = ti.field(ti.i32, shape=3)

    @ti.kernel
    def tickets():
        for i in range(3):
            for _ in range(4):
                last[i] = ti.atomic_add(f[i], 1)

    tickets()
    np.testing.assert_array_equal(last.to_numpy(), [3, 3, 3])


def test_an_empty_loop_touches_nothing_in_debug_mode():
    ti.init(debug=True)
    f = ti.field(ti.f32, shape=4)

    @ti.kernel
    def maybe(n: ti.i32, k: ti.i32):
        for i in range(4):
            for _ in range(n):
                f[i + k] += 1.0

    maybe(0, 100)  # index 100 is out of range, but no iteration runs
    assert f.to_numpy().sum() == 0
    with pytest.raises(IndexError):
        maybe(1, 100)
