"""Taichi-compatibility fixes found by differential testing against Taichi 1.7.4.

Expected values are Taichi 1.7.4's where Taichi accepts the program (checked in a separate
process while writing these tests), and Python's where Taichi rejects it (a range step).
"""

import math
import os

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.errors import CompileError

FILE = os.path.basename(__file__)


def line_of(snippet: str) -> int:
    """1-based line number of the only line of this file (besides this call) with snippet."""
    with open(__file__) as fh:
        hits = [n for n, line in enumerate(fh, 1) if snippet in line]
    assert len(hits) == 2, hits
    return hits[0]


def compile_error(fn, *args) -> str:
    with pytest.raises(CompileError) as exc:
        fn(*args)
    return str(exc.value)


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)


# ---------------------------------------------------------------- 1. range with a step
out = ti.field(ti.i32, 16)
STEPPED = range(1, 10, 4)


@ti.kernel
def inner_stepped(a: ti.i32, b: ti.i32):
    for _ in range(1):
        s = 0
        for i in range(0, 10, 3):
            s += i
        out[0] = s
        s = 0
        for i in range(10, 0, -2):
            s += i
        out[1] = s
        s = 0
        n = 0
        for i in range(a, b, 4):  # the body changes `a`: the range was fixed at the start
            s += i
            n += 1
            a += 100
        out[2] = s
        out[3] = n
        s = 0
        for i in range(b, 1, -3):
            s += i
        out[4] = s
        s = 0
        for _i in range(b, 1, 3):  # empty
            s += 1
        out[5] = s
        s = 0
        for i in STEPPED:  # a Python range object keeps its step too
            s += i
        out[6] = s


def test_inner_range_step_follows_python():
    inner_stepped(1, 12)
    expected = [sum(range(0, 10, 3)), sum(range(10, 0, -2)), sum(range(1, 12, 4)),
                len(range(1, 12, 4)), sum(range(12, 1, -3)), 0, sum(STEPPED)]
    assert out.to_numpy()[:7].tolist() == expected == [18, 30, 15, 3, 30, 0, 15]


@ti.kernel
def parallel_stepped(lo: ti.i32, hi: ti.i32, step_down: ti.i32):
    if step_down:
        for i in range(lo, hi, -3):
            out[i] = 1
    for i in range(lo, hi, 2):
        out[i] += 10


@ti.kernel
def parallel_stepped_const():
    for i in range(0, 16, 5):
        out[i] = 7


def test_outermost_range_step_is_parallel_loop_with_python_semantics():
    out.fill(0)
    parallel_stepped(3, 12, 0)
    assert np.flatnonzero(out.to_numpy()).tolist() == list(range(3, 12, 2))
    out.fill(0)
    parallel_stepped(14, 2, 1)
    assert np.flatnonzero(out.to_numpy()).tolist() == sorted(range(14, 2, -3))
    out.fill(0)
    parallel_stepped_const()
    assert np.flatnonzero(out.to_numpy() == 7).tolist() == [0, 5, 10, 15]


@ti.kernel
def runtime_step(s: ti.i32):
    for i in range(0, 10, s):  # RUNTIME-STEP
        out[i] = 1


@ti.kernel
def zero_step():
    for i in range(0, 10, 0):  # ZERO-STEP
        out[i] = 1


def test_range_step_must_be_a_nonzero_compile_time_integer():
    msg = compile_error(runtime_step, 2)
    assert f"{FILE}:{line_of('# RUNTIME-STEP')}" in msg
    assert "compile-time constant" in msg and "step" in msg
    msg = compile_error(zero_step)
    assert f"{FILE}:{line_of('# ZERO-STEP')}" in msg and "zero" in msg


# ---------------------------------------------------------------- 2. non-contiguous ndarrays
@ti.kernel
def fill2(a: ti.types.ndarray()):
    for i, j in ti.ndrange(a.shape[0], a.shape[1]):
        a[i, j] = i * 10 + j


@ti.kernel
def fill1(a: ti.types.ndarray()):
    for i in range(a.shape[0]):
        a[i] = 7


def test_writes_reach_a_transposed_view():
    t = np.zeros((3, 2), np.float32).T
    fill2(t)
    np.testing.assert_array_equal(t, [[0, 1, 2], [10, 11, 12]])


