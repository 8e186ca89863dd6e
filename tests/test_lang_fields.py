"""Fields: shapes 0-D to 4-D, vector/matrix fields, ti.root layouts, Python-scope access."""

import numpy as np
import pytest

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


@ti.kernel
def fill_linear(f: ti.template()):
    """f[I] = row-major flat index of I, for a scalar field of any dimension."""
    for I in ti.grouped(f):
        flat = 0
        for d in ti.static(range(len(f.shape))):
            flat = flat * f.shape[d] + I[d]
        f[I] = flat


@ti.kernel
def fill_components(f: ti.template()):
    """Element k of f[i] = 10 * i + k for a 1-D vector or matrix field."""
    for i in f:
        for k in ti.static(range(f.n)):
            for m in ti.static(range(f.m)):
                f[i][k, m] = 10 * i + k * f.m + m


@ti.kernel
def fill_vec_components(f: ti.template()):
    for i in f:
        for k in ti.static(range(f.n)):
            f[i][k] = 10 * i + k


@ti.kernel
def scale_into(dst: ti.template(), src: ti.template(), s: ti.f32):
    for I in ti.grouped(src):
        dst[I] = src[I] * s


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (2, 3, 2, 3)])
@pytest.mark.parametrize("dtype", [ti.f32, ti.f64, ti.i32, ti.i64])
def test_field_nd_kernel_writes_row_major_index(shape, dtype):
    f = ti.field(dtype, shape=shape)
    assert f.shape == shape
    assert f.dtype == dtype
    fill_linear(f)
    arr = f.to_numpy()
    assert arr.shape == shape
    assert arr.dtype == dtype.np
    np.testing.assert_array_equal(arr, np.arange(np.prod(shape)).reshape(shape))


def test_field_0d_python_and_kernel():
    f = ti.field(ti.f32, shape=())
    assert f.shape == ()
    f[None] = 2.5
    assert f[None] == 2.5

    @ti.kernel
    def double():
        f[None] = f[None] * 2

    double()
    assert f[None] == 5.0
    assert f.to_numpy().shape == ()


def test_field_python_scope_get_set_and_types():
    f = ti.field(ti.i32, shape=(3, 4))
    f[1, 2] = 7
    f[2, 3] = -4
    assert f[1, 2] == 7 and f[2, 3] == -4 and f[0, 0] == 0
    assert isinstance(f[1, 2], int)
    g = ti.field(ti.f64, shape=5)
    g[4] = 0.1
    assert isinstance(g[4], float)
    assert g[4] == 0.1  # f64 storage keeps full precision
    h = ti.field(ti.f32, shape=5)
    h[4] = 0.1
    assert h[4] == pytest.approx(0.1, rel=1e-7) and h[4] != 0.1  # f32 storage rounds


def test_field_python_type_dtypes_follow_defaults():
    ti.init(arch=ti.cpu, default_fp=ti.f64, default_ip=ti.i64)
    assert ti.field(float, shape=2).dtype == ti.f64
    assert ti.field(int, shape=2).dtype == ti.i64
    ti.init(arch=ti.cpu)
    assert ti.field(float, shape=2).dtype == ti.f32
    assert ti.field(int, shape=2).dtype == ti.i32


@pytest.mark.parametrize("key", [5, -1, 100])
def test_field_python_out_of_range_raises_index_error(key):
    f = ti.field(ti.f32, shape=5)
    with pytest.raises(IndexError):
        f[key]
    with pytest.raises(IndexError):
        f[key] = 1.0


def test_field_python_out_of_range_2d_and_wrong_arity():
    f = ti.field(ti.f32, shape=(2, 3))
    with pytest.raises(IndexError):
        f[0, 3]
    with pytest.raises(IndexError):
        f[2, 0] = 1
    with pytest.raises(IndexError):
        f[0]
    z = ti.field(ti.f32, shape=())
    with pytest.raises(IndexError):
        z[0]
    v = ti.Vector.field(2, ti.f32, shape=3)
    with pytest.raises(IndexError):
        v[3]


