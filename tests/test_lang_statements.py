"""Statements: assignment, atomics via +=, if/elif/else, loops, ti.static, loop_config."""

import numpy as np
import pytest

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


N = 64
a = ti.field(ti.f32, shape=N)
b = ti.field(ti.i32, shape=N)
grid = ti.field(ti.i32, shape=(6, 5))
cube = ti.field(ti.i32, shape=(3, 4, 5))
total_i = ti.field(ti.i32, shape=())
total_f = ti.field(ti.f32, shape=())
total_d = ti.field(ti.f64, shape=())


# ---------------------------------------------------------------- assignment
@ti.kernel
def assign_and_aug(x: ti.f32) -> ti.types.vector(8, ti.f32):
    y = x
    y += 2.0
    z = y
    z *= 3.0
    w = z
    w -= 1.0
    q = w
    q /= 4.0
    p = 17
    p //= 5
    r = 17
    r %= 5
    s = 6
    s **= 2
    u, v = x, 2 * x
    u, v = v, u  # tuple swap uses old values
    return ti.Vector([y, z, w, q, p, r, s, u - v])


def test_assignment_and_augmented_assignment_on_locals():
    out = assign_and_aug(1.0).to_numpy()
    np.testing.assert_allclose(out, [3.0, 9.0, 8.0, 2.0, 3, 2, 36, 1.0])


@ti.kernel
def local_type_fixed_by_first_assignment() -> ti.f32:
    k = 1  # an int variable stays int
    k = 2.7
    f = 1.0
    f = 3  # a float variable stays float
    return k + f


def test_local_variable_type_is_fixed_at_first_assignment():
    assert local_type_fixed_by_first_assignment() == 5.0


@ti.kernel
def annotated_local_dynamic(y: ti.f32) -> ti.f64:
    x: ti.f64 = y
    x += 1e-12 * y
    return x


@ti.kernel
def annotated_local_const() -> ti.types.vector(3, ti.f64):
    x: ti.f64 = 0.1
    z = ti.f64(0.1)
    n: ti.i64 = 1
    n = n << 40
    return ti.Vector([x, z, n])


def test_annotated_local_from_runtime_value():
    assert annotated_local_dynamic(1.0) == pytest.approx(1.0 + 1e-12, rel=0, abs=1e-15)


def test_annotated_local_from_constant_keeps_dtype():
    np.testing.assert_array_equal(annotated_local_const().to_numpy(), [0.1, 0.1, 2.0**40])


@ti.kernel
def global_aug_ops():
    for i in range(N):
        b[i] = i
    for i in range(N):
        b[i] += 3
        b[i] -= 1
        b[i] *= 2
        b[i] //= 3
        b[i] ^= 1
        b[i] |= 8
        b[i] &= 0xFF


