"""passes/unread_outputs.py: golden IR, the values kept, and the writes it must not drop."""

import numpy as np
import pytest
from golden_ir import check_kernel_golden

import simrun.lang as ti
from simrun.lang.autodiff.tape import access_of
from simrun.lang.ir.nodes import Atomic, Store, walk
from simrun.lang.passes import dead_code, unread_outputs

N = 16


@pytest.fixture(autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)


def _gravity():
    x = ti.Vector.field(2, ti.f64, shape=N, needs_grad=True, needs_dual=True)
    m = ti.field(ti.f64, shape=N, needs_grad=True, needs_dual=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    for f in (x, m, U):
        f.grad._make_dual()

    @ti.kernel
    def gravity(x: ti.template(), m: ti.template(), U: ti.template(), eps: float):
        for i, j in ti.ndrange(x.shape[0], x.shape[0]):
            r = x[i] - x[j]
            U[None] += -m[i] * m[j] / r.norm(eps)

    rng = np.random.default_rng(3)
    x.from_numpy(rng.random((N, 2)))
    m.from_numpy(1 + rng.random(N))
    return gravity, x, m, U


def _hvp(kernel, args, x, m, U, lam, unread=()):
    """x.grad.dual = H lam and m.grad.dual = d(dU/dx . lam)/dm by one launch."""
    for f in (x.grad, m.grad, x.grad.dual, m.grad.dual, m.dual, U.grad.dual):
        f.fill(0)
    x.dual.from_numpy(lam)
    U.grad[None] = 1.0
    compiled, flat, _ = kernel.prepare(args, "fwd_reverse", unread)
    compiled.launch(flat)
    return compiled, x.grad.dual.to_numpy(), m.grad.dual.to_numpy()


def test_golden_the_tangents_alone():
    gravity, x, m, U = _gravity()
    from simrun.lang.autodiff import transform

    kir, _ = gravity.lower((x, m, U, 0.01))
    full = dead_code.run(transform(kir, "fwd_reverse", "gravity"))
    lean = dead_code.run(unread_outputs.run(full, [x.grad, m.grad, m.grad.dual]))
    check_kernel_golden("unread_outputs", lean)
    written = {s.field for t in lean.tasks for s in walk(t.body) if isinstance(s, (Store,
                                                                                    Atomic))}
    assert x.grad.dual in written and not written & {x.grad, m.grad, m.grad.dual}
    size = sum(1 for t in full.tasks for _ in walk(t.body))
    assert sum(1 for t in lean.tasks for _ in walk(t.body)) < size


def test_the_kept_tangents_equal_the_full_kernels_and_the_closed_form():
    """H lam of U = -sum m_i m_j / sqrt(|r|^2 + eps) by the lean variant: equal to the full
    variant's to rounding, and to central differences of the closed-form gradient."""
    gravity, x, m, U = _gravity()
    args = (x, m, U, 0.01)
    lam = np.random.default_rng(4).normal(size=(N, 2))
    _, h_full, mixed_full = _hvp(gravity, args, x, m, U, lam)
    x.grad.fill(7.0)  # left alone by the lean launch
    lean, h_lean, mixed_lean = _hvp(gravity, args, x, m, U, lam, [x.grad, m.grad])
    assert x.grad not in access_of(lean).writes and m.grad not in access_of(lean).writes
    assert np.all(x.grad.to_numpy() == 0.0)  # the fill above, then _hvp's clear: no writes
    scale = np.abs(h_full).max()
    np.testing.assert_allclose(h_lean, h_full, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(mixed_lean, mixed_full, rtol=0,
                               atol=1e-13 * np.abs(mixed_full).max())

    xs, ms = x.to_numpy(), m.to_numpy()

    def grad(pos):
        d = pos[:, None, :] - pos[None, :, :]
        s = (np.sum(d * d, axis=-1) + 0.01) ** 1.5
        return 2 * np.sum((ms[:, None] * ms[None, :] / s)[..., None] * d, axis=1)

    h = 1e-5  # central differences: error ~h^2 * f''' ~ 1e-10 of the scale here
    fd = (grad(xs + h * lam) - grad(xs - h * lam)) / (2 * h)
    np.testing.assert_allclose(h_lean, fd, rtol=0, atol=1e-6 * scale)


def test_a_field_the_kernel_reads_keeps_its_writes():
    """Only writes nobody reads go: a field the kernel also loads keeps them."""
    a = ti.field(ti.f64, shape=N)
    b = ti.field(ti.f64, shape=N)

    @ti.kernel
    def k():
        for i in range(N):
            a[i] = 2.0 * i
        for i in range(N):
            b[i] = a[i] + 1.0

    kir, _ = k.lower(())
    assert unread_outputs.run(kir, [a]) is kir  # a is read: nothing to drop
    dropped = unread_outputs.run(kir, [b])
    assert b not in {s.field for t in dropped.tasks for s in walk(t.body)
                     if isinstance(s, Store)}
    compiled, flat, _ = k.prepare((), "primal", [b])
    b.fill(-1.0)
    compiled.launch(flat)
    assert np.all(b.to_numpy() == -1.0) and np.array_equal(a.to_numpy(), 2.0 * np.arange(N))
