"""Debug-mode bounds checks and asserts; compile errors that point at the user's source."""

import os

import numpy as np
import pytest

import simrun.lang as ti

FILE = os.path.basename(__file__)


def line_of(snippet: str) -> int:
    """1-based line number of the only line of this file containing `snippet`."""
    with open(__file__) as fh:
        hits = [n for n, line in enumerate(fh, 1) if snippet in line]
    assert len(hits) == 2, hits  # the kernel line and the call of line_of itself
    return hits[0]


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


# ---------------------------------------------------------------- debug mode
dbg = ti.field(ti.f32, shape=8, name="dbg_field")
dbg2 = ti.field(ti.i32, shape=(3, 4), name="dbg_grid")


@ti.kernel
def read_past_end(n: ti.i32) -> ti.f32:
    s = 0.0
    ti.loop_config(serialize=True)
    for i in range(n):
        s += dbg[i + 1]  # OOB-READ
    return s


@ti.kernel
def write_negative(k: ti.i32):
    for i in range(4):
        dbg[i - k] = 1.0  # OOB-NEG


@ti.kernel
def write_2d(r: ti.i32, c: ti.i32):
    dbg2[r, c] = 5  # OOB-2D


@ti.kernel
def parallel_oob(n: ti.i32):
    for i in range(n):
        dbg[i] = i  # OOB-PAR


def test_debug_out_of_range_read_raises_index_error():
    ti.init(arch=ti.cpu, debug=True)
    dbg.fill(1.0)
    assert read_past_end(7) == 7.0  # in range: fine
    with pytest.raises(IndexError) as exc:
        read_past_end(8)
    msg = str(exc.value)
    assert "read_past_end" in msg
    assert "dbg_field" in msg
    assert "8" in msg
    assert f"{FILE}:{line_of('# OOB-READ')}" in msg
    assert "dbg[i + 1]" in msg


def test_debug_negative_index_raises():
    ti.init(arch=ti.cpu, debug=True)
    write_negative(0)
    with pytest.raises(IndexError) as exc:
        write_negative(2)
    msg = str(exc.value)
    assert "write_negative" in msg and "dbg_field" in msg
    assert "-2" in msg or "-1" in msg
    assert f"{FILE}:{line_of('# OOB-NEG')}" in msg


def test_debug_2d_index_names_all_indices():
    ti.init(arch=ti.cpu, debug=True)
    write_2d(2, 3)
    assert dbg2[2, 3] == 5
    with pytest.raises(IndexError) as exc:
        write_2d(1, 4)
    msg = str(exc.value)
    assert "write_2d" in msg and "dbg_grid" in msg
    assert "(1, 4)" in msg
    assert "(3, 4)" in msg  # the field's shape
    assert f"{FILE}:{line_of('# OOB-2D')}" in msg


def test_debug_out_of_range_in_parallel_loop_and_recovery():
    ti.init(arch=ti.cpu, debug=True)
    with pytest.raises(IndexError) as exc:
        parallel_oob(100_000)
    assert "parallel_oob" in str(exc.value) and "dbg_field" in str(exc.value)
    assert f"{FILE}:{line_of('# OOB-PAR')}" in str(exc.value)
    parallel_oob(8)  # the process and the kernel stay usable
    np.testing.assert_array_equal(dbg.to_numpy(), np.arange(8))


@ti.kernel
def nd_oob(x: ti.types.ndarray()):
    for i in range(x.shape[0] + 1):
        x[i] = 1.0  # OOB-ND


def test_debug_ndarray_out_of_range():
    ti.init(arch=ti.cpu, debug=True)
    with pytest.raises(IndexError) as exc:
        nd_oob(np.zeros(5, np.float32))
    assert "nd_oob" in str(exc.value)
    assert f"{FILE}:{line_of('# OOB-ND')}" in str(exc.value)


@ti.kernel
def checked_sqrt(x: ti.f32) -> ti.f32:
    assert x >= 0, "x must be non-negative"  # ASSERT-MSG
    return ti.sqrt(x)


@ti.kernel
def checked_loop(x: ti.types.ndarray()):
    for i in range(x.shape[0]):
        assert x[i] < 10  # ASSERT-LOOP
        x[i] *= 2


def test_debug_assert_raises_assertion_error():
    ti.init(arch=ti.cpu, debug=True)
    assert checked_sqrt(4.0) == 2.0
    with pytest.raises(AssertionError) as exc:
        checked_sqrt(-1.0)
    msg = str(exc.value)
    assert "x must be non-negative" in msg
    assert "checked_sqrt" in msg
    assert f"{FILE}:{line_of('# ASSERT-MSG')}" in msg


def test_debug_assert_in_parallel_loop():
    ti.init(arch=ti.cpu, debug=True)
    x = np.arange(12, dtype=np.float32)
    with pytest.raises(AssertionError) as exc:
        checked_loop(x)
    assert "x[i] < 10" in str(exc.value)
    assert f"{FILE}:{line_of('# ASSERT-LOOP')}" in str(exc.value)
    x = np.arange(5, dtype=np.float32)
    checked_loop(x)
    np.testing.assert_array_equal(x, 2 * np.arange(5))


def test_assert_ignored_without_debug():
    ti.init(arch=ti.cpu, debug=False)
    x = np.arange(12, dtype=np.float32)
    checked_loop(x)
    np.testing.assert_array_equal(x, 2 * np.arange(12))