def test_to_numpy_from_numpy_roundtrip_and_copy():
    f = ti.field(ti.f64, shape=(4, 3))
    src = np.random.default_rng(0).normal(size=(4, 3))
    f.from_numpy(src)
    out = f.to_numpy()
    np.testing.assert_array_equal(out, src)
    out[0, 0] = 1e9  # to_numpy returns a copy
    assert f[0, 0] == src[0, 0]
    with pytest.raises(ValueError):
        f.from_numpy(np.zeros((3, 4)))


def test_from_numpy_converts_dtype():
    f = ti.field(ti.i32, shape=4)
    f.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(f.to_numpy(), [1, 2, 3, 4])
    assert f.to_numpy().dtype == np.int32


def test_fill_and_copy_from():
    a = ti.field(ti.f32, shape=(3, 3))
    b = ti.field(ti.f32, shape=(3, 3))
    a.fill(1.5)
    np.testing.assert_array_equal(a.to_numpy(), np.full((3, 3), 1.5, np.float32))
    a[1, 1] = -2.0
    b.copy_from(a)
    np.testing.assert_array_equal(b.to_numpy(), a.to_numpy())
    a.fill(0)
    assert b[1, 1] == -2.0  # copy, not alias


def test_kernel_reads_python_scope_writes_and_numpy():
    src = ti.field(ti.f32, shape=(2, 3))
    dst = ti.field(ti.f32, shape=(2, 3))
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    src.from_numpy(data)
    scale_into(dst, src, 3.0)
    np.testing.assert_array_equal(dst.to_numpy(), data * 3)
    src[1, 2] = 100.0
    scale_into(dst, src, 0.5)
    assert dst[1, 2] == 50.0


@pytest.mark.parametrize("n", [2, 3, 4])
def test_vector_field(n):
    v = ti.Vector.field(n, dtype=ti.f32, shape=5)
    assert v.shape == (5,)
    assert v.n == n
    assert v.to_numpy().shape == (5, n)
    fill_vec_components(v)
    expected = 10 * np.arange(5)[:, None] + np.arange(n)[None, :]
    np.testing.assert_array_equal(v.to_numpy(), expected)
    elem = v[3]
    np.testing.assert_array_equal(elem.to_numpy(), expected[3])
    v[2] = list(range(100, 100 + n))
    np.testing.assert_array_equal(v.to_numpy()[2], np.arange(100, 100 + n))


def test_0d_vector_field():
    v = ti.Vector.field(3, ti.f32, shape=())

    @ti.kernel
    def k():
        v[None] = [1.0, 2.0, 3.0]
        v[None] += v[None] * 2

    k()
    np.testing.assert_array_equal(v[None].to_numpy(), [3.0, 6.0, 9.0])
    assert v.to_numpy().shape == (3,)
    v[None] = [0.0, 1.0, 0.0]
    assert v[None].y == 1.0


def test_field_indexed_by_vector_in_kernel():
    f = ti.field(ti.i32, shape=(3, 4, 2))

    @ti.kernel
    def k():
        for i, j in ti.ndrange(3, 4):
            I = ti.Vector([i, j])
            f[I, 1] = i * 10 + j
            f[I, 0] = f[i, j, 1] + 1

    k()
    i, j = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(f.to_numpy()[..., 1], i * 10 + j)
    np.testing.assert_array_equal(f.to_numpy()[..., 0], i * 10 + j + 1)


def test_vector_field_xyz_in_python_scope():
    v = ti.Vector.field(3, dtype=ti.f32, shape=2)
    v[1] = [1.0, 2.0, 3.0]
    assert (v[1].x, v[1].y, v[1].z) == (1.0, 2.0, 3.0)
    assert v[1][2] == 3.0


@pytest.mark.parametrize("n,m", [(2, 2), (2, 3), (3, 3)])
def test_matrix_field(n, m):
    mf = ti.Matrix.field(n, m, dtype=ti.f64, shape=4)
    assert mf.shape == (4,)
    assert mf.to_numpy().shape == (4, n, m)
    fill_components(mf)
    expected = 10 * np.arange(4)[:, None, None] + np.arange(n * m).reshape(n, m)[None]
    np.testing.assert_array_equal(mf.to_numpy(), expected)
    np.testing.assert_array_equal(mf[1].to_numpy(), expected[1])
    mf[0] = np.ones((n, m))
    np.testing.assert_array_equal(mf.to_numpy()[0], np.ones((n, m)))


