"""ti.root axis letters and field offsets, against Taichi 1.7.4's rules.

Taichi: a placed field has one index per axis used, ordered i, j, k, l whatever the nesting
order; shape[a] is the product of the sizes given for axis a along the chain. The expected
values below were worked out from that rule and checked by running each program under
taichi 1.7.4. simrun implements no offsets, so a non-zero one must be refused, not ignored.
"""

import inspect
import os

import numpy as np
import pytest

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


@ti.kernel
def fill_coords(f: ti.template()):
    """f[I] = I written in base 100 (f[3, 1] = 301): shows which logical index got which cell."""
    for I in ti.grouped(f):
        code = 0
        for d in ti.static(range(len(f.shape))):
            code = code * 100 + I[d]
        f[I] = code


def coords(shape) -> np.ndarray:
    """What fill_coords leaves in a field of this shape (to_numpy order)."""
    out = np.zeros(shape, dtype=np.int32)
    for idx in np.ndindex(*shape):
        out[idx] = sum(v * 100 ** (len(shape) - 1 - d) for d, v in enumerate(idx))
    return out


def check_layout(build, shape):
    g = ti.field(ti.i32)
    node = build()
    node.place(g)
    assert node.shape == g.shape == shape
    fill_coords(g)
    np.testing.assert_array_equal(g.to_numpy(), coords(shape))


@pytest.mark.parametrize("build,shape", [
    pytest.param(lambda: ti.root.dense(ti.j, 3).dense(ti.i, 4), (4, 3), id="j3.i4"),
    pytest.param(lambda: ti.root.dense(ti.i, 2).dense(ti.i, 3), (6,), id="i2.i3"),
    pytest.param(lambda: ti.root.dense(ti.j, 2).dense(ti.i, 3).dense(ti.j, 2), (3, 4),
                 id="j2.i3.j2"),
    pytest.param(lambda: ti.root.dense(ti.ij, (2, 3)).dense(ti.ij, (2, 2)), (4, 6),
                 id="ij23.ij22"),
])
def test_shape_follows_axis_letters(build, shape):
    check_layout(build, shape)


@pytest.mark.parametrize("build,shape", [
    pytest.param(lambda: ti.root.dense(ti.j, 3), (3,), id="j3"),
    pytest.param(lambda: ti.root.dense(ti.k, 3), (3,), id="k3"),
    pytest.param(lambda: ti.root.dense(ti.l, 2), (2,), id="l2"),
    pytest.param(lambda: ti.root.dense(ti.i, 2).dense(ti.k, 4), (2, 4), id="i2.k4"),
    pytest.param(lambda: ti.root.dense(ti.ik, (2, 4)), (2, 4), id="ik24"),
    pytest.param(lambda: ti.root.dense(ti.jk, (2, 4)), (2, 4), id="jk24"),
    pytest.param(lambda: ti.root.dense(ti.ij, (2, 3)).dense(ti.k, 4), (2, 3, 4), id="ij23.k4"),
    pytest.param(lambda: ti.root.dense(ti.ij, 3), (3, 3), id="ij3"),
    pytest.param(lambda: ti.root.dense(ti.i, 3).dense(ti.j, 4), (3, 4), id="i3.j4"),
    pytest.param(lambda: ti.root.dense(ti.ij, (3, 4)), (3, 4), id="ij34"),
])
def test_skipped_axes_are_dropped_and_natural_order_is_kept(build, shape):
    """Guards, not regressions: these already matched Taichi and must keep matching."""
    check_layout(build, shape)


@pytest.mark.parametrize("debug", [False, True])
def test_kernel_writes_last_element_of_permuted_field(debug):
    ti.init(arch=ti.cpu, debug=debug)
    g = ti.field(ti.i32)
    after = ti.field(ti.i32, shape=8)  # storage a write past g's end could land in
    ti.root.dense(ti.j, 3).dense(ti.i, 4).place(g)

    @ti.kernel
    def write():
        g[3, 2] = 7
        g[3, 1] = 5

    write()
    expected = np.zeros((4, 3), np.int32)
    expected[3, 2], expected[3, 1] = 7, 5
    np.testing.assert_array_equal(g.to_numpy(), expected)
    assert g[3, 2] == 7
    np.testing.assert_array_equal(after.to_numpy(), np.zeros(8, np.int32))


