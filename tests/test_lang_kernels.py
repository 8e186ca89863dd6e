"""Kernels: scalar / template / ndarray arguments, returns, ti.func, data_oriented classes."""

import numpy as np
import pytest

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


# ---------------------------------------------------------------- scalar arguments and returns
@ti.kernel
def add_f32(a: ti.f32, b: ti.f32) -> ti.f32:
    return a + b


@ti.kernel
def add_f64(a: ti.f64, b: ti.f64) -> ti.f64:
    return a + b


@ti.kernel
def add_i32(a: ti.i32, b: ti.i32) -> ti.i32:
    return a + b


@ti.kernel
def add_i64(a: ti.i64, b: ti.i64) -> ti.i64:
    return a + b


def test_scalar_args_f32():
    r = add_f32(0.1, 0.2)
    assert isinstance(r, float)
    assert r == float(np.float32(0.1) + np.float32(0.2))
    assert add_f32(-1.5, 0.25) == -1.25


def test_scalar_args_f64_keep_precision():
    assert add_f64(0.1, 0.2) == 0.1 + 0.2
    assert add_f64(1e300, 1e300) == 2e300


def test_scalar_args_i32():
    r = add_i32(2_000_000_000, 200_000_000)
    assert isinstance(r, int)
    assert r == 2_200_000_000 - 2**32  # i32 wraps
    assert add_i32(-7, 3) == -4


def test_scalar_args_i64():
    assert add_i64(2**40, 3) == 2**40 + 3
    assert add_i64(-(2**62), -(2**62)) == -(2**63)


def test_scalar_arg_converted_to_annotation():
    assert add_i32(3.9, 1) == 4  # float passed to i32 argument: truncated
    assert add_f32(3, 4) == 7.0


def test_kwargs_call():
    assert add_f64(b=2.0, a=1.0) == 3.0


def test_wrong_argument_count_raises():
    with pytest.raises(TypeError):
        add_f32(1.0)


@ti.kernel
def ret_vec(a: ti.f32) -> ti.types.vector(3, ti.f32):
    return ti.Vector([a, a * 2, a * 3])


@ti.kernel
def ret_mat(a: ti.f64) -> ti.types.matrix(2, 2, ti.f64):
    return ti.Matrix([[a, 1.0], [2.0, a * a]])


@ti.kernel
def ret_int_from_float(a: ti.f32) -> ti.i32:
    return a * 2


def test_vector_return():
    v = ret_vec(1.5)
    np.testing.assert_array_equal(np.asarray(v.to_numpy()), [1.5, 3.0, 4.5])
    assert v[2] == 4.5


def test_matrix_return():
    m = ret_mat(3.0)
    np.testing.assert_array_equal(m.to_numpy(), [[3.0, 1.0], [2.0, 9.0]])


def test_return_cast_to_annotation():
    assert ret_int_from_float(1.75) == 3


@ti.kernel
def ret_u32(a: ti.u32) -> ti.u32:
    return a * 2 + 1


@ti.kernel
def ret_bool(a: ti.f32, b: ti.f32) -> ti.i32:
    return a > b


def test_unsigned_and_comparison_returns():
    assert ret_u32(2**31) == 1  # wraps modulo 2**32
    assert ret_u32(5) == 11
    assert ret_bool(2.0, 1.0) == 1 and ret_bool(1.0, 2.0) == 0


@ti.kernel
def vec_arg(v: ti.types.vector(3, ti.f32)) -> ti.f32:
    return v.dot(v)


def test_vector_argument():
    assert vec_arg(ti.Vector([1.0, 2.0, 3.0])) == 14.0
    assert vec_arg([2.0, 0.0, 1.0]) == 5.0


# ---------------------------------------------------------------- template arguments
@ti.kernel
def tmpl_fill(f: ti.template(), val: ti.template()):
    for i in f:
        f[i] = val + i


@ti.kernel
def tmpl_static_n(n: ti.template()) -> ti.i32:
    s = 0
    for k in ti.static(range(n)):
        s += k * k
    return s


