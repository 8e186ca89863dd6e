"""autodiff/forward.py's `varied` (activity analysis): tangents only from the seeded fields."""

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.autodiff.tape import access_of

N = 12


@pytest.fixture(autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)


def test_seeded_x_alone_equals_every_tangent_with_the_others_zero():
    """y = sum m_i sin(x_i) w; the tangent along x: with varied=(x,) the same numbers as the
    full forward mode when m.dual = w.dual = 0, and m's and w's tangents are never read."""
    x = ti.field(ti.f64, shape=N, needs_dual=True)
    m = ti.field(ti.f64, shape=N, needs_dual=True)
    w = ti.field(ti.f64, shape=(), needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k(x: ti.template(), m: ti.template(), w: ti.template(), y: ti.template()):
        for i in x:
            y[None] += m[i] * ti.sin(x[i]) * w[None]

    rng = np.random.default_rng(2)
    x.from_numpy(rng.random(N))
    m.from_numpy(rng.random(N))
    w[None] = 1.7
    xdot = rng.normal(size=N)

    def tangent(varied, mdot=0.0):
        y.fill(0)
        y.dual.fill(0)
        x.dual.from_numpy(xdot)
        m.dual.fill(mdot)
        compiled, flat, _ = k.prepare((x, m, w, y), "fwd", (), varied)
        compiled.launch(flat)
        return float(y.dual[None]), compiled

    full, _ = tangent(None)
    lean, compiled = tangent((x,))
    exact = float(np.sum(m.to_numpy() * np.cos(x.to_numpy()) * xdot) * 1.7)
    assert lean == pytest.approx(exact, rel=1e-14) and full == pytest.approx(lean, rel=1e-14)
    assert m.dual not in access_of(compiled).reads and w.dual not in access_of(compiled).reads
    # the contract: a seed on a field outside `varied` is not seen
    assert tangent((x,), mdot=1.0)[0] == lean and tangent(None, mdot=1.0)[0] != full


def test_a_field_the_kernel_writes_then_reads_keeps_its_tangent():
    """b = 2 x in one loop, y = sum b^2 in the next: b is not seeded, but its tangent comes
    from x inside the kernel."""
    x = ti.field(ti.f64, shape=N, needs_dual=True)
    b = ti.field(ti.f64, shape=N, needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k(x: ti.template(), b: ti.template(), y: ti.template()):
        for i in x:
            b[i] = 2.0 * x[i]
        for i in x:
            y[None] += b[i] * b[i]

    x.from_numpy(np.arange(N, dtype=float))
    x.dual.fill(1.0)
    b.dual.fill(0)
    y.dual.fill(0)
    compiled, flat, _ = k.prepare((x, b, y), "fwd", (), (x,))
    compiled.launch(flat)
    assert float(y.dual[None]) == pytest.approx(8.0 * np.arange(N).sum(), rel=1e-14)
