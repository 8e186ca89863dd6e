"""Fields a range task touches only at each iteration's own index (schedule.owned_fields)
take plain adds instead of atomics. The own index may stand at any position, beside other
indices, as long as it stands at the same position in every access of the field: DiffTaichi
MPM's `x[f, p]`, `x[f + 1, p]` and their gradients' `x.grad[f, p] += ...`, which were
compare-and-swap adds (2 threads: p2g's gradient 0.76 -> 0.18 ms a launch)."""

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.codegen.schedule import owned_fields

P = 6000
x = ti.field(ti.f64, shape=(4, P), needs_grad=True)
y = ti.field(ti.f64, shape=(4, P), needs_grad=True)
z = ti.field(ti.f64, shape=(P, 4), needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def step(f: ti.i32):
    for p in range(P):
        x[f + 1, p] = x[f, p] * x[f, p] + ti.sin(y[f, p])


@ti.kernel
def crossed(f: ti.i32):
    for p in range(P):  # z at [p, f] and at [f, p]: the own index moves, so z is shared
        z[p, f] += x[f, p]
        z[f % 4, p % 4] += 1.0


@ti.kernel
def total(f: ti.i32):
    for p in range(P):
        loss[None] += x[f, p]


def _fields(kernel, *args, mode="primal"):
    compiled, _, _ = kernel.prepare(args, mode)
    task = next(t for t in compiled.kir.tasks if t.kind == "range")
    return {fid for fid in owned_fields(task)}


def test_the_own_index_beside_a_time_index_is_owned():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    assert _fields(step, 0) == {id(x), id(y)}
    assert id(x.grad) in _fields(step, 0, mode="reverse")


def test_an_own_index_at_two_positions_is_shared():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    assert _fields(crossed, 0) == {id(x)}


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_time_stepped_gradient_is_exact(threads):
    """d loss / d x[0, p] through two steps of x -> x^2 + sin(y), against the closed form."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=threads)
    rng = np.random.default_rng(threads)
    x0, y0 = rng.uniform(-1, 1, (4, P)), rng.uniform(-1, 1, (4, P))
    x.from_numpy(x0)
    y.from_numpy(y0)
    with ti.ad.Tape(loss=loss):
        step(0)
        step(1)
        total(2)
    x1 = x0[0] ** 2 + np.sin(y0[0])
    np.testing.assert_allclose(x.grad.to_numpy()[0], 4 * x1 * x0[0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(y.grad.to_numpy()[1], np.cos(y0[1]), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(y.grad.to_numpy()[0], 2 * x1 * np.cos(y0[0]), rtol=1e-13,
                               atol=1e-13)


v = ti.Vector.field(3, dtype=ti.f64, shape=P)
w = ti.Vector.field(3, dtype=ti.f64, shape=P)


@ti.func
def wrap(v: ti.template(), k):  # the func's `k` is a copy of the loop's index
    for c in ti.static(range(3)):
        v[k][c] = v[k][c] - ti.floor(v[k][c])


@ti.func
def bump(w: ti.template(), k):
    j = k + 1  # not the own index: another iteration's element
    w[j % P] += 1.0


@ti.kernel
def drift_and_wrap(dt: ti.f64):
    for i in v:
        v[i] += dt * w[i]
        wrap(v, i)


@ti.kernel
def bump_neighbour():
    for i in w:
        bump(w, i)


def test_a_funcs_copy_of_the_own_index_is_owned():
    """A ti.func gets the loop index as a parameter, a local copy of it: its accesses are
    still at the iteration's own index (the stepper's periodic wall after its drift: 2
    threads made compare-and-swap adds of it, 2.2x slower than one thread); an index
    computed from it is not."""
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    assert _fields(drift_and_wrap, 0.1) == {id(v), id(w)}
    assert _fields(bump_neighbour) == set()
    rng = np.random.default_rng(0)
    V, W = rng.uniform(-3, 3, (P, 3)), rng.uniform(-1, 1, (P, 3))
    v.from_numpy(V)
    w.from_numpy(W)
    drift_and_wrap(0.1)
    got, a = v.to_numpy(), V + 0.1 * W  # (fast math may fuse the drift: a few ulps, and
    assert ((got >= 0) & (got < 1)).all()  # a value on an integer may land either side)
    off = got - (a - np.floor(a))
    np.testing.assert_allclose(off - np.round(off), 0.0, atol=16 * np.finfo(float).eps)