def test_template_field_args_specialise():
    a = ti.field(ti.f32, shape=4)
    b = ti.field(ti.i32, shape=6)
    tmpl_fill(a, 1.5)
    tmpl_fill(b, 7)
    np.testing.assert_array_equal(a.to_numpy(), 1.5 + np.arange(4))
    np.testing.assert_array_equal(b.to_numpy(), 7 + np.arange(6))
    tmpl_fill(b, 10)  # a different Python int specialises again
    np.testing.assert_array_equal(b.to_numpy(), 10 + np.arange(6))


def test_template_python_float():
    f = ti.field(ti.f64, shape=2)
    tmpl_fill(f, 0.25)
    np.testing.assert_array_equal(f.to_numpy(), [0.25, 1.25])


@pytest.mark.parametrize("n", [1, 4, 9])
def test_template_python_int(n):
    assert tmpl_static_n(n) == sum(k * k for k in range(n))


# ---------------------------------------------------------------- ndarray arguments
@ti.kernel
def nd_saxpy(x: ti.types.ndarray(), y: ti.types.ndarray(), a: ti.f32):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]


@ti.kernel
def nd_sum2d(x: ti.types.ndarray()) -> ti.f64:
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            s += x[i, j]
    return s


@ti.kernel
def nd_transpose(x: ti.types.ndarray(), y: ti.types.ndarray()):
    for i, j in ti.ndrange(x.shape[0], x.shape[1]):
        y[j, i] = x[i, j]


def test_ndarray_read_and_write():
    x = np.arange(10, dtype=np.float32)
    y = np.ones(10, dtype=np.float32)
    nd_saxpy(x, y, 2.0)
    np.testing.assert_array_equal(y, 2 * np.arange(10) + 1)
    np.testing.assert_array_equal(x, np.arange(10))  # input untouched


def test_ndarray_different_shapes():
    for n in (3, 100):
        x = np.linspace(0, 1, n, dtype=np.float32)
        y = np.zeros(n, dtype=np.float32)
        nd_saxpy(x, y, -1.0)
        np.testing.assert_allclose(y, -x)


def test_ndarray_2d():
    x = np.random.default_rng(1).random((5, 7))
    y = np.zeros((7, 5))
    nd_transpose(x, y)
    np.testing.assert_array_equal(y, x.T)


def test_ndarray_reduce_into_local():
    x = np.random.default_rng(1).random((5, 7))
    assert nd_sum2d(x) == pytest.approx(x.sum())


# ---------------------------------------------------------------- ti.func
@ti.func
def clamp01(x):
    r = x
    if x < 0:
        r = 0.0
    elif x > 1:
        r = 1.0
    return r


@ti.func
def early_return_in_if(x):
    if x > 10:
        return x * 100
    return x


@ti.func
def early_return_if_else(x):
    if x > 0:
        return x * 2
    else:
        return -x


@ti.func
def const_return_then_fallthrough(x):
    if x > 0:
        return x
    return 0.0


@ti.func
def const_returns_both_branches(x) -> ti.f32:
    if x > 0:
        return 1.0
    else:
        return -1.0


@ti.func
def nested_early_returns(x):
    if x < 0:
        if x < -2:
            return x * 3
        return x * 2
    return x + 100


@ti.func
def sq(x):
    return x * x


@ti.func
def sum_sq(x):
    return sq(x) + sq(2.0)


@ti.func
def tuple_return(x):
    a, b = swap(x, 5.0)
    return a - b


@ti.func
def swap(a, b):
    return b, a


@ti.func
def typed_args(x: ti.i32) -> ti.f32:
    return x / 2


@ti.func
def mutate_field(f: ti.template(), i, v):
    f[i] = v


@ti.func
def serial_loop_break(x):
    r = -1
    for k in range(100):
        if k * k > x:
            r = k
            break
    return r


@ti.kernel
def apply_func(fn: ti.template(), x: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(x.shape[0]):
        out[i] = fn(x[i])


FUNC_X = np.array([-3.0, -1.5, -0.5, 0.0, 0.25, 0.9, 5.0, 11.0, 20.0], dtype=np.float32)