def test_global_augmented_assignment():
    global_aug_ops()
    i = np.arange(N)
    expected = ((((i + 3 - 1) * 2) // 3) ^ 1 | 8) & 0xFF
    np.testing.assert_array_equal(b.to_numpy(), expected)


# ---------------------------------------------------------------- atomic reductions
@ti.kernel
def count_ones(n: ti.i32):
    for _ in range(n):
        total_i[None] += 1
        total_f[None] += 1.0


@ti.kernel
def sum_squares(n: ti.i32):
    for i in range(n):
        total_d[None] += ti.cast(i, ti.f64) * i
        total_i[None] -= 2


def test_parallel_sum_of_a_million_ones_is_exact():
    total_i[None] = 0
    total_f[None] = 0.0
    count_ones(10**6)
    assert total_i[None] == 10**6
    assert total_f[None] == 1e6
    count_ones(10**6)  # accumulates onto the previous value
    assert total_i[None] == 2 * 10**6


def test_parallel_reduction_f64_and_sub():
    total_d[None] = 0.0
    total_i[None] = 0
    n = 200_000
    sum_squares(n)
    assert total_d[None] == float(sum(i * i for i in range(n)))
    assert total_i[None] == -2 * n


@ti.kernel
def histogram(x: ti.types.ndarray(), hist: ti.types.ndarray()):
    for i in range(x.shape[0]):
        hist[x[i]] += 1


def test_parallel_scatter_add_is_atomic():
    x = np.random.default_rng(0).integers(0, 7, size=100_000).astype(np.int32)
    hist = np.zeros(7, dtype=np.int32)
    histogram(x, hist)
    np.testing.assert_array_equal(hist, np.bincount(x, minlength=7))


# ---------------------------------------------------------------- if / elif / else
@ti.kernel
def classify():
    for i in range(N):
        v = i - 32
        if v < -10:
            b[i] = -2
        elif v < 0:
            b[i] = -1
        elif v == 0:
            b[i] = 0
        else:
            if v % 2 == 0:
                b[i] = 2
            else:
                b[i] = 1


def test_if_elif_else():
    classify()
    v = np.arange(N) - 32
    expected = np.select([v < -10, v < 0, v == 0, v % 2 == 0], [-2, -1, 0, 2], 1)
    np.testing.assert_array_equal(b.to_numpy(), expected)


@ti.kernel
def ternary(x: ti.f32) -> ti.f32:
    return 1.0 if x > 0 else -1.0


def test_conditional_expression():
    assert ternary(0.5) == 1.0
    assert ternary(-0.5) == -1.0


# ---------------------------------------------------------------- loops
@ti.kernel
def range_forms():
    for i in range(3, 9):
        b[i] = 1000 + i
    for i in range(N - 2, N):
        b[i] = -i


def test_range_with_bounds():
    b.fill(0)
    range_forms()
    expected = np.zeros(N, np.int32)
    expected[3:9] = 1000 + np.arange(3, 9)
    expected[N - 2:] = -np.arange(N - 2, N)
    np.testing.assert_array_equal(b.to_numpy(), expected)


@ti.kernel
def range_dynamic_bounds(lo: ti.i32, hi: ti.i32):
    for i in range(lo, hi):
        b[i] = 7


def test_range_with_runtime_bounds_and_empty_range():
    b.fill(0)
    range_dynamic_bounds(10, 20)
    range_dynamic_bounds(30, 30)
    range_dynamic_bounds(40, 35)  # empty: hi < lo
    expected = np.zeros(N, np.int32)
    expected[10:20] = 7
    np.testing.assert_array_equal(b.to_numpy(), expected)


@ti.kernel
def ndrange_fill():
    for i, j in ti.ndrange(6, 5):
        grid[i, j] = i * 10 + j


@ti.kernel
def ndrange_tuples():
    for i, j in ti.ndrange((1, 5), (2, 4)):
        grid[i, j] = -1
    for i, j, k in ti.ndrange(3, (1, 3), (2, 5)):
        cube[i, j, k] = 1


@ti.kernel
def ndrange_negative_bounds():
    for i, j in ti.ndrange((-2, 2), (-1, 1)):
        grid[i + 2, j + 1] = i * 10 + j


def test_ndrange_negative_lower_bounds():
    grid.fill(99)
    ndrange_negative_bounds()
    out = grid.to_numpy()
    i, j = np.meshgrid(np.arange(-2, 2), np.arange(-1, 1), indexing="ij")
    np.testing.assert_array_equal(out[:4, :2], i * 10 + j)
    assert (out[4:] == 99).all() and (out[:, 2:] == 99).all()


def test_ndrange():
    ndrange_fill()
    i, j = np.meshgrid(np.arange(6), np.arange(5), indexing="ij")
    expected = i * 10 + j
    np.testing.assert_array_equal(grid.to_numpy(), expected)
    cube.fill(0)
    ndrange_tuples()
    expected[1:5, 2:4] = -1
    np.testing.assert_array_equal(grid.to_numpy(), expected)
    cexp = np.zeros((3, 4, 5), np.int32)
    cexp[:, 1:3, 2:5] = 1
    np.testing.assert_array_equal(cube.to_numpy(), cexp)


@ti.kernel
def struct_for():
    for i, j, k in cube:
        cube[i, j, k] = i * 100 + j * 10 + k


@ti.kernel
def grouped_for():
    for I in ti.grouped(grid):
        grid[I] = I[0] * 10 + I[1] + I.sum() * 1000


@ti.kernel
def grouped_ndrange():
    for I in ti.grouped(ti.ndrange((1, 3), 4)):
        cube[I, 0] = -(I[0] * 10 + I[1])


def test_struct_for_over_field():
    struct_for()
    i, j, k = np.meshgrid(np.arange(3), np.arange(4), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(cube.to_numpy(), i * 100 + j * 10 + k)


def test_grouped():
    grouped_for()
    i, j = np.meshgrid(np.arange(6), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(grid.to_numpy(), i * 10 + j + (i + j) * 1000)
    cube.fill(5)
    grouped_ndrange()
    out = cube.to_numpy()
    for ii in range(3):
        for jj in range(4):
            assert out[ii, jj, 0] == (-(ii * 10 + jj) if ii >= 1 else 5)
    assert (out[:, :, 1:] == 5).all()


@ti.kernel
def collatz_steps():
    for i in range(1, N):
        n = i
        steps = 0
        while n != 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
        b[i] = steps


def _collatz(n):
    s = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        s += 1
    return s


def test_while_loop():
    collatz_steps()
    np.testing.assert_array_equal(b.to_numpy()[1:], [_collatz(i) for i in range(1, N)])


@ti.kernel
def break_continue():
    for i in range(N):
        s = 0
        for j in range(100):
            if j % 3 == 0:
                continue
            if j > i:
                break
            s += j
        k = 0
        while True:
            k += 1
            if k * k >= i:
                break
        b[i] = s * 1000 + k


def test_break_continue_in_serial_inner_loops():
    break_continue()
    expected = []
    for i in range(N):
        s = sum(j for j in range(min(i, 99) + 1) if j % 3 != 0)
        k = 0
        while True:
            k += 1
            if k * k >= i:
                break
        expected.append(s * 1000 + k)
    np.testing.assert_array_equal(b.to_numpy(), expected)


# ---------------------------------------------------------------- static
@ti.kernel
def static_unroll(v: ti.types.vector(4, ti.f32)) -> ti.types.vector(4, ti.f32):
    out = ti.Vector([0.0, 0.0, 0.0, 0.0])
    for k in ti.static(range(4)):
        out[k] = v[k] * (k + 1)
    for i, j in ti.static(ti.ndrange(2, 2)):
        out[i * 2 + j] += 100 * i + 10 * j
    for s in ti.static([1.0, 2.0]):
        out[0] += s
    return out


def test_static_unrolling():
    out = static_unroll([1.0, 2.0, 3.0, 4.0]).to_numpy()
    np.testing.assert_allclose(out, [1 + 3, 4 + 10, 9 + 100, 16 + 110])


@ti.kernel
def static_if(mode: ti.template(), x: ti.f32) -> ti.f32:
    r = 0.0
    if ti.static(mode == "square"):
        r = x * x
    elif ti.static(mode == "neg"):
        r = -x
    else:
        r = x
    return r


def test_static_if_picks_branch_at_compile_time():
    assert static_if("square", 3.0) == 9.0
    assert static_if("neg", 3.0) == -3.0
    assert static_if("other", 3.0) == 3.0


@ti.kernel
def static_if_discards_invalid_branch(f: ti.template()) -> ti.f32:
    r = 0.0
    if ti.static(len(f.shape) == 2):
        r = f[1, 1]
    else:
        r = f[1]
    return r


def test_static_if_dead_branch_not_compiled():
    f1 = ti.field(ti.f32, shape=3)
    f2 = ti.field(ti.f32, shape=(2, 2))
    f1[1] = 4.0
    f2[1, 1] = 5.0
    assert static_if_discards_invalid_branch(f1) == 4.0
    assert static_if_discards_invalid_branch(f2) == 5.0


@ti.kernel
def static_assert_kernel(n: ti.template()) -> ti.i32:
    ti.static_assert(n > 2, "n must exceed 2")
    return n


def test_static_assert():
    assert static_assert_kernel(3) == 3
    with pytest.raises((AssertionError, ti.CompileError), match="n must exceed 2"):
        static_assert_kernel(1)


# ---------------------------------------------------------------- serialize
@ti.kernel
def prefix_sum_serial(x: ti.types.ndarray(), out: ti.types.ndarray()):
    acc = 0
    ti.loop_config(serialize=True)
    for i in range(x.shape[0]):
        acc += x[i]
        out[i] = acc


@ti.kernel
def serial_dependency_chain(n: ti.i32):
    ti.loop_config(serialize=True)
    for i in range(1, n):
        b[i] = b[i - 1] * 3 % 1000 + i


def test_loop_config_serialize_prefix_sum():
    x = np.random.default_rng(3).integers(-5, 10, size=100_000).astype(np.int32)
    out = np.zeros_like(x)
    prefix_sum_serial(x, out)
    np.testing.assert_array_equal(out, np.cumsum(x))


def test_loop_config_serialize_dependency_chain():
    b[0] = 1
    serial_dependency_chain(N)
    expected = [1]
    for i in range(1, N):
        expected.append(expected[-1] * 3 % 1000 + i)
    np.testing.assert_array_equal(b.to_numpy(), expected)


# ---------------------------------------------------------------- top-level code and locals
@ti.kernel
def mixed_top_level(x: ti.f32) -> ti.f32:
    scale = x * 2.0
    total_f[None] = 0.0
    for i in range(N):
        a[i] = i * scale
    offset = a[3] + 1.0
    for i in range(N):
        a[i] += offset
    total_f[None] = a[N - 1]
    return offset


def test_top_level_statements_between_parallel_loops():
    off = mixed_top_level(0.5)
    # 'offset' is read after the first loop finished: a[3] == 3.0
    assert off == 4.0
    np.testing.assert_allclose(a.to_numpy(), np.arange(N) * 1.0 + 4.0)
    assert total_f[None] == (N - 1) + 4.0


@ti.kernel
def local_read_in_parallel_loop(k: ti.i32):
    m = k * 3
    v = ti.Vector([1.0, 2.0])
    for i in range(N):
        b[i] = i + m
        a[i] = v[0] + v[1] * i


def test_top_level_locals_read_in_later_parallel_loop():
    local_read_in_parallel_loop(5)
    np.testing.assert_array_equal(b.to_numpy(), np.arange(N) + 15)
    np.testing.assert_allclose(a.to_numpy(), 1.0 + 2.0 * np.arange(N))


@ti.kernel
def local_reduce_in_parallel_loop() -> ti.f32:
    s = 0.0
    for i in range(N):
        s += a[i]
    return s


@ti.kernel
def local_assign_in_parallel_loop(k: ti.i32) -> ti.i32:
    r = 0
    for i in range(1):
        r = k + i
    return r