def test_debug_mode_results_match_release():
    dbg.from_numpy(np.linspace(0, 1, 8, dtype=np.float32))
    ti.init(arch=ti.cpu, debug=False)
    r1 = read_past_end(7)
    ti.init(arch=ti.cpu, debug=True)
    assert read_past_end(7) == r1


# ---------------------------------------------------------------- compile errors
def _compile_error(kernel, *args) -> str:
    with pytest.raises(ti.CompileError) as exc:
        kernel(*args)
    msg = str(exc.value)
    assert "Traceback" not in msg
    assert FILE in msg
    return msg


@ti.kernel
def uses_undefined_name() -> ti.f32:
    a = 1.0
    return a + undefined_thing  # noqa: F821  UNDEF-NAME


def test_undefined_name():
    msg = _compile_error(uses_undefined_name)
    assert "undefined_thing" in msg
    assert "not defined" in msg
    assert "uses_undefined_name" in msg
    assert f"{FILE}:{line_of('UNDEF-NAME')}" in msg


@ti.kernel
def uses_lambda(x: ti.f32) -> ti.f32:
    f = lambda v: v * 2  # LAMBDA
    return f(x)


def test_lambda_rejected():
    msg = _compile_error(uses_lambda, 1.0)
    assert "lambda" in msg.lower()
    assert "uses_lambda" in msg
    assert f"{FILE}:{line_of('# LAMBDA')}" in msg


@ti.kernel
def uses_try(x: ti.f32) -> ti.f32:
    r = 0.0
    try:  # TRY-STMT
        r = x
    except Exception:
        r = 1.0
    return r


def test_try_rejected():
    msg = _compile_error(uses_try, 1.0)
    assert "Try" in msg or "try" in msg
    assert "uses_try" in msg
    assert f"{FILE}:{line_of('# TRY-STMT')}" in msg


@ti.kernel
def uses_with():
    with open("x"):  # WITH-STMT
        pass


def test_with_rejected():
    msg = _compile_error(uses_with)
    assert "uses_with" in msg
    assert f"{FILE}:{line_of('# WITH-STMT')}" in msg


@ti.kernel
def break_in_parallel_loop():
    for i in range(10):
        if i > 5:
            break  # PAR-BREAK
        dbg[i] = i


def test_break_in_outermost_parallel_loop_rejected():
    msg = _compile_error(break_in_parallel_loop)
    assert "break" in msg
    assert "break_in_parallel_loop" in msg
    assert f"{FILE}:{line_of('# PAR-BREAK')}" in msg


@ti.kernel
def continue_in_parallel_loop():
    for i in range(10):
        if i > 5:
            continue  # PAR-CONTINUE
        dbg[i] = i


def test_continue_in_outermost_parallel_loop_allowed():
    # Taichi allows `continue` (but not `break`) in the parallel loop
    dbg.fill(-1.0)
    continue_in_parallel_loop()
    np.testing.assert_array_equal(dbg.to_numpy(), [0, 1, 2, 3, 4, 5, -1, -1])


@ti.kernel
def wrong_index_count():
    for i in range(3):
        dbg2[i] = 1  # WRONG-ARITY


def test_wrong_number_of_field_indices():
    msg = _compile_error(wrong_index_count)
    assert "dbg_grid" in msg
    assert "wrong_index_count" in msg
    assert f"{FILE}:{line_of('# WRONG-ARITY')}" in msg


@ti.kernel
def return_without_annotation():
    return 1.0  # NO-ANN


def test_return_without_annotation():
    msg = _compile_error(return_without_annotation)
    assert "annotation" in msg
    assert f"{FILE}:{line_of('# NO-ANN')}" in msg


@ti.kernel
def return_in_loop() -> ti.i32:
    for i in range(3):
        return i  # RET-LOOP
    return 0


def test_return_inside_loop_rejected():
    msg = _compile_error(return_in_loop)
    assert "return_in_loop" in msg
    assert f"{FILE}:{line_of('# RET-LOOP')}" in msg


@ti.kernel
def vector_into_scalar():
    s = 0.0
    s = ti.Vector([1.0, 2.0])  # noqa: F841  VEC-SCALAR


def test_assign_vector_to_scalar_rejected():
    msg = _compile_error(vector_into_scalar)
    assert "vector_into_scalar" in msg
    assert f"{FILE}:{line_of('VEC-SCALAR')}" in msg


@ti.func
def helper_with_error(x):
    return x + not_defined_in_func  # noqa: F821  FUNC-UNDEF


@ti.kernel
def calls_bad_func(x: ti.f32) -> ti.f32:
    return helper_with_error(x)


def test_error_inside_func_points_at_func_line():
    msg = _compile_error(calls_bad_func, 1.0)
    assert "not_defined_in_func" in msg
    assert "calls_bad_func" in msg
    assert f"{FILE}:{line_of('FUNC-UNDEF')}" in msg


@ti.kernel
def dynamic_local_matrix_row(k: ti.i32) -> ti.f32:
    m = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
    return m[k][0]  # DYN-ROW


def test_runtime_row_index_into_a_local_matrix_is_a_clear_error():
    """A runtime index picks a cell (m[j, k]); a whole row needs a constant index."""
    msg = _compile_error(dynamic_local_matrix_row, 1)
    assert "runtime index into a 2x2 matrix needs 2 indices" in msg
    assert f"{FILE}:{line_of('# DYN-ROW')}" in msg


def test_compile_error_is_a_simrun_error():
    assert issubclass(ti.CompileError, ti.SimrunError)
