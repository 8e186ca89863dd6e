"""Scalar math edge cases pinned to closed-form values (Taichi 1.7.4 semantics).

The expected values were checked against Taichi 1.7.4 with `python bench/math_semantics.py`
(kernel on run-time arguments, kernel on literals, Python scope); Taichi is not needed here.

Rules pinned below:
- ti.round on a kernel expression rounds halfway cases away from zero (C round()); on plain
  Python numbers (Python scope, or a literal / Python global inside a kernel) Taichi uses
  numpy's round-half-to-even, and so does simrun.
- `//` and `%` floor (Python semantics) for ints and floats; `/` on ints is true division.
- Integer division or modulo by zero gives 0 instead of killing the process with SIGFPE
  (Taichi 1.7.4 dies); INT_MIN // -1 wraps to INT_MIN.
- int ** int wraps like repeated multiplication; a negative exponent uses its magnitude
  (Taichi without debug mode); float ** int is the float power.
- float -> int casts truncate toward zero; out of range gives INT_MIN (x86, Taichi).
"""

import math

import numpy as np
import pytest

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


def same(got, want) -> bool:
    """Equal including the sign of zero and NaN == NaN."""
    if isinstance(want, float) and math.isnan(want):
        return math.isnan(got)
    return got == want and math.copysign(1, got) == math.copysign(1, want)


# ----------------------------------------------------------------- rounding
@ti.kernel
def round_f32(a: ti.f32) -> ti.f32:
    return ti.round(a)


@ti.kernel
def round_f64(a: ti.f64) -> ti.f64:
    return ti.round(a)


@ti.kernel
def round_to_i32(a: ti.f32) -> ti.i32:
    return ti.round(a, ti.i32)


F32_BELOW_HALF = float(np.nextafter(np.float32(0.5), np.float32(0)))  # 0.49999997

# x, round half away from zero (kernel expression), round half to even (Python number)
ROUND = [
    (-2.5, -3.0, -2.0),
    (-1.5, -2.0, -2.0),
    (-0.5, -1.0, -0.0),
    (0.5, 1.0, 0.0),
    (1.5, 2.0, 2.0),
    (2.5, 3.0, 2.0),
    (3.5, 4.0, 4.0),
    (2.4999, 2.0, 2.0),
    (-2.4999, -2.0, -2.0),
    (F32_BELOW_HALF, 0.0, 0.0),  # floor(x + 0.5) gets this one wrong: x + 0.5 rounds to 1
    (-F32_BELOW_HALF, -0.0, -0.0),
    (-0.0, -0.0, -0.0),
    (1e8 + 0.5, 1e8 + 1.0, 1e8),  # f64 only: not representable in f32
]


@pytest.mark.parametrize("x,away,even", ROUND)
def test_round_kernel_rounds_half_away_from_zero(x, away, even):
    assert same(round_f64(x), away)
    if x != 1e8 + 0.5:
        assert same(round_f32(x), away)
        assert round_to_i32(x) == int(away)


@pytest.mark.parametrize("x,away,even", ROUND)
def test_round_of_python_numbers_is_half_to_even(x, away, even):
    assert same(ti.round(x), even)


@ti.kernel
def round_literals() -> ti.types.vector(5, ti.f32):
    v = ti.Vector([2.5, -2.5])  # a local vector: kernel values
    return ti.Vector([ti.round(2.5), ti.round(-0.5), ti.round(v)[0], ti.round(v)[1],
                      ti.round(ti.Vector([0.5, 1.0]))[0]])


def test_round_literals_in_kernels_follow_taichi():
    # ti.round(literal) is evaluated in Python by Taichi (numpy: half to even); vectors built
    # in a kernel hold kernel expressions (half away from zero)
    np.testing.assert_array_equal(round_literals().to_numpy(), [2.0, -0.0, 3.0, -3.0, 1.0])


def test_round_python_scope_matrix_is_half_to_even():
    np.testing.assert_array_equal(ti.round(ti.Vector([2.5, -2.5, 1.5])).to_numpy(),
                                  [2.0, -2.0, 2.0])


