"""Reverse kernels load dU/dU (a 0-D gradient the task never writes) once per task, not in
the pair loop under the cutoff's branch (autodiff/seeds.py); one they write stays put."""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.lang import pipeline
from simrun.lang.ir.nodes import For, If, Load

N = 16


@ti.kernel
def cut_pairs(x: ti.template(), U: ti.template()):
    for i in range(N):
        for j in range(i + 1, N):
            d = x[j] - x[i]
            if d * d < 0.25:
                U[None] += d * d * d


@ti.kernel
def overwrites(x: ti.template(), U: ti.template()):
    """U = x[1]^2: the last store wins, and only its reversal takes dU/dU."""
    for i in range(1):
        for k in range(2):
            U[None] = x[k] * x[k] + i


def _grad_loads(body, depth=0):
    """(depth, load) of every load of a gradient field; depth counts enclosing loops."""
    for s in body:
        if isinstance(s, Load) and getattr(s.field, "role", "") == "grad":
            yield depth, s
        elif isinstance(s, If):
            yield from _grad_loads(s.then + s.orelse, depth)
        elif isinstance(s, For):
            yield from _grad_loads(s.body, depth + 1)


def test_seed_loaded_once_outside_the_pair_loop_and_gradient_exact():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True)
    x_np = np.random.default_rng(1).random(N)
    x.from_numpy(x_np)
    for mode in ("reverse", "value_reverse"):
        kir = pipeline.run(cut_pairs.lower((x, U))[0], mode, "cut_pairs")
        loads = [(d, s) for t in kir.tasks for d, s in _grad_loads(t.body)]
        assert [d for d, s in loads if s.field is U.grad] == [0], mode
    with ti.ad.Tape(loss=U):
        cut_pairs(x, U)
    d = x_np[None, :] - x_np[:, None]
    near = np.triu(d * d < 0.25, 1)
    want = -(3 * d * d * near).sum(1) + (3 * d * d * near).sum(0)
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-13, atol=1e-13)


def test_a_gradient_the_task_writes_is_read_where_it_was():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=2, needs_grad=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True)
    kir = pipeline.run(overwrites.lower((x, U))[0], "reverse", "overwrites")
    loads = [(d, s) for t in kir.tasks for d, s in _grad_loads(t.body) if s.field is U.grad]
    assert [d for d, _ in loads] == [1]  # in the loop, before each store's U.grad = 0
    x.from_numpy(np.array([3.0, 1.0]))
    with ti.ad.Tape(loss=U):
        overwrites(x, U)
    np.testing.assert_array_equal(x.grad.to_numpy(), [0.0, 2.0])
