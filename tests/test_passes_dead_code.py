"""passes/dead_code.py: golden IR, and results that would change if it removed too much."""


import numpy as np
import pytest
from golden_ir import check_kernel_golden

import simrun.lang as ti
from simrun.lang.autodiff.reverse import reverse_kernel
from simrun.lang.ir.nodes import Atomic, For, Random, StackPop, StackPush, walk
from simrun.lang.passes import dead_code

N = 6


@pytest.fixture(autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


def _statements(kir):
    return [s for t in kir.tasks for s in walk(t.body)]


def test_golden_dead_locals_results_and_loops():
    g = ti.field(ti.f64, shape=N)
    x = ti.field(ti.f64, shape=N)

    @ti.kernel
    def k(n: ti.i32):
        for i in range(N):
            unused = x[i] * 2.0  # noqa: F841  dead load feeding a dead assignment
            old = ti.atomic_add(g[i], x[i])  # noqa: F841  the atomic stays, its result goes
            t = 0.0
            for j in range(n):            # loop computing only a dead local: gone
                t += x[j]
            kept = x[(i + 1) % N]
            if kept > 0:
                g[i] += kept

    kir, _ = k.lower((3,))
    swept = dead_code.run(kir)
    check_kernel_golden("dead_code", swept)
    stmts = _statements(swept)
    assert not any(isinstance(s, For) for s in stmts)
    assert all(s.result is None for s in stmts if isinstance(s, Atomic))


def test_live_values_survive():
    """Everything a store, an atomic's used old value, a return or a branch reads stays."""
    g = ti.field(ti.i32, shape=N)
    seen = ti.field(ti.i32, shape=N)

    @ti.kernel
    def k() -> ti.i32:
        total = 0
        for i in range(N):
            old = ti.atomic_add(g[i % 2], 1)
            seen[i] = old
        for i in range(N):
            total += seen[i]
        return total

    kir, _ = k.lower(())
    swept = dead_code.run(kir)
    assert len(_statements(swept)) == len(_statements(kir))
    assert k() == sum(range(N // 2)) * 2
    assert sorted(seen.to_numpy().tolist()) == sorted(list(range(N // 2)) * 2)


def test_reverse_mode_forward_replay_removed():
    """The gradient of an inner-loop sum that the energy uses linearly (a pair energy) needs no
    forward replay of that loop; pushes and pops still pair up; the gradient still matches
    central differences. `c` uses its own sum nonlinearly: that replay stays."""
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    out = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i in range(N):
            acc = 0.0
            for j in range(N):
                d = x[i] - x[j]
                acc += ti.exp(-d * d) * ti.sin(x[j])
            out[None] += acc
        for i in range(N):
            c = 0.0
            for j in range(N):
                c += x[i] * x[j]
            out[None] += ti.sin(c)

    kir, _ = energy.lower(())
    rev = reverse_kernel(kir)
    swept = dead_code.run(rev)
    loops = lambda k: sum(isinstance(s, For) for s in _statements(k))  # noqa: E731
    assert loops(swept) == loops(rev) - 1
    for v in {s.var for s in _statements(swept) if isinstance(s, (StackPush, StackPop))}:
        pushes = sum(isinstance(s, StackPush) and s.var is v for s in _statements(swept))
        pops = sum(isinstance(s, StackPop) and s.var is v for s in _statements(swept))
        assert pushes == pops

    xs = np.linspace(-1.0, 1.3, N)

    def f(v):
        x.from_numpy(v)
        out[None] = 0.0
        energy()
        return out[None]

    x.from_numpy(xs)
    out[None] = 0.0
    x.grad.fill(0.0)
    out.grad[None] = 1.0
    energy()
    energy.grad()
    got = x.grad.to_numpy()
    h = 1e-6
    want = [(f(xs + h * e) - f(xs - h * e)) / (2 * h) for e in np.eye(N)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_random_draws_stay():
    """An unused draw still advances the draw counter: removing it would change later draws."""
    r = ti.field(ti.f64, shape=N)

    @ti.kernel
    def draw():
        for i in range(N):
            skipped = ti.random()  # noqa: F841
            r[i] = ti.random()

    kir, _ = draw.lower(())
    draws = lambda k: sum(isinstance(s, Random) for s in _statements(k))  # noqa: E731
    assert draws(dead_code.run(kir)) == draws(kir) == 2