def test_struct_for_over_repeated_axis_field():
    g = ti.field(ti.i32)
    ti.root.dense(ti.i, 2).dense(ti.i, 3).place(g)

    @ti.kernel
    def squares():
        for i in g:
            g[i] = i * i

    squares()
    np.testing.assert_array_equal(g.to_numpy(), [0, 1, 4, 9, 16, 25])
    g[5] = -1
    assert g[5] == -1


def test_permuted_axes_gradients_share_the_shape():
    x = ti.field(ti.f32)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    ti.root.dense(ti.k, 2).dense(ti.i, 3).place(x)
    ti.root.lazy_grad()
    assert x.shape == x.grad.shape == (3, 2)

    @ti.kernel
    def weighted():
        for i, k in x:
            loss[None] += (10 * i + k) * x[i, k]

    x.fill(1.0)
    with ti.Tape(loss=loss):
        weighted()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.add.outer(10 * np.arange(3), np.arange(2)))


def test_dense_sizes_must_match_axes():
    with pytest.raises(ti.SimrunError, match=r"one positive size per axis \(2 for ti.ij\)"):
        ti.root.dense(ti.ij, (2, 3, 4))
    with pytest.raises(ti.SimrunError, match="positive"):
        ti.root.dense(ti.i, 0)


# ---------------------------------------------------------------- offsets


def _declare_with_offset(kind):
    if kind == "field":
        f = ti.field(ti.i32, shape=4, offset=-2)
    elif kind == "needs_grad":
        f = ti.field(ti.f32, shape=4, offset=-2, needs_grad=True)
    else:
        f = ti.field(ti.i32)
        ti.root.dense(ti.i, 4).place(f, offset=-2)
    return f


@pytest.mark.parametrize("kind", ["field", "needs_grad", "place"])
def test_nonzero_offset_is_refused_with_the_users_line(kind):
    src, first = inspect.getsourcelines(_declare_with_offset)
    line = first + next(n for n, text in enumerate(src)
                        if "offset=-2" in text and (kind == "place") == ("place" in text)
                        and (kind == "needs_grad") == ("needs_grad" in text))
    with pytest.raises(ti.SimrunError) as err:
        _declare_with_offset(kind)
    msg = str(err.value)
    assert f"{os.path.basename(__file__)}:{line}:" in msg
    assert "field 'f'" in msg and "offset=-2" in msg and "not support" in msg
    assert "f[i + 2]" in msg and "range(-2, 2)" in msg


def test_2d_offset_message_shows_shifted_indices():
    with pytest.raises(ti.SimrunError) as err:
        grid = ti.field(ti.f32, shape=(4, 5), offset=(1, -3))  # noqa: F841
    msg = str(err.value)
    assert "grid[i - 1, j + 3]" in msg and "ti.ndrange((1, 5), (-3, 2))" in msg


@pytest.mark.parametrize("offset", [None, 0, (0,), (0, 0)])
def test_zero_offset_still_works(offset):
    shape = (2, 3) if offset == (0, 0) else (4,)
    f = ti.field(ti.i32, shape=shape, offset=offset)
    fill_coords(f)
    np.testing.assert_array_equal(f.to_numpy(), coords(shape))
    g = ti.field(ti.i32)
    ti.root.dense(ti.i, 4).place(g, offset=0 if offset is not None else None)
    assert g.shape == (4,)


@pytest.mark.parametrize("make", [
    lambda: ti.Vector.field(2, ti.f32, shape=4, offset=1),
    lambda: ti.Matrix.field(2, 2, ti.f32, shape=4, offset=1),
])
def test_vector_and_matrix_field_offset_is_refused(make):
    with pytest.raises(ti.SimrunError, match="offset=1"):
        make()


# ---------------------------------------------------------------- indices past an axis
# Without debug, Taichi 1.7.4 does not check indices: it adds index x stride in its memory
# order (dense levels outermost first, axes sorted within a level). These are the cells
# taichi 1.7.4 wrote for each out-of-range write (build, index, logical cell it landed in).
TAICHI_CELLS = [
    pytest.param(lambda: ti.root.dense(ti.axes(1, 0), (2, 3)), (0, 3), (1, 1), id="ji23"),
    pytest.param(lambda: ti.root.dense(ti.j, 3).dense(ti.i, 4), (5, 0), (1, 1), id="j3.i4"),
    pytest.param(lambda: ti.root.dense(ti.k, 2).dense(ti.ij, (2, 3)), (0, 4, 0), (1, 1, 0),
                 id="k2.ij23-j"),
    pytest.param(lambda: ti.root.dense(ti.k, 2).dense(ti.ij, (2, 3)), (2, 0, 0), (0, 0, 1),
                 id="k2.ij23-i"),
]