def test_vector_matrix_field_from_numpy():
    v = ti.Vector.field(3, dtype=ti.f32, shape=(2, 2))
    data = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    v.from_numpy(data)
    assert v[1, 0][2] == data[1, 0, 2]

    @ti.kernel
    def norms(out: ti.template()):
        for i, j in v:
            out[i, j] = v[i, j].norm()

    out = ti.field(ti.f32, shape=(2, 2))
    norms(out)
    np.testing.assert_allclose(out.to_numpy(), np.linalg.norm(data, axis=-1), rtol=1e-6)


def test_types_vector_field():
    vec3 = ti.types.vector(3, ti.f64)
    f = vec3.field(shape=4)
    assert f.to_numpy().shape == (4, 3)
    assert f.dtype == ti.f64
    mat2 = ti.types.matrix(2, 2, ti.f32)
    g = mat2.field(shape=(3,))
    assert g.to_numpy().shape == (3, 2, 2)


@pytest.mark.parametrize("axes,dims,shape", [
    (ti.i, 6, (6,)),
    (ti.ij, (3, 4), (3, 4)),
    (ti.ij, 3, (3, 3)),
    (ti.ijk, (2, 3, 4), (2, 3, 4)),
    (ti.ijkl, (2, 3, 2, 2), (2, 3, 2, 2)),
])
def test_root_dense_place(axes, dims, shape):
    f = ti.field(ti.f32)
    ti.root.dense(axes, dims).place(f)
    assert f.shape == shape
    fill_linear(f)
    np.testing.assert_array_equal(f.to_numpy(), np.arange(np.prod(shape)).reshape(shape))


def test_root_dense_places_several_fields_and_vectors():
    a = ti.field(ti.f32)
    b = ti.field(ti.i32)
    v = ti.Vector.field(2, dtype=ti.f32)
    ti.root.dense(ti.i, 8).place(a, b, v)
    assert a.shape == b.shape == v.shape == (8,)

    @ti.kernel
    def k():
        for i in a:
            a[i] = i * 0.5
            b[i] = i * 2
            v[i] = [i, -i]

    k()
    np.testing.assert_array_equal(a.to_numpy(), np.arange(8) * 0.5)
    np.testing.assert_array_equal(b.to_numpy(), np.arange(8) * 2)
    np.testing.assert_array_equal(v.to_numpy(), np.stack([np.arange(8), -np.arange(8)], 1))


def test_nested_dense():
    f = ti.field(ti.i32)
    ti.root.dense(ti.i, 3).dense(ti.j, 4).place(f)
    assert f.shape == (3, 4)
    g = ti.field(ti.i32)
    ti.root.dense(ti.i, 2).dense(ti.jk, (3, 5)).place(g)
    assert g.shape == (2, 3, 5)
    fill_linear(f)
    fill_linear(g)
    np.testing.assert_array_equal(f.to_numpy(), np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(g.to_numpy(), np.arange(30).reshape(2, 3, 5))


def test_root_place_is_0d():
    f = ti.field(ti.f32)
    ti.root.place(f)
    assert f.shape == ()
    f[None] = 3.0

    @ti.kernel
    def inc():
        f[None] += 1.0

    inc()
    assert f[None] == 4.0


def test_unplaced_field_raises():
    f = ti.field(ti.f32)
    with pytest.raises(RuntimeError):
        f.to_numpy()


def test_field_placed_twice_raises():
    f = ti.field(ti.f32, shape=3)
    with pytest.raises(RuntimeError):
        ti.root.dense(ti.i, 3).place(f)


def test_int_field_dtypes_roundtrip():
    for dt, npdt in [(ti.i8, np.int8), (ti.u8, np.uint8), (ti.i16, np.int16),
                     (ti.u32, np.uint32), (ti.i64, np.int64), (ti.u64, np.uint64)]:
        f = ti.field(dt, shape=3)
        assert f.to_numpy().dtype == npdt
        f[1] = 100
        assert f[1] == 100


def test_small_int_field_kernel_wraps():
    f = ti.field(ti.u8, shape=4)

    @ti.kernel
    def k():
        for i in f:
            f[i] = ti.cast(250 + i * 3, ti.u8)

    k()
    np.testing.assert_array_equal(f.to_numpy(), (250 + np.arange(4) * 3) % 256)
