"""Cases that used to give a wrong number without an error (issue 14), each with its siblings.

Where Taichi 1.7.4 is right, the expected values are Taichi's (checked side by side with
`import taichi as ti`); where Taichi wraps or truncates silently, simrun raises instead.
"""

import re

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.errors import CompileError


@pytest.fixture(params=[False, True], ids=["release", "debug"])
def debug(request):
    ti.init(arch=ti.cpu, debug=request.param)
    return request.param


# ------------------------------------------------ Python-scope writes to one component
def test_component_writes_reach_the_field(debug):
    v = ti.Vector.field(3, ti.f32, shape=4)
    m = ti.Matrix.field(2, 2, ti.f32, shape=4)
    v[1][0] = 5.0
    v[2].y = 7.0
    m[1][0, 1] = 3.0
    m[2][1][0] = 4.0  # a row of a matrix element (Taichi refuses this form)
    m[3][1] = [8.0, 9.0]  # a whole row
    want_v = np.zeros((4, 3), np.float32)
    want_v[1, 0], want_v[2, 1] = 5, 7
    want_m = np.zeros((4, 2, 2), np.float32)
    want_m[1, 0, 1], want_m[2, 1, 0], want_m[3, 1] = 3, 4, [8, 9]
    np.testing.assert_array_equal(v.to_numpy(), want_v)
    np.testing.assert_array_equal(m.to_numpy(), want_m)

    total = ti.field(ti.f32, shape=())

    @ti.kernel
    def sum_all():
        for i in v:
            total[None] += v[i].sum() + m[i].sum()

    sum_all()  # a kernel sees the Python-scope writes
    assert total[None] == want_v.sum() + want_m.sum()


def test_component_writes_to_gradients_and_0d_elements(debug):
    x = ti.Vector.field(2, ti.f64, shape=3, needs_grad=True)
    p = ti.Vector.field(2, ti.f64, shape=())
    x.grad[2][1] = 1.5
    p[None][0] = 2.5
    assert x.grad.to_numpy()[2, 1] == 1.5
    assert p.to_numpy().tolist() == [2.5, 0.0]
    e = p[None]  # a value read earlier keeps its value; only the written entry changes
    p[None] = [1.0, 1.0]
    e[1] = 4.0
    assert p.to_numpy().tolist() == [1.0, 4.0]


def test_component_write_counts_as_a_write_for_the_tape(debug):
    """kernel.grad() checks field versions to know whether its inputs changed."""
    x = ti.Vector.field(2, ti.f32, shape=2)
    before = x.version
    x[0][1] = 1.0
    assert x.version > before


# ------------------------------------------------ forward mode leaves no seed behind
def _fwd_fields():
    x = ti.field(ti.f32, shape=3, needs_dual=True)
    y = ti.field(ti.f32, shape=3, needs_dual=True, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def f():
        for i in x:
            y[i] = x[i] ** 2
            loss[None] += x[i]

    x.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    return x, y, loss, f


def test_fwdmode_clears_its_seed_and_a_later_tape_keeps_duals(debug):
    x, y, loss, f = _fwd_fields()
    with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 1.0, 1.0]):
        f()
    assert x.dual.to_numpy().tolist() == [0.0, 0.0, 0.0]  # Taichi 1.7.4: cleared
    assert y.dual.to_numpy().tolist() == [2.0, 4.0, 6.0]
    loss_tangent = loss.dual[None]
    assert loss_tangent == 3.0
    with ti.ad.Tape(loss=loss):
        f()
    # Taichi 1.7.4 leaves the duals alone outside FwdMode: the tangents stay readable
    assert y.dual.to_numpy().tolist() == [2.0, 4.0, 6.0]
    assert loss.dual[None] == loss_tangent
    # a second FwdMode without clearing starts from no leftover seed
    with ti.ad.FwdMode(loss=y, param=x, seed=[0.0, 1.0, 0.0], clear_gradients=False):
        f()
    assert y.dual.to_numpy().tolist() == [0.0, 4.0, 0.0]


def test_fwdmode_on_a_field_that_is_also_its_loss_keeps_the_result(debug):
    e = ti.field(ti.f64, shape=3, needs_dual=True)

    @ti.kernel
    def chain():
        for _ in range(1):
            for i in range(2):
                e[i + 1] = 3.0 * e[i]

    e[0] = 1.0
    with ti.ad.FwdMode(loss=e, param=e, seed=[1.0, 0.0, 0.0]):
        chain()
    assert e.dual.to_numpy().tolist() == [0.0, 3.0, 9.0]  # the seed cleared, the result kept


