"""Expressions: promotion, division, bit ops, casts, math vs numpy, ti.random, atomics."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


# ---------------------------------------------------------------- type promotion
@ti.kernel
def promote_i32_f32(i: ti.i32, f: ti.f32) -> ti.f64:
    return i + f


@ti.kernel
def promote_f32_f64(f: ti.f32, d: ti.f64) -> ti.f64:
    return f + d


@ti.kernel
def promote_i32_f64(i: ti.i32, d: ti.f64) -> ti.f64:
    return i + d


@ti.kernel
def promote_i32_i64(i: ti.i32, j: ti.i64) -> ti.i64:
    return i + j


@ti.kernel
def int_mul_wraps(i: ti.i32, j: ti.i32) -> ti.i64:
    return i * j


def test_promotion_i32_plus_f32_is_f32():
    # 2**24 + 1 is not representable in f32: the sum is rounded if computed in f32
    assert promote_i32_f32(2**24 + 1, 0.0) == float(2**24)


def test_promotion_f32_plus_f64_is_f64():
    assert promote_f32_f64(1.0, 1e-10) == 1.0 + 1e-10


def test_promotion_i32_plus_f64_is_f64():
    assert promote_i32_f64(2**24 + 1, 0.5) == 2**24 + 1.5


def test_promotion_i32_plus_i64_is_i64():
    assert promote_i32_i64(2**31 - 1, 1) == 2**31


def test_i32_product_wraps_before_widening():
    assert int_mul_wraps(2**16, 2**16) == 0


@ti.kernel
def literal_promotion(i: ti.i32) -> ti.types.vector(4, ti.f64):
    return ti.Vector([i * 0.5, i + 1, i / 4, 3 / 2])


def test_literal_promotion_and_true_division():
    np.testing.assert_array_equal(literal_promotion(7).to_numpy(), [3.5, 8, 1.75, 1.5])


# ---------------------------------------------------------------- division semantics
@ti.kernel
def int_div_ops(a: ti.types.ndarray(), b: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(a.shape[0]):
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]


@ti.kernel
def int_true_div(a: ti.types.ndarray(), b: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(a.shape[0]):
        out[i] = a[i] / b[i]


@ti.kernel
def float_div_ops(a: ti.types.ndarray(), b: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(a.shape[0]):
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]
        out[i, 2] = a[i] / b[i]


def _int_pairs(dtype):
    a, b = np.meshgrid(np.arange(-20, 21), np.concatenate([np.arange(-7, 0), np.arange(1, 8)]))
    return a.ravel().astype(dtype), b.ravel().astype(dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_floordiv_and_mod_follow_python(dtype):
    a, b = _int_pairs(dtype)
    out = np.zeros((len(a), 2), dtype)
    int_div_ops(a, b, out)
    np.testing.assert_array_equal(out[:, 0], a // b)
    np.testing.assert_array_equal(out[:, 1], a % b)


def test_int_true_division_is_float():
    a, b = _int_pairs(np.int32)
    out = np.zeros(len(a), np.float32)
    int_true_div(a, b, out)
    np.testing.assert_allclose(out, a / b, rtol=1e-6)
    assert (np.abs(out - a // b) > 0).any()  # not floor division


def test_float_floordiv_and_mod_follow_python():
    rng = np.random.default_rng(2)
    a = np.concatenate([rng.uniform(-10, 10, 200), [-7.0, 7.0, -7.5, 7.5, 0.0]])
    b = np.concatenate([rng.uniform(0.5, 3, 100) * rng.choice([-1, 1], 100),
                        rng.uniform(-3, -0.5, 100), [2.0, -2.0, 2.0, -2.0, 3.0]])
    out = np.zeros((len(a), 3))
    float_div_ops(a, b, out)
    np.testing.assert_array_equal(out[:, 0], np.floor_divide(a, b))
    np.testing.assert_allclose(out[:, 1], np.mod(a, b), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[:, 2], a / b, rtol=1e-15)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**31) + 1, 2**31 - 1),
       st.integers(-(2**31) + 1, 2**31 - 1).filter(lambda v: v != 0))
def test_int_floordiv_mod_hypothesis(x, y):
    a = np.array([x], np.int32)
    b = np.array([y], np.int32)
    out = np.zeros((1, 2), np.int32)
    int_div_ops(a, b, out)
    assert (out[0, 0], out[0, 1]) == (x // y, x % y)


# ---------------------------------------------------------------- comparisons and logic
@ti.kernel
def compare_ops(a: ti.types.ndarray(), b: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(a.shape[0]):
        x, y = a[i], b[i]
        out[i, 0] = x < y
        out[i, 1] = x <= y
        out[i, 2] = x > y
        out[i, 3] = x >= y
        out[i, 4] = x == y
        out[i, 5] = x != y
        out[i, 6] = 0 < x < y
        out[i, 7] = x > 0 and y > 0
        out[i, 8] = x > 0 or y > 0
        out[i, 9] = not x > 0
        out[i, 10] = ti.select(x > y, x, y)
        out[i, 11] = x if x < y else -y


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_comparisons_and_logic(dtype):
    v = np.array([-2, -1, 0, 1, 2, 3], dtype)
    a, b = (m.ravel() for m in np.meshgrid(v, v))
    out = np.zeros((len(a), 12), dtype)
    compare_ops(a, b, out)
    expected = np.stack([a < b, a <= b, a > b, a >= b, a == b, a != b, (0 < a) & (a < b),
                         (a > 0) & (b > 0), (a > 0) | (b > 0), ~(a > 0),
                         np.where(a > b, a, b), np.where(a < b, a, -b)], axis=1)
    np.testing.assert_array_equal(out, expected.astype(dtype))


@ti.kernel
def short_circuit_guard(x: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(x.shape[0]):
        r = 0
        if x[i] != 0 and (x[i] > 0 or x[i] < -4) and not x[i] == 4:
            r = 1
        elif x[i] == 0 or x[i] == 4:
            r = 2
        out[i] = r


def test_logic_in_conditions():
    x = np.array([0, 1, 3, 4, -5], np.int32)
    out = np.zeros(5, np.int32)
    short_circuit_guard(x, out)
    np.testing.assert_array_equal(out, [2, 1, 1, 2, 1])


# ---------------------------------------------------------------- bit operations
@ti.kernel
def bit_ops(a: ti.types.ndarray(), b: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(a.shape[0]):
        x, y = a[i], b[i]
        out[i, 0] = x & y
        out[i, 1] = x | y
        out[i, 2] = x ^ y
        out[i, 3] = ~x
        out[i, 4] = x << (y & 15)
        out[i, 5] = x >> (y & 15)
        out[i, 6] = ti.bit_shl(x, 3)
        out[i, 7] = -x


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
def test_bit_ops(dtype):
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    a = rng.integers(max(info.min, -(2**40)), min(info.max, 2**40), 300, dtype=np.int64)
    a = np.concatenate([a, [0, 1, -1 if info.min < 0 else 7]]).astype(dtype)
    b = rng.integers(0, 2**20, len(a)).astype(dtype)
    out = np.zeros((len(a), 8), dtype)
    bit_ops(a, b, out)
    s = b & dtype(15)
    with np.errstate(over="ignore"):
        expected = np.stack([a & b, a | b, a ^ b, ~a, a << s, a >> s, a << dtype(3),
                             (np.zeros_like(a) - a)], axis=1)
    np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------- casts, min/max/abs
@ti.kernel
def casts(x: ti.types.ndarray(), out_i: ti.types.ndarray(), out_f: ti.types.ndarray()):
    for i in range(x.shape[0]):
        out_i[i, 0] = ti.cast(x[i], ti.i32)
        out_i[i, 1] = int(x[i])
        out_i[i, 2] = ti.cast(ti.cast(x[i], ti.i64), ti.i32)
        out_i[i, 3] = ti.i32(x[i])
        out_f[i, 0] = ti.cast(ti.cast(x[i], ti.f32), ti.f64)
        out_f[i, 1] = float(ti.cast(x[i], ti.i32))
        out_f[i, 2] = ti.floor(x[i])
        out_f[i, 3] = ti.ceil(x[i])


def test_cast_truncates_toward_zero():
    x = np.array([-2.7, -2.5, -2.0, -0.5, -0.0, 0.5, 2.0, 2.5, 2.7, 1e6 + 0.9, -123456.75])
    out_i = np.zeros((len(x), 4), np.int32)
    out_f = np.zeros((len(x), 4))
    casts(x, out_i, out_f)
    for k in range(4):
        np.testing.assert_array_equal(out_i[:, k], np.trunc(x).astype(np.int32))
    np.testing.assert_array_equal(out_f[:, 0], x.astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(out_f[:, 1], np.trunc(x))
    np.testing.assert_array_equal(out_f[:, 2], np.floor(x))
    np.testing.assert_array_equal(out_f[:, 3], np.ceil(x))


@ti.kernel
def floor_ceil_dtype(x: ti.f32) -> ti.types.vector(2, ti.i32):
    return ti.Vector([ti.floor(x, ti.i32), ti.ceil(x, ti.i32)])


def test_floor_ceil_with_int_dtype():
    np.testing.assert_array_equal(floor_ceil_dtype(-1.5).to_numpy(), [-2, -1])


@ti.kernel
def minmaxabs(a: ti.types.ndarray(), b: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(a.shape[0]):
        out[i, 0] = min(a[i], b[i])
        out[i, 1] = max(a[i], b[i])
        out[i, 2] = ti.min(a[i], b[i], 0)
        out[i, 3] = ti.max(a[i], b[i], 1)
        out[i, 4] = abs(a[i])
        out[i, 5] = ti.abs(b[i])


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_min_max_abs(dtype):
    rng = np.random.default_rng(7)
    a = (rng.integers(-50, 50, 100) * (1.5 if dtype != np.int32 else 1)).astype(dtype)
    b = (rng.integers(-50, 50, 100)).astype(dtype)
    out = np.zeros((100, 6), dtype)
    minmaxabs(a, b, out)
    expected = np.stack([np.minimum(a, b), np.maximum(a, b), np.minimum(np.minimum(a, b), 0),
                         np.maximum(np.maximum(a, b), 1), np.abs(a), np.abs(b)], axis=1)
    np.testing.assert_array_equal(out, expected)


@ti.kernel
def int_pow(a: ti.i32, b: ti.i32) -> ti.i32:
    return a**b


@ti.kernel
def float_pow_int(x: ti.f64, n: ti.i32) -> ti.f64:
    return x**n


def test_integer_power():
    assert int_pow(3, 4) == 81
    assert int_pow(-2, 5) == -32
    assert int_pow(7, 0) == 1
    assert float_pow_int(1.5, 3) == 1.5**3
    assert float_pow_int(2.0, -2) == 0.25


# ---------------------------------------------------------------- math functions vs numpy
UNARY = {
    "sin": (ti.sin, np.sin, (-6, 6)),
    "cos": (ti.cos, np.cos, (-6, 6)),
    "tan": (ti.tan, np.tan, (-1.4, 1.4)),
    "asin": (ti.asin, np.arcsin, (-0.999, 0.999)),
    "acos": (ti.acos, np.arccos, (-0.999, 0.999)),
    "atan": (ti.atan, np.arctan, (-20, 20)),
    "tanh": (ti.tanh, np.tanh, (-6, 6)),
    "exp": (ti.exp, np.exp, (-20, 20)),
    "log": (ti.log, np.log, (1e-3, 1e3)),
    "sqrt": (ti.sqrt, np.sqrt, (0, 1e4)),
    "rsqrt": (ti.rsqrt, lambda v: 1 / np.sqrt(v), (1e-3, 1e4)),
    "floor": (ti.floor, np.floor, (-50, 50)),
    "ceil": (ti.ceil, np.ceil, (-50, 50)),
    "round": (ti.round, np.round, (-50, 50)),
    "abs": (ti.abs, np.abs, (-50, 50)),
    "neg": (lambda v: -v, np.negative, (-5, 5)),
}
BINARY = {
    "atan2": (ti.atan2, np.arctan2, (-5, 5), (-5, 5)),
    "pow": (ti.pow, np.power, (0.01, 10), (-4, 4)),
    "**": (lambda x, y: x**y, np.power, (0.01, 10), (-4, 4)),
    "min": (ti.min, np.minimum, (-5, 5), (-5, 5)),
    "max": (ti.max, np.maximum, (-5, 5), (-5, 5)),
    "mul": (lambda x, y: x * y, np.multiply, (-5, 5), (-5, 5)),
    "div": (lambda x, y: x / y, np.divide, (-5, 5), (0.1, 5)),
}
UNARY_FUNCS = [v[0] for v in UNARY.values()]
BINARY_FUNCS = [v[0] for v in BINARY.values()]
M = 2000


@ti.kernel
def unary_math(x: ti.template(), y: ti.template()):
    for i in range(M):
        for k, fn in ti.static(enumerate(UNARY_FUNCS)):
            y[k, i] = fn(x[k, i])


@ti.kernel
def binary_math(x: ti.template(), z: ti.template(), y: ti.template()):
    for i in range(M):
        for k, fn in ti.static(enumerate(BINARY_FUNCS)):
            y[k, i] = fn(x[k, i], z[k, i])


def _inputs(lo, hi, dtype, seed):
    v = np.random.default_rng(seed).uniform(lo, hi, M)
    if lo < -1 < 1 < hi:  # exercise integers and halves exactly for rounding functions
        v[:40] = np.arange(-20, 20) * 0.5 + 0.25 * (np.arange(40) % 2)
    return v.astype(dtype)


@functools.lru_cache(maxsize=None)
def _unary_results(dtype):
    tdt = ti.f32 if dtype == np.float32 else ti.f64
    xs = np.stack([_inputs(*rng, dtype, k) for k, (_, _, rng) in enumerate(UNARY.values())])
    x = ti.field(tdt, shape=xs.shape)
    y = ti.field(tdt, shape=xs.shape)
    x.from_numpy(xs)
    unary_math(x, y)
    return xs, y.to_numpy()


@functools.lru_cache(maxsize=None)
def _binary_results(dtype):
    tdt = ti.f32 if dtype == np.float32 else ti.f64
    vals = list(BINARY.values())
    xs = np.stack([_inputs(*v[2], dtype, 10 + k) for k, v in enumerate(vals)])
    zs = np.stack([_inputs(*v[3], dtype, 20 + k) for k, v in enumerate(vals)])
    fx = ti.field(tdt, shape=xs.shape)
    fz = ti.field(tdt, shape=xs.shape)
    fy = ti.field(tdt, shape=xs.shape)
    fx.from_numpy(xs)
    fz.from_numpy(zs)
    binary_math(fx, fz, fy)
    return xs, zs, fy.to_numpy()


TOL = {np.float32: dict(rtol=2e-6, atol=2e-6), np.float64: dict(rtol=1e-13, atol=1e-13)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_math_vs_numpy(name, dtype):
    xs, ys = _unary_results(dtype)
    k = list(UNARY).index(name)
    ref = UNARY[name][1](xs[k].astype(np.float64))
    tol = dict(TOL[dtype])
    if name in ("exp", "sqrt", "rsqrt", "log", "tan"):
        tol["atol"] = 0
    np.testing.assert_allclose(ys[k], ref, **tol, err_msg=name)
    assert ys.dtype == dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_math_vs_numpy(name, dtype):
    xs, zs, ys = _binary_results(dtype)
    k = list(BINARY).index(name)
    ref = BINARY[name][1](xs[k].astype(np.float64), zs[k].astype(np.float64))
    tol = dict(TOL[dtype])
    if name in ("pow", "**"):
        tol["rtol"] = tol["rtol"] * 20  # x**y amplifies the input's rounding error
    np.testing.assert_allclose(ys[k], ref, **tol, err_msg=name)


@ti.kernel
def math_on_ints(i: ti.i32) -> ti.types.vector(4, ti.f32):
    return ti.Vector([ti.sqrt(i), ti.exp(i - i), ti.sin(i * 0), ti.log(i)])


def test_math_functions_accept_ints():
    np.testing.assert_allclose(math_on_ints(4).to_numpy(), [2.0, 1.0, 0.0, np.log(4.0)],
                               rtol=1e-6)


def test_math_functions_in_python_scope():
    assert ti.sin(0.5) == pytest.approx(np.sin(0.5))
    assert ti.sqrt(9.0) == 3.0
    assert ti.max(1, 5, 3) == 5


# ---------------------------------------------------------------- ti.random
R = 200_000
rand_f = ti.field(ti.f32, shape=R)
rand_d = ti.field(ti.f64, shape=R)
rand_i = ti.field(ti.i32, shape=R)


@ti.kernel
def fill_random():
    for i in range(R):
        rand_f[i] = ti.random()
        rand_d[i] = ti.random(ti.f64)
        rand_i[i] = ti.random(ti.i32)


def test_random_uniform_in_unit_interval():
    fill_random()
    for arr in (rand_f.to_numpy(), rand_d.to_numpy()):
        assert arr.min() >= 0.0 and arr.max() < 1.0
        assert abs(arr.mean() - 0.5) < 0.005
        assert abs(arr.var() - 1 / 12) < 0.002
        hist = np.histogram(arr, bins=10, range=(0, 1))[0]
        assert (np.abs(hist - R / 10) < 0.05 * R / 10).all()
        assert len(np.unique(arr)) > 0.9 * R
    ints = rand_i.to_numpy()
    assert len(np.unique(ints)) > 0.99 * R
    assert abs(np.corrcoef(rand_f.to_numpy(), rand_d.to_numpy())[0, 1]) < 0.02


def _random_run(seed, threads=None):
    ti.init(arch=ti.cpu, random_seed=seed, cpu_max_num_threads=threads)
    fill_random()
    return rand_f.to_numpy(), rand_d.to_numpy()


def test_random_reproducible_with_seed():
    a1, b1 = _random_run(123)
    a2, b2 = _random_run(123)
    a3, _ = _random_run(7)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)
    assert not np.array_equal(a1, a3)


def test_random_independent_of_thread_count():
    """Counter-based draws: a paper's numbers must not depend on the machine's core count."""
    a1, b1 = _random_run(5, threads=1)
    a2, b2 = _random_run(5, threads=2)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)


def test_random_changes_between_launches():
    ti.init(arch=ti.cpu, random_seed=1)
    fill_random()
    first = rand_f.to_numpy()
    fill_random()
    assert not np.array_equal(first, rand_f.to_numpy())


# ---------------------------------------------------------------- atomics
atom_i = ti.field(ti.i32, shape=())
atom_f = ti.field(ti.f32, shape=())


@ti.kernel
def atomic_old_values_int(out: ti.types.ndarray()):
    atom_i[None] = 10
    out[0] = ti.atomic_add(atom_i[None], 5)   # 10 -> 15
    out[1] = ti.atomic_sub(atom_i[None], 3)   # 15 -> 12
    out[2] = ti.atomic_mul(atom_i[None], 2)   # 12 -> 24
    out[3] = ti.atomic_min(atom_i[None], 7)   # 24 -> 7
    out[4] = ti.atomic_max(atom_i[None], 9)   # 7 -> 9
    out[5] = ti.atomic_and(atom_i[None], 12)  # 9 -> 8
    out[6] = ti.atomic_or(atom_i[None], 3)    # 8 -> 11
    out[7] = ti.atomic_xor(atom_i[None], 5)   # 11 -> 14
    out[8] = atom_i[None]


@ti.kernel
def atomic_old_values_float(out: ti.types.ndarray()):
    atom_f[None] = 1.5
    out[0] = ti.atomic_add(atom_f[None], 2.0)  # 1.5 -> 3.5
    out[1] = ti.atomic_sub(atom_f[None], 0.5)  # 3.5 -> 3.0
    out[2] = ti.atomic_mul(atom_f[None], 4.0)  # 3.0 -> 12.0
    out[3] = atom_f[None]


@ti.kernel
def atomic_old_values_float_minmax(out: ti.types.ndarray()):
    atom_f[None] = 12.0
    out[0] = ti.atomic_min(atom_f[None], -1.0)  # 12.0 -> -1.0
    out[1] = ti.atomic_max(atom_f[None], 2.5)  # -1.0 -> 2.5
    out[2] = atom_f[None]


def test_atomics_return_old_value_int():
    out = np.zeros(9, np.int32)
    atomic_old_values_int(out)
    np.testing.assert_array_equal(out, [10, 15, 12, 24, 7, 9, 8, 11, 14])


def test_atomics_return_old_value_float():
    out = np.zeros(4, np.float32)
    atomic_old_values_float(out)
    np.testing.assert_array_equal(out, [1.5, 3.5, 3.0, 12.0])


def test_atomic_min_max_return_old_value_float():
    out = np.zeros(3, np.float32)
    atomic_old_values_float_minmax(out)
    np.testing.assert_array_equal(out, [12.0, -1.0, 2.5])


counter = ti.field(ti.i32, shape=())
amin = ti.field(ti.f32, shape=())
amax = ti.field(ti.f32, shape=())
imin = ti.field(ti.i32, shape=())
imax = ti.field(ti.i32, shape=())
bits_or = ti.field(ti.i32, shape=())
bits_and = ti.field(ti.i32, shape=())
bits_xor = ti.field(ti.i32, shape=())


@ti.kernel
def parallel_atomics(k: ti.types.ndarray(), order: ti.types.ndarray()):
    for i in range(k.shape[0]):
        slot = ti.atomic_add(counter[None], 1)
        order[slot] = i
        ti.atomic_min(imin[None], k[i])
        ti.atomic_max(imax[None], k[i])
        one = k[i] * 0 + 1
        ti.atomic_or(bits_or[None], one << (k[i] % 31))
        ti.atomic_and(bits_and[None], ~(one << (k[i] % 29)))
        ti.atomic_xor(bits_xor[None], k[i])


@ti.kernel
def parallel_atomics_float(x: ti.types.ndarray()):
    for i in range(x.shape[0]):
        ti.atomic_min(amin[None], x[i])
        ti.atomic_max(amax[None], x[i])


def test_parallel_atomics():
    n = 300_000
    rng = np.random.default_rng(11)
    k = rng.integers(-1_000_000, 1_000_000, n).astype(np.int32)
    order = np.full(n, -1, np.int32)
    counter[None] = 0
    imin[None], imax[None] = 2**31 - 1, -(2**31)
    bits_or[None], bits_and[None], bits_xor[None] = 0, -1, 0
    parallel_atomics(k, order)
    assert counter[None] == n
    np.testing.assert_array_equal(np.sort(order), np.arange(n))  # every ticket exactly once
    assert imin[None] == k.min() and imax[None] == k.max()
    assert bits_or[None] == int(np.bitwise_or.reduce(np.left_shift(1, k % 31)))
    assert bits_and[None] == int(np.bitwise_and.reduce(~np.left_shift(1, k % 29)))
    assert bits_xor[None] == int(np.bitwise_xor.reduce(k))


def test_parallel_atomic_min_max_float():
    x = np.random.default_rng(12).normal(size=100_000).astype(np.float32)
    amin[None], amax[None] = 1e30, -1e30
    parallel_atomics_float(x)
    assert amin[None] == x.min() and amax[None] == x.max()


@ti.kernel
def python_int_on_the_left(k: ti.i32) -> ti.types.vector(2, ti.i32):
    return ti.Vector([1 << k, 1024 >> k])


def test_shift_with_python_int_on_the_left():
    np.testing.assert_array_equal(python_int_on_the_left(3).to_numpy(), [8, 128])


@ti.kernel
def atomic_on_vector_field(v: ti.template(), n: ti.i32):
    for i in range(n):
        v[i % 3] += ti.Vector([1.0, 2.0])
        v[i % 3][1] -= 1.0


def test_atomic_add_on_vector_field_elements():
    v = ti.Vector.field(2, ti.f32, shape=3)
    atomic_on_vector_field(v, 30_000)
    np.testing.assert_array_equal(v.to_numpy(), np.full((3, 2), 10_000.0))
