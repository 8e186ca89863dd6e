"""Taichi programs and tests that now run unchanged (issue 21): gradients placed by hand,
ti.grouped over a 0-D field, grad_replaced methods, and the Taichi names Taichi's own tests
use (ti.extension, ti.lang.impl, enums, exception classes). Values as Taichi 1.7.4 gives."""

import math

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.fields import grad_of


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


def test_gradients_placed_by_hand():
    x, y, loss = ti.field(ti.f64), ti.field(ti.f64), ti.field(ti.f64)
    ti.root.dense(ti.i, 4).place(x, x.grad)  # Taichi's `place(x, x.grad)`
    ti.root.dense(ti.i, 4).place(y)
    ti.root.place(loss, loss.grad)
    assert grad_of(y) is None  # placed without a gradient: y.grad is only a handle
    with pytest.raises(RuntimeError, match="has not been placed"):
        y.grad[0]

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


def test_ndarray_with_gradients_under_kernel_grad_and_tape():
    n = 10

    @ti.kernel
    def compute_sum(a: ti.types.ndarray(), b: ti.types.ndarray(), p: ti.types.ndarray()):
        for i in range(n):
            ret = 1.0
            for _ in range(b[i]):
                ret = ret * a[i]
            p[i] = ret

    a = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    b = ti.ndarray(ti.i32, shape=n)
    p = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    for i in range(n):
        a[i], b[i] = 3, i
    compute_sum(a, b, p)
    assert p.to_numpy().tolist() == [3.0**i for i in range(n)]
    p.grad.fill(1.0)
    compute_sum.grad(a, b, p)
    assert a.grad.to_numpy().tolist() == [i * 3.0 ** (i - 1) if i else 0.0 for i in range(n)]

    loss = ti.ndarray(ti.f64, shape=1, needs_grad=True)  # Taichi takes a one-element loss

    @ti.kernel
    def total(p: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in p:
            loss[0] += p[i]

    with ti.ad.Tape(loss=loss):
        compute_sum(a, b, p)
        total(p, loss)
    assert a.grad.to_numpy().tolist() == [i * 3.0 ** (i - 1) if i else 0.0 for i in range(n)]


def test_vector_ndarray_and_a_parameter_without_gradient():
    a = ti.ndarray(ti.math.vec2, shape=4, needs_grad=True)
    v = ti.Vector.ndarray(3, ti.f64, shape=2)
    assert a.shape == (4,) and a.element_shape == (2,) and v.element_shape == (3,)
    x = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    y = ti.ndarray(ti.f64, shape=1, needs_grad=True)

    @ti.kernel
    def k(x: ti.types.ndarray(needs_grad=False), y: ti.types.ndarray()):
        for i in range(3):
            y[0] += x[i] * 2.0

    k(x, y)
    y.grad.fill(1.0)
    k.grad(x, y)
    assert x.grad.to_numpy().tolist() == [0.0, 0.0, 0.0]  # as Taichi: the parameter opts out


def test_ndarray_refusals_are_taichis():
    with pytest.raises(RuntimeError, match="i32 is not supported for ndarray"):
        ti.ndarray(ti.i32, shape=3, needs_grad=True)
    a = ti.ndarray(ti.f64, shape=4, needs_grad=True)
    b = ti.ndarray(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def reads_grad(x: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in x:
            b[None] += x.grad[i]

    a.grad.fill(2.0)
    reads_grad(a, b)
    assert b[None] == 8.0
    with pytest.raises(RuntimeError, match="Cannot automatically differentiate through a grad"):
        reads_grad.grad(a, b)


def test_ti_math_and_block_local():
    out = ti.field(ti.f64, shape=6)
    x = ti.field(ti.f64, shape=4)

    @ti.kernel
    def k(z: ti.math.vec2):
        ti.block_local(x)
        u = ti.math.vec3(3.0, 0.0, 4.0)
        out[0] = ti.math.length(u)
        out[1] = ti.math.clamp(7.0, 0.0, 2.0)
        out[2] = ti.math.mix(1.0, 3.0, 0.25)
        out[3] = ti.math.dot(z, z)
        out[4] = ti.math.smoothstep(0.0, 1.0, 0.5)
        out[5] = ti.math.normalize(u)[2]

    k(ti.math.vec2([2.0, 3.0]))
    assert out.to_numpy().tolist() == [5.0, 2.0, 1.5, 13.0, 0.5, 0.8]
    assert ti.math.pi == math.pi


def test_tape_validation_reports_what_taichi_reports():
    from simrun.lang.lang.enums import AutodiffMode

    ti.init(arch=ti.cpu, debug=True)
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    b = ti.field(ti.f32, shape=(), needs_grad=True)
    y = ti.field(ti.f32, shape=())

    @ti.kernel
    def breaks_rule():
        loss[None] = x[1] * b[None]
        b[None] += 100

    @ti.kernel
    def keeps_rule():
        loss[None] = x[1] * b[None]

    @ti.ad.grad_replaced
    def replaced():
        breaks_rule()

    @ti.ad.grad_for(replaced)
    def replaced_grad():
        pass

    x.fill(1.0)
    b[None] = 10.0
    with pytest.raises(ti.TaichiAssertionError, match="global data access rule"):
        with ti.ad.Tape(loss=loss, validation=True):
            breaks_rule()
    with ti.ad.Tape(loss=loss, validation=True) as tape:
        keeps_rule()
        keeps_rule()
        assert keeps_rule.autodiff_mode == AutodiffMode.VALIDATION
        assert len(tape.calls) == 2 and len(tape.modes) == 2
    assert keeps_rule.autodiff_mode == AutodiffMode.NONE
    assert x.snode.ptr.has_adjoint_checkbit() and not y.snode.ptr.has_adjoint_checkbit()
    with ti.ad.Tape(loss=loss, validation=True):
        replaced()  # a hand-written gradient is not checked, as in Taichi
    ti.init(arch=ti.cpu, debug=False)
    with pytest.warns(UserWarning, match="Debug mode is disabled"):
        with ti.ad.Tape(loss=loss, validation=True):
            breaks_rule()  # without debug: warned, not checked; the gradient is still right


def test_difftaichi_helpers():
    """What DiffTaichi's examples call: rgb_to_hex, ti.Vector.normalized(v, eps),
    ti.randn in kernels, a ti.func returning a nested list, ndarray(element_dim=1),
    ti.clear_all_gradients."""
    assert ti.rgb_to_hex((1.0, 0.5, 0.0)) == 0xFF7F00
    np.testing.assert_array_equal(ti.rgb_to_hex((np.array([0.0, 1.0]), 0.0, 0.0)),
                                  [0, 0xFF0000])
    n = 20000
    draws = ti.field(ti.f64, shape=n)
    out = ti.Vector.field(3, ti.f64, shape=4)
    m = ti.Matrix.field(3, 3, ti.f64, shape=())

    @ti.func
    def zero_matrix():
        return [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]

    @ti.kernel
    def k(x_: ti.types.ndarray(element_dim=1)):
        for i in draws:
            draws[i] = ti.randn()
        for i in out:
            out[i] = ti.Vector.normalized(x_[i], 1e-6)
        c = ti.Matrix(zero_matrix())
        c[0, 1] = 2.0
        m[None] = c

    x = np.array([[3.0, 0.0, 4.0]] * 4)
    k(x)
    d = draws.to_numpy()
    # mean and variance of a standard normal sample, within 5 standard errors
    assert abs(d.mean()) < 5 / np.sqrt(n) and abs(d.var() - 1) < 5 * np.sqrt(2 / n)
    # Taichi's normalized(eps) is v / (|v| + eps)
    np.testing.assert_allclose(out.to_numpy(), [[3 / 5.000001, 0.0, 4 / 5.000001]] * 4,
                               rtol=1e-14)
    assert m.to_numpy()[0, 1] == 2.0 and m.to_numpy().sum() == 2.0
    g = ti.field(ti.f64, shape=2, needs_grad=True)
    g.grad.fill(3.0)
    ti.clear_all_gradients()
    assert g.grad.to_numpy().tolist() == [0.0, 0.0]


def test_runtime_index_into_vectors_and_matrices():
    """Taichi's test_matrix_non_constant_index: m[i][j, k] with j, k loop variables, loaded
    and stored, differentiated; and a local vector indexed by a kernel argument."""
    m = ti.Matrix.field(2, 2, ti.f64, 5, needs_grad=True)
    n = ti.Matrix.field(2, 2, ti.f64, 5, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)
    n.from_numpy(np.arange(20.0).reshape(5, 2, 2))

    @ti.kernel
    def scale():
        for i in range(5):
            for j, k in ti.ndrange(2, 2):
                m[i][j, k] = (j + 1) * (k + 1) * n[i][j, k] ** 2
                loss[None] += m[i][j, k]

    scale()
    weights = np.array([[1.0, 2.0], [2.0, 4.0]])
    np.testing.assert_array_equal(m.to_numpy(), weights * n.to_numpy() ** 2)
    loss.grad[None] = 1.0
    scale.grad()
    np.testing.assert_array_equal(n.grad.to_numpy(), 2 * weights * n.to_numpy())

    @ti.kernel
    def pick(k: ti.i32) -> ti.f64:
        a = ti.Vector([1.0, 2.0, 3.0])
        a[k] = 10.0 * a[k]
        return a[0] + 100 * a[1] + 10000 * a[2]

    assert [pick(k) for k in range(3)] == [30210.0, 32001.0, 300201.0]