# ------------------------------------------------ ti.stop_grad is scoped to its block
@pytest.fixture
def stop_fields():
    x = ti.field(ti.f64, shape=4, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    x.from_numpy(np.arange(4.0))
    return x, loss


def _grads(kernel, x, loss):
    with ti.ad.Tape(loss):
        kernel()
    reverse = x.grad.to_numpy()
    with ti.ad.FwdMode(loss=loss, param=x, seed=np.ones(4)):
        kernel()
    return reverse, loss.dual[None]


def test_stop_grad_in_one_loop_leaves_the_other_loop(debug, stop_fields):
    x, loss = stop_fields

    @ti.kernel
    def k():
        for i in x:
            ti.stop_grad(x)
            loss[None] += x[i] ** 2
        for i in x:
            loss[None] += 3 * x[i]

    reverse, forward = _grads(k, x, loss)
    np.testing.assert_array_equal(reverse, [3.0, 3.0, 3.0, 3.0])  # Taichi 1.7.4's values
    assert forward == 12.0


def test_stop_grad_at_the_top_level_covers_every_loop(debug, stop_fields):
    x, loss = stop_fields

    @ti.kernel
    def k():
        ti.stop_grad(x)
        for i in x:
            loss[None] += x[i] ** 2
        for i in x:
            loss[None] += 3 * x[i]

    reverse, forward = _grads(k, x, loss)
    np.testing.assert_array_equal(reverse, np.zeros(4))
    assert forward == 0.0


def test_stop_grad_after_the_load_in_its_block_still_holds(debug, stop_fields):
    x, loss = stop_fields

    @ti.kernel
    def k():
        for i in x:
            loss[None] += x[i] ** 2
            ti.stop_grad(x)
        for i in x:
            loss[None] += x[i]

    reverse, forward = _grads(k, x, loss)
    np.testing.assert_array_equal(reverse, np.ones(4))  # Taichi: the whole block, any order
    assert forward == 4.0


# ------------------------------------------------ debug bounds checks at full width
def test_debug_checks_64_bit_indices():
    ti.init(arch=ti.cpu, debug=True)
    a = ti.field(ti.f32, shape=16)

    @ti.kernel
    def write_far():
        a[2**40] = 7.0

    @ti.kernel
    def write_at(i: ti.i64):
        a[i] = 7.0

    with pytest.raises(IndexError, match=r"1099511627776.*'a'"):
        write_far()
    with pytest.raises(IndexError, match=r"4294967297.*'a'"):
        write_at(2**32 + 1)
    write_at(15)
    assert a.to_numpy().tolist() == [0.0] * 15 + [7.0]  # nothing else was written


# ------------------------------------------------ arguments must fit their types
def test_argument_out_of_range_is_an_error_naming_it(debug):
    a = ti.field(ti.i64, shape=2)

    @ti.kernel
    def put(i: ti.i32, small: ti.u8, x: ti.f32):
        a[0] = ti.cast(i, ti.i64) + small
        a[1] = ti.cast(x, ti.i64)

    put(2**31 - 1, 255, 3.0e38)
    assert a[0] == 2**31 - 1 + 255
    put(-2**31, 0, -1.0)
    assert a.to_numpy().tolist() == [-2**31, -1]
    for args, arg in [((2**40, 0, 0.0), "'i' (i32)"), ((2**31, 0, 0.0), "'i' (i32)"),
                      ((np.int64(2**40), 0, 0.0), "'i' (i32)"), ((0, 256, 0.0), "'small' (u8)"),
                      ((0, -1, 0.0), "'small' (u8)"), ((0, 0, 1e39), "'x' (f32)")]:
        with pytest.raises(OverflowError, match=re.escape(f"kernel 'put' argument {arg}")):
            put(*args)
    for bad in (None, "a", [1]):
        with pytest.raises(TypeError, match="kernel 'put' argument 'i' \\(i32\\) takes a number"):
            put(bad, 0, 0.0)
    assert a.to_numpy().tolist() == [-2**31, -1]  # refused launches wrote nothing


def test_matrix_argument_entries_are_checked(debug):
    out = ti.field(ti.i32, shape=())

    @ti.kernel
    def total(v: ti.types.vector(2, ti.i32)):
        out[None] = v[0] + v[1]

    total(ti.Vector([1, 2]))
    assert out[None] == 3
    with pytest.raises(OverflowError, match="kernel 'total' argument 'v'"):
        total(ti.Vector([1, 2**40]))


def test_integer_field_writes_from_python_must_fit(debug):
    a = ti.field(ti.i32, shape=3)
    with pytest.raises(OverflowError, match="'a' \\(i32\\)"):
        a.from_numpy(np.array([1, 2, 2**40]))
    with pytest.raises(OverflowError):
        a.fill(np.int64(2**40))
    with pytest.raises(OverflowError):
        a[0] = np.int64(2**33)
    with pytest.raises(ValueError, match="NaN"):
        a.from_numpy(np.array([1.0, np.nan, 2.0]))
    a.from_numpy(np.array([1.5, 2.5, -3.5]))  # float to int truncates, as a cast does
    assert a.to_numpy().tolist() == [1, 2, -3]


# ------------------------------------------------ loop bounds keep their width
def test_range_bounds_past_32_bits(debug):
    total = ti.field(ti.i64, shape=4)
    big = 2**32

    @ti.kernel
    def loops():
        for j in range(big, big + 3):  # parallel
            total[0] += j
        for _ in range(1):
            for j in range(big, big + 3):  # serial
                total[1] += j
            for j in range(big, big + 9, 3):  # stepped
                total[2] += j
        for i, j in ti.ndrange((big, big + 2), 2):
            total[3] += i + j

    loops()
    assert total.to_numpy().tolist() == [3 * big + 3, 3 * big + 3, 3 * big + 9,
                                         4 * big + 4]


def test_a_literal_past_32_bits_widens_what_it_meets(debug):
    small = ti.field(ti.i32, shape=())
    out = ti.field(ti.i64, shape=2)

    @ti.kernel
    def add():
        out[0] = small[None] + 2**40  # was: the literal wrapped to i32 0, giving 1
        out[1] = 2**70 // 2**40  # Python folds its own ints exactly

    small[None] = 1
    add()
    assert out.to_numpy().tolist() == [2**40 + 1, 2**30]


# ------------------------------------------------ constant folding is bounded and typed
def test_huge_constant_power_is_refused_quickly():
    ti.init(arch=ti.cpu)
    b = ti.field(ti.i64, shape=1)

    @ti.kernel
    def huge():
        b[0] = 3 ** 2147483647

    @ti.kernel
    def too_wide():
        b[0] = 2**70

    with pytest.raises(CompileError, match="far beyond 64 bits"):
        huge()
    with pytest.raises(CompileError, match="does not fit in 64 bits"):
        too_wide()


@pytest.mark.parametrize("dt, base, n", [(ti.i64, 3, 2147483647), (ti.i32, 3, 41),
                                         (ti.i32, -7, 12345), (ti.u8, 5, 9)])
def test_folded_integer_power_matches_the_generated_code(debug, dt, base, n):
    out = ti.field(dt, shape=2)

    @ti.kernel
    def powers(m: ti.i32):
        out[0] = ti.cast(base, dt) ** n  # folded at compile time
        out[1] = ti.cast(base, dt) ** m  # computed by the machine

    powers(n)
    bits = np.iinfo(dt.np).bits
    wrapped = pow(base, n, 1 << bits)
    if np.iinfo(dt.np).min < 0 and wrapped >= 1 << (bits - 1):
        wrapped -= 1 << bits
    assert out.to_numpy().tolist() == [wrapped, wrapped]


# ------------------------------------------------ shifts by the width or more
def test_shift_past_the_width_is_defined_and_folds_like_the_machine(debug):
    """LLVM's shift is poison at >= the width: an index built from one made writes vanish (or
    land anywhere). simrun defines it: << and unsigned >> give 0, signed >> the sign bits;
    a folded constant shift gives what the generated code gives."""
    x = ti.field(ti.f32, shape=8)
    n = ti.field(ti.i32, shape=8)
    out = ti.field(ti.i64, shape=7)

    @ti.kernel
    def scatter():
        for i in x:
            x[(n[i] >> (1 << 30)) % 8] += 1.0

    @ti.kernel
    def shifts(a: ti.i32, sh: ti.i32):
        out[0] = a << sh
        out[1] = a >> sh
        out[2] = ti.cast(a, ti.u32) >> sh
        out[3] = a << 40  # the amount is a constant, the value is not
        out[4] = a >> 40
        out[5] = -5 >> 40  # both constant: folded
        out[6] = 5 << 35  # Python ints: folded exactly, as Python does

    scatter()
    assert x.to_numpy().tolist() == [8.0] + [0.0] * 7  # every write lands on x[0]
    for a, sh, want in [(5, 3, [40, 0, 0]), (5, 40, [0, 0, 0]), (-5, 40, [0, -1, 0]),
                        (-5, -1, [0, -1, 0]), (-5, 31, [-2**31, -1, 1])]:
        shifts(a, sh)
        assert out.to_numpy().tolist() == want + [0, -1 if a < 0 else 0, -1, 5 << 35], (a, sh)


def test_constant_vector_index_out_of_range_names_the_size():
    ti.init(arch=ti.cpu)
    v = ti.Vector.field(2, ti.f32, shape=4)

    @ti.kernel
    def past_end():
        for i in v:
            v[i][5] = 1.0

    with pytest.raises(CompileError, match="entry index 5 is out of range for a 2-vector"):
        past_end()