@ti.kernel
def floor_ceil(a: ti.f32) -> ti.types.vector(4, ti.f32):
    return ti.Vector([ti.floor(a), ti.ceil(a), ti.floor(a, ti.i32), ti.ceil(a, ti.i32)])


@pytest.mark.parametrize("x,floor,ceil", [
    (-2.5, -3.0, -2.0), (-2.0, -2.0, -2.0), (-0.5, -1.0, -0.0), (-1e-8, -1.0, -0.0),
    (-0.0, -0.0, -0.0), (0.5, 0.0, 1.0), (2.5, 2.0, 3.0),
])
def test_floor_ceil(x, floor, ceil):
    got = floor_ceil(x).to_numpy()
    assert same(float(got[0]), floor) and same(float(got[1]), ceil)
    assert (got[2], got[3]) == (int(floor), int(ceil))
    assert same(float(ti.floor(x)), floor) and same(float(ti.ceil(x)), ceil)


# ----------------------------------------------------------------- division
@ti.kernel
def int_div(a: ti.i32, b: ti.i32) -> ti.types.vector(3, ti.f64):
    return ti.Vector([ti.cast(a // b, ti.f64), ti.cast(a % b, ti.f64), a / b])


@pytest.mark.parametrize("a,b,fdiv,mod,tdiv", [
    (7, 2, 3, 1, 3.5), (-7, 2, -4, 1, -3.5), (7, -2, -4, -1, -3.5), (-7, -2, 3, -1, 3.5),
    (6, -3, -2, 0, -2.0), (0, 3, 0, 0, 0.0), (-1, 3, -1, 2, -1 / 3), (1, -3, -1, -2, -1 / 3),
])
def test_int_floordiv_mod_truediv(a, b, fdiv, mod, tdiv):
    got = int_div(a, b).to_numpy()
    assert (got[0], got[1]) == (fdiv, mod)
    assert got[2] == pytest.approx(tdiv, rel=1e-6)  # `/` of i32 is f32


@pytest.mark.parametrize("a,b,fdiv,mod", [
    (7, 0, 0, 0), (-7, 0, 0, 0), (0, 0, 0, 0), (-2**31, -1, -2**31, 0),
])
def test_int_division_by_zero_gives_zero(a, b, fdiv, mod):
    got = int_div(a, b).to_numpy()
    assert (got[0], got[1]) == (fdiv, mod)


@ti.kernel
def float_div(a: ti.f32, b: ti.f32) -> ti.types.vector(3, ti.f32):
    return ti.Vector([a // b, a % b, a / b])


INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("a,b,fdiv,mod,tdiv", [
    (7.5, 2.0, 3.0, 1.5, 3.75), (-7.5, 2.0, -4.0, 0.5, -3.75), (7.5, -2.0, -4.0, -0.5, -3.75),
    (-7.5, -2.0, 3.0, -1.5, 3.75), (-0.5, 1.0, -1.0, 0.5, -0.5), (5.0, 0.5, 10.0, 0.0, 10.0),
    (-1e-8, 1.0, -1.0, 1.0, -1e-8),  # 1 - 1e-8 rounds to 1.0 in f32
    (1.0, 0.0, INF, NAN, INF), (-1.0, 0.0, -INF, NAN, -INF),
])
def test_float_floordiv_mod_truediv(a, b, fdiv, mod, tdiv):
    got = [float(v) for v in float_div(a, b).to_numpy()]
    assert same(got[0], fdiv) and same(got[1], mod)
    assert got[2] == pytest.approx(tdiv, rel=1e-6) or same(got[2], tdiv)


@ti.kernel
def mixed_div(a: ti.i32, b: ti.f32) -> ti.types.vector(2, ti.f32):
    return ti.Vector([a // b, a % b])


def test_int_by_float_is_float_floor_division():
    np.testing.assert_array_equal(mixed_div(-7, 2.0).to_numpy(), [-4.0, 1.0])


# ----------------------------------------------------------------- powers
@ti.kernel
def int_pow(a: ti.i32, b: ti.i32) -> ti.i32:
    return a**b


@ti.kernel
def int_pow_fn(a: ti.i32, b: ti.i32) -> ti.i32:
    return ti.pow(a, b)


@ti.kernel
def int_pow64(a: ti.i64, b: ti.i64) -> ti.i64:
    return a**b


@pytest.mark.parametrize("a,b,want", [
    (2, 10, 1024), (-2, 3, -8), (3, 0, 1), (0, 0, 1), (-3, 2, 9), (2, 30, 2**30),
    (2, 31, -2**31),  # wraps
    (3, 21, 3**21 - 2 * 2**32),  # 10460353203 wraps to 1870418611, like repeated `*`
    (2, 32, 0),
    (2, -1, 2), (1, -2, 1), (-1, -3, -1),  # negative exponent: its magnitude (Taichi)
])
def test_int_pow(a, b, want):
    assert int_pow(a, b) == want
    assert int_pow_fn(a, b) == want


def test_int_pow_i64():
    assert int_pow64(3, 39) == 3**39
    assert int_pow64(-7, 21) == (-7) ** 21


@ti.kernel
def float_pow_int(a: ti.f32, b: ti.i32) -> ti.f32:
    return a**b


@ti.kernel
def float_pow(a: ti.f32, b: ti.f32) -> ti.f32:
    return a**b


@pytest.mark.parametrize("a,b,want", [
    (2.0, 3, 8.0), (-2.0, 3, -8.0), (-2.0, 2, 4.0), (2.0, -2, 0.25), (0.0, 0, 1.0),
    (1.5, 0, 1.0),
])
def test_float_pow_int(a, b, want):
    assert float_pow_int(a, b) == want


@pytest.mark.parametrize("a,b,want", [
    (2.0, 0.5, math.sqrt(2.0)), (-8.0, 2.0, 64.0), (-2.0, 0.5, NAN), (0.0, 0.0, 1.0),
    (4.0, -0.5, 0.5),
])
def test_float_pow_float(a, b, want):
    got = float_pow(a, b)
    assert same(got, want) or got == pytest.approx(want, rel=1e-6)


# ----------------------------------------------------------------- abs and casts
@ti.kernel
def iabs(a: ti.i32) -> ti.i32:
    return abs(a)


@ti.kernel
def fabs(a: ti.f32) -> ti.f32:
    return abs(a)


def test_abs():
    assert [iabs(v) for v in (-5, 5, 0, -2**31 + 1)] == [5, 5, 0, 2**31 - 1]
    assert iabs(-2**31) == -2**31  # wraps, as in C and Taichi
    assert same(fabs(-0.0), 0.0) and fabs(-2.5) == 2.5
    assert ti.abs(-3) == 3 and ti.abs(-2.5) == 2.5


@ti.kernel
def casts(a: ti.f32) -> ti.types.vector(3, ti.i32):
    return ti.Vector([ti.cast(a, ti.i32), int(a), ti.i32(a)])


@ti.kernel
def cast_i64(a: ti.f64) -> ti.i64:
    return ti.cast(a, ti.i64)


@ti.kernel
def cast_i8(a: ti.i32) -> ti.i32:
    return ti.cast(a, ti.i8)


@ti.kernel
def cast_literal_out_of_range() -> ti.types.vector(2, ti.i32):
    return ti.Vector([ti.cast(3e9, ti.i32), ti.cast(-3e9, ti.i32)])


@pytest.mark.parametrize("x,want", [
    (-2.7, -2), (2.7, 2), (-0.5, 0), (0.5, 0), (-2.5, -2), (2.5, 2), (-0.0, 0),
])
def test_float_to_int_truncates(x, want):
    assert list(casts(x).to_numpy()) == [want] * 3
    assert ti.cast(x, ti.i32) == want


def test_other_casts():
    assert cast_i64(-1e15 - 0.5) == -10**15
    assert [cast_i8(v) for v in (300, -129, 127, -128)] == [44, 127, 127, -128]
    assert ti.cast(300, ti.i8) == 44


def test_out_of_range_float_to_int_is_int_min_everywhere():
    # undefined in C; x86 and Taichi give INT_MIN at run time and for literals
    assert list(casts(3e9).to_numpy()) == [-2**31] * 3
    assert list(cast_literal_out_of_range().to_numpy()) == [-2**31, -2**31]
    assert ti.cast(3e9, ti.i32) == -2**31