@pytest.mark.parametrize("build,index,cell", TAICHI_CELLS)
def test_index_past_its_axis_lands_where_taichi_puts_it(build, index, cell):
    g = ti.field(ti.i32)
    build().place(g)
    after = ti.field(ti.i32, shape=64)  # storage a write past g's end could land in

    @ti.kernel
    def poke(a: ti.i32, b: ti.i32, c: ti.i32):
        if ti.static(len(g.shape) == 2):
            g[a, b] = 1
        else:
            g[a, b, c] = 1

    poke(*index, *[0] * (3 - len(index)))
    assert list(zip(*np.nonzero(g.to_numpy()))) == [cell]
    assert not after.to_numpy().any()
    if build().cell_order is not None:  # Python scope reads the same cell, as Taichi's does
        assert g[index] == 1


def test_index_past_the_whole_field_is_refused_in_python_scope():
    g = ti.field(ti.i32)
    ti.root.dense(ti.j, 3).dense(ti.i, 4).place(g)
    with pytest.raises(IndexError, match=r"index 12 out of range for axis 0 of field 'g'"):
        g[12, 0]
    with pytest.raises(IndexError, match=r"index -1 out of range for axis 1"):
        g[0, -1]


def _bouncing_point(T, dt, ground, debug=False):
    """DiffTaichi's misc/rigid_body_toi in brief: `dense(ti.l, T).dense(ti.i, 1)` gives x the
    shape (1, T), and the program indexes x[t, 0]: index t past axis 0, which Taichi's nesting
    puts in cell t. simrun wrote t * T cells past x's end (a later crash inside LLVM)."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, debug=debug)
    x, v = ti.Vector.field(2, ti.f64), ti.Vector.field(2, ti.f64)
    loss = ti.field(ti.f64)
    ti.root.dense(ti.l, T).dense(ti.i, 1).place(x, v)
    ti.root.place(loss)
    ti.root.lazy_grad()

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(1):
            new_v = v[t - 1, i]
            if x[t - 1, i][1] < ground and new_v[1] < 0:
                new_v[1] = -new_v[1]
            v[t, i] = new_v
            x[t, i] = x[t - 1, i] + dt * new_v

    @ti.kernel
    def compute_loss(t: ti.i32):
        loss[None] = x[t, 0][1]

    def run(y0):
        x[0, 0], v[0, 0] = [0.7, y0], [-1.0, -2.0]
        with ti.ad.Tape(loss):
            for t in range(1, T):
                advance(t)
            compute_loss(T - 1)
        return loss[None], x.grad[0, 0][1], x

    return run


def _bounce_numpy(y0, T, dt, ground):
    y, vy = y0, -2.0
    for _ in range(1, T):
        vy = -vy if y < ground and vy < 0 else vy
        y += dt * vy
    return y


def test_time_major_field_indexed_past_its_axis_runs_as_under_taichi():
    T, dt, ground, y0 = 48, 0.01, 0.1, 0.505
    run = _bouncing_point(T, dt, ground)
    value, grad, x = run(y0)
    assert value == pytest.approx(_bounce_numpy(y0, T, dt, ground), rel=1e-12)
    h = 1e-6  # no bounce changes step within +-h: the loss is linear there
    fd = (_bounce_numpy(y0 + h, T, dt, ground) - _bounce_numpy(y0 - h, T, dt, ground)) / (2 * h)
    assert grad == pytest.approx(fd, rel=1e-6)
    assert x.shape == (1, T) and x.to_numpy()[0, T - 1, 1] == value  # x[t, 0] is cell t


def test_time_major_field_indexed_past_its_axis_is_reported_under_debug():
    run = _bouncing_point(8, 0.01, 0.1, debug=True)
    with pytest.raises(IndexError, match=r"in kernel 'advance': index \(1, 0\) is out of "
                                           r"range for field '\w+' of shape \(1, 8\)"):
        run(0.5)