def test_writes_reach_a_strided_view_and_its_base():
    base = np.zeros(6, np.float32)
    fill1(base[::2])
    np.testing.assert_array_equal(base, [7, 0, 7, 0, 7, 0])


# ---------------------------------------------------------------- 3. return types
small = ti.field(ti.i8, 2)


@ti.kernel
def ret_i8() -> ti.i8:
    return -1


@ti.kernel
def ret_i16() -> ti.i16:
    return -2


@ti.kernel
def ret_field_i8() -> ti.i8:
    return small[0]


@ti.kernel
def ret_i8_from_i32(a: ti.i32) -> ti.i8:
    return a


@ti.kernel
def ret_u16() -> ti.u16:
    return -1


def test_narrow_signed_returns_keep_their_sign():
    small[0] = -5
    assert ret_i8() == -1
    assert ret_i16() == -2
    assert ret_field_i8() == -5
    assert ret_i8_from_i32(200) == -56
    assert ret_u16() == 65535


@ti.kernel
def ret_ivec(a: ti.i32) -> ti.types.vector(2, ti.i32):
    return ti.Vector([a, -a])


@ti.kernel
def ret_fvec(a: ti.f32) -> ti.types.vector(3, ti.f32):
    return ti.Vector([a, -a, 0.1])


@ti.kernel
def ret_i8vec() -> ti.types.vector(2, ti.i8):
    return ti.Vector([-1, 200])


@ti.kernel
def ret_mat64(a: ti.f32) -> ti.types.matrix(2, 2, ti.f64):
    return ti.Matrix([[a, -a], [0.5, 1]])


def test_vector_and_matrix_returns_have_the_declared_dtype():
    v = ret_ivec(3)
    assert v.to_numpy().dtype == np.int32 and v.to_numpy().tolist() == [3, -3]
    f = ret_fvec(3.0)
    assert f.to_numpy().dtype == np.float32 and isinstance(f[2], np.float32)
    assert float(f[2]) == float(np.float32(0.1))
    b = ret_i8vec()
    assert b.to_numpy().dtype == np.int8 and b.to_numpy().tolist() == [-1, -56]
    m = ret_mat64(3.0)
    assert m.to_numpy().dtype == np.float64 and m.to_numpy().tolist() == [[3, -3], [0.5, 1]]


# ---------------------------------------------------------------- 4. and / or
@ti.kernel
def and_or(a: ti.i32, b: ti.i32) -> ti.i32:
    return (a and b) * 100 + (a or b) * 10 + (0 or b)


@ti.kernel
def and_or_compare(a: ti.i32, b: ti.i32) -> ti.i32:
    return (a > 1 and b) * 100 + (a > 5 or b) * 10 + (a < 5 and b > 2)


@ti.kernel
def and_or_chain(a: ti.i32, b: ti.i32, c: ti.i32) -> ti.i32:
    return (a and b and c) * 100 + (a or b or c)


@ti.kernel
def and_or_literal(a: ti.i32) -> ti.i32:
    return (a and 7) * 10 + (a or 9)


@ti.kernel
def and_wide(a: ti.i32, b: ti.i64) -> ti.i64:
    return a and b


def test_and_or_give_the_deciding_operand_like_taichi():
    assert [and_or(3, 5), and_or(0, 5), and_or(3, 0)] == [535, 55, 30]
    assert [and_or_compare(3, 5), and_or_compare(0, 5), and_or_compare(7, 0)] == [551, 51, 10]
    assert [and_or_chain(1, 2, 3), and_or_chain(0, 2, 3), and_or_chain(1, 0, 3)] == [301, 2, 1]
    assert [and_or_literal(3), and_or_literal(0)] == [73, 9]
    assert and_wide(1, 2**40) == 2**40


counter = ti.field(ti.i32, 2)


@ti.kernel
def and_or_side_effects(a: ti.i32) -> ti.i32:
    counter[0] = 0
    r = a and ti.atomic_add(counter[0], 1)
    r2 = a or ti.atomic_add(counter[1], 1)
    return r * 10 + r2


def test_and_or_evaluate_every_operand_like_taichi():
    counter.fill(0)
    assert and_or_side_effects(0) == 0
    assert counter.to_numpy().tolist() == [1, 1]
    assert and_or_side_effects(2) == 2
    assert counter.to_numpy().tolist() == [1, 2]


