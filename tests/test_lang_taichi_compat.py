"""Taichi programs and tests that now run unchanged (issue 21): gradients placed by hand,
ti.grouped over a 0-D field, grad_replaced methods, and the Taichi names Taichi's own tests
use (ti.extension, ti.lang.impl, enums, exception classes). Values as Taichi 1.7.4 gives."""

import math

import numpy as np
import pytest

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


def test_gradients_placed_by_hand():
    x, y, loss = ti.field(ti.f64), ti.field(ti.f64), ti.field(ti.f64)
    ti.root.dense(ti.i, 4).place(x, x.grad)  # Taichi's `place(x, x.grad)`
    ti.root.dense(ti.i, 4).place(y)
    ti.root.place(loss, loss.grad)
    assert y.grad is None  # placed without a gradient

    @ti.kernel
    def total():
        for i in x:
            loss[None] += x[i] ** 3 + y[i]

    x.from_numpy(np.arange(4.0))
    with ti.ad.Tape(loss):
        total()
    np.testing.assert_array_equal(x.grad.to_numpy(), 3 * np.arange(4.0) ** 2)


def test_gradient_placed_before_its_field():
    x = ti.field(ti.f64)
    ti.root.dense(ti.i, 3).place(x.grad)
    ti.root.dense(ti.i, 3).place(x)
    assert x.grad.shape == (3,)


def test_unplaced_gradient_in_a_kernel_is_taichis_error():
    y = ti.field(ti.f64, shape=(), needs_grad=True)
    x = ti.field(ti.f64, shape=())

    @ti.kernel
    def uses_grad(x: ti.template()):
        y[None] = x.grad[None] * 2

    with pytest.raises(ti.TaichiCompilationError,
                       match="Gradient x.grad has not been placed, check whether "
                             "`needs_grad=True`"):
        uses_grad(x)


@pytest.mark.parametrize("serial", [False, True])
def test_grouped_loop_over_a_0d_field_runs_once(serial):
    x, y = ti.field(ti.f64), ti.field(ti.f64)
    ti.root.place(x, x.grad, y, y.grad)

    @ti.kernel
    def parallel():
        for i in ti.grouped(x):
            y[i] += ti.sin(x[i])

    @ti.kernel
    def nested():
        for _ in range(1):
            for i in ti.grouped(x):
                y[i] += ti.sin(x[i])

    x[None] = 0.234
    with ti.ad.Tape(loss=y):
        (nested if serial else parallel)()
    assert y[None] == pytest.approx(math.sin(0.234), rel=1e-15)
    assert x.grad[None] == pytest.approx(math.cos(0.234), rel=1e-15)


def test_grad_replaced_methods_of_a_data_oriented_class():
    @ti.data_oriented
    class A:
        def __init__(self):
            self.x = ti.field(ti.f64, shape=8, needs_grad=True)
            self.total = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def func(self, mul: ti.f64):
            for i in range(8):
                ti.atomic_add(self.total[None], self.x[i] * mul)

        @ti.ad.grad_replaced
        def forward(self, mul):
            self.func(mul)
            self.func(mul)

        @ti.ad.grad_for(forward)
        def backward(self, mul):
            self.func.grad(mul)  # deliberately one launch: Taichi's test expects 4, not 8

    a = A()
    with ti.ad.Tape(loss=a.total):
        a.forward(4)
    assert a.x.grad[0] == 4


def test_grad_for_a_kernel_is_a_runtime_error():
    @ti.kernel
    def func(mul: ti.f64):
        pass

    with pytest.raises(RuntimeError, match="grad_replaced"):
        @ti.ad.grad_for(func)
        def backward(mul):
            pass


def test_taichi_names_that_taichis_tests_use():
    from simrun.lang.lang.enums import SNodeGradType
    from simrun.lang.lang.exception import TaichiRuntimeError
    from simrun.lang.lang.misc import get_host_arch_list

    assert ti.lang.impl.current_cfg().default_fp == ti.f64
    assert ti.lang.impl.current_cfg().arch == ti.cpu
    assert get_host_arch_list() == [ti.cpu]
    assert ti.extension.adstack and ti.gles and ti.amdgpu
    x = ti.field(ti.f64, shape=2, needs_grad=True, needs_dual=True)
    assert x.snode.ptr.get_snode_grad_type() == SNodeGradType.PRIMAL
    assert x.grad.snode.ptr.get_snode_grad_type() == SNodeGradType.ADJOINT
    assert x.dual.snode.ptr.get_snode_grad_type() == SNodeGradType.DUAL
    assert TaichiRuntimeError is RuntimeError and ti.TaichiAssertionError is AssertionError
    assert issubclass(ti.AutodiffError, ti.TaichiCompilationError)