# ---------------------------------------------------------------- 5. internal errors
count = ti.field(ti.i32, ())
grid = ti.field(ti.i32, (4, 4))


@ti.kernel
def loop_to_field_value():
    for i in range(count[None]):
        out[i] = i + 1
    for i, j in ti.ndrange(count[None], 4):
        grid[i, j] = i * 4 + j + 1


def test_outermost_loop_bounds_may_read_fields():
    count[None] = 3
    out.fill(0)
    grid.fill(0)
    loop_to_field_value()
    assert out.to_numpy()[:4].tolist() == [1, 2, 3, 0]
    expected = np.zeros((4, 4), np.int32)
    expected[:3] = np.arange(12).reshape(3, 4) + 1
    np.testing.assert_array_equal(grid.to_numpy(), expected)


@ti.kernel
def shape_only(a: ti.types.ndarray()) -> ti.i32:
    return a.shape[0] * 10


def test_ndarray_used_only_through_its_shape():
    assert shape_only(np.zeros(4, np.float32)) == 40
    assert shape_only(np.zeros(0, np.float32)) == 0


@ti.kernel
def ieee_folds() -> ti.types.vector(4, ti.f32):
    return ti.Vector([ti.sqrt(-1.0), ti.log(0.0), ti.acos(1.5), ti.exp(1000.0)])


def test_math_of_literals_folds_to_ieee_values():
    r = ieee_folds().to_numpy()
    assert math.isnan(r[0]) and r[1] == -np.inf and math.isnan(r[2]) and r[3] == np.inf
    assert math.isnan(ti.sqrt(-1.0)) and ti.log(0.0) == -math.inf


@ti.kernel
def static_assert_fails():
    ti.static_assert(out.shape[0] == 3, "out must have 3 rows")  # STATIC-ASSERT


def test_static_assert_failure_is_a_compile_error():
    msg = compile_error(static_assert_fails)
    assert f"{FILE}:{line_of('# STATIC-ASSERT')}" in msg
    assert "out must have 3 rows" in msg and "static_assert_fails" in msg


@ti.kernel
def two_values(a: ti.i32) -> (ti.i32, ti.f32):
    return a * 2, a / 4


@ti.kernel
def scalar_and_vector() -> (ti.i32, ti.types.vector(2, ti.f32)):
    return 1, ti.Vector([0.5, 2])


def test_tuple_return_annotation_returns_a_list_like_taichi():
    assert two_values(3) == [6, 0.75]
    n, v = scalar_and_vector()
    assert n == 1 and v.to_numpy().dtype == np.float32 and v.to_numpy().tolist() == [0.5, 2.0]


@ti.kernel
def bad_return_annotation() -> dict:  # BAD-RET-ANN
    return 1


def test_bad_return_annotation_names_the_line():
    msg = compile_error(bad_return_annotation)
    assert f"{FILE}:{line_of('BAD-RET-ANN')}" in msg and "return annotation" in msg


@ti.kernel
def missing_return(a: ti.i32) -> ti.i32:  # MISSING-RETURN
    if a > 0:
        return 1
    out[0] = a


@ti.kernel
def returns_on_both_branches(a: ti.i32) -> ti.i32:
    if a > 0:
        return 1
    else:
        return 2


def test_typed_kernel_that_can_end_without_return_is_rejected():
    msg = compile_error(missing_return, 1)
    assert f"{FILE}:{line_of('# MISSING-RETURN')}" in msg and "return" in msg
    assert returns_on_both_branches(1) == 1 and returns_on_both_branches(-1) == 2


def test_integer_literals_widen_narrow_operands_like_taichi():
    """An int literal is default_ip (i32): i8/u8/i16 operands widen instead of wrapping;
    a shift keeps the left operand's type."""
    @ti.kernel
    def narrow(a: ti.i8, b: ti.u8, c: ti.i16) -> ti.types.vector(5, ti.i32):
        return ti.Vector([a + 1, b + 100, c * 2, b - 201, ti.cast(a << 1, ti.i32)])

    assert narrow(127, 200, 30000).to_numpy().tolist() == [128, 300, 60000, -1, -2]
