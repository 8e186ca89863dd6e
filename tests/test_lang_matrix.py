"""Vector / Matrix values inside kernels: element-wise ops and methods against numpy."""

import functools

import numpy as np
import pytest

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


B = 64  # batch of random inputs per test


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape)


# ---------------------------------------------------------------- vector methods
@ti.kernel
def vec3_ops(a: ti.template(), b: ti.template(), s: ti.template(), v: ti.template(),
                      m: ti.template()):
    for i in a:
        x, y = a[i], b[i]
        s[i, 0] = x.dot(y)
        s[i, 1] = x.norm()
        s[i, 2] = x.norm(1e-3)
        s[i, 3] = x.norm_sqr()
        s[i, 4] = x.sum()
        s[i, 5] = x.x * 100 + x.y * 10 + x.z
        s[i, 8] = x.norm_inv()
        v[i, 0] = x + y
        v[i, 1] = x - y
        v[i, 2] = x * y
        v[i, 3] = x / y
        v[i, 4] = 2.0 * x - y * 0.5 + 1.0
        v[i, 5] = x.normalized()
        v[i, 6] = x.cross(y)
        v[i, 7] = -x
        v[i, 8] = abs(x)
        v[i, 9] = ti.sin(x)
        v[i, 10] = x ** 2
        v[i, 12] = ti.select(x > y, x, y)
        m[i] = x.outer_product(y)


@pytest.mark.parametrize("dtype", [ti.f32, ti.f64])
def test_vector_methods_vs_numpy(dtype):
    a = ti.Vector.field(3, dtype, shape=B)
    b = ti.Vector.field(3, dtype, shape=B)
    s = ti.field(dtype, shape=(B, 9))
    v = ti.Vector.field(3, dtype, shape=(B, 13))
    m = ti.Matrix.field(3, 3, dtype, shape=B)
    an, bn = _rand(B, 3, seed=1), _rand(B, 3, seed=2)
    bn[np.abs(bn) < 0.1] = 0.5
    a.from_numpy(an)
    b.from_numpy(bn)
    an, bn = a.to_numpy().astype(np.float64), b.to_numpy().astype(np.float64)
    vec3_ops(a, b, s, v, m)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == ti.f32 else dict(rtol=1e-12, atol=1e-12)
    s, v, m = s.to_numpy(), v.to_numpy(), m.to_numpy()
    norm = np.linalg.norm(an, axis=1)
    np.testing.assert_allclose(s[:, 0], np.einsum("ij,ij->i", an, bn), **tol)
    np.testing.assert_allclose(s[:, 1], norm, **tol)
    # loose: the literal 1e-3 may be rounded to the default float type (f32)
    np.testing.assert_allclose(s[:, 2], np.sqrt(norm**2 + 1e-3), rtol=max(tol["rtol"], 1e-9))
    np.testing.assert_allclose(s[:, 3], norm**2, **tol)
    np.testing.assert_allclose(s[:, 4], an.sum(1), **tol)
    np.testing.assert_allclose(s[:, 5], an[:, 0] * 100 + an[:, 1] * 10 + an[:, 2], **tol)
    np.testing.assert_allclose(s[:, 8], 1 / norm, **tol)
    expected_v = [an + bn, an - bn, an * bn, an / bn, 2 * an - bn * 0.5 + 1,
                  an / norm[:, None], np.cross(an, bn), -an, np.abs(an), np.sin(an), an**2]
    for k, e in enumerate(expected_v):
        np.testing.assert_allclose(v[:, k], e, **tol, err_msg=f"vector op {k}")
    np.testing.assert_allclose(v[:, 12], np.where(an > bn, an, bn), **tol)
    np.testing.assert_allclose(m, np.einsum("ij,ik->ijk", an, bn), **tol)


@ti.kernel
def vec_minmax(a: ti.types.vector(3, ti.f32), b: ti.types.vector(3, ti.f32)) -> \
        ti.types.vector(4, ti.f32):
    m = ti.max(a, b)
    return ti.Vector([a.max(), a.min(), m[0], m[2]])


def test_vector_min_max():
    out = vec_minmax([1.0, -2.0, 3.0], [0.0, 5.0, 4.0]).to_numpy()
    np.testing.assert_array_equal(out, [3.0, -2.0, 1.0, 4.0])


@ti.kernel
def cross2(a: ti.types.vector(2, ti.f64), b: ti.types.vector(2, ti.f64)) -> ti.f64:
    return a.cross(b)


def test_cross_2d():
    for _ in range(3):
        a, b = _rand(2, seed=_), _rand(2, seed=_ + 10)
        assert cross2(a.tolist(), b.tolist()) == pytest.approx(a[0] * b[1] - a[1] * b[0])


# ---------------------------------------------------------------- matrix methods
@ti.kernel
def mat_ops(A: ti.template(), Bm: ti.template(), x: ti.template(), s: ti.template(),
            M: ti.template(), v: ti.template()):
    for i in A:
        a, b = A[i], Bm[i]
        s[i, 0] = a.determinant()
        s[i, 1] = a.trace()
        s[i, 2] = a.sum()
        s[i, 3] = (a @ b).trace()
        M[i, 0] = a @ b
        M[i, 1] = a.transpose()
        M[i, 2] = a.inverse()
        M[i, 3] = a * b + 2.0 * a - b / 4.0
        M[i, 4] = a.T @ a
        M[i, 5] = a @ a.inverse()
        v[i] = a @ x[i]


@functools.lru_cache(maxsize=None)
def _mat_results(n, dtype):
    tdt = ti.f32 if dtype == np.float32 else ti.f64
    A = ti.Matrix.field(n, n, tdt, shape=B)
    Bm = ti.Matrix.field(n, n, tdt, shape=B)
    x = ti.Vector.field(n, tdt, shape=B)
    s = ti.field(tdt, shape=(B, 4))
    M = ti.Matrix.field(n, n, tdt, shape=(B, 6))
    v = ti.Vector.field(n, tdt, shape=B)
    an = _rand(B, n, n, seed=n) + 3 * np.eye(n)  # well conditioned
    A.from_numpy(an)
    Bm.from_numpy(_rand(B, n, n, seed=n + 1))
    x.from_numpy(_rand(B, n, seed=n + 2))
    mat_ops(A, Bm, x, s, M, v)
    f64 = lambda f: f.to_numpy().astype(np.float64)  # noqa: E731
    return f64(A), f64(Bm), f64(x), s.to_numpy(), M.to_numpy(), v.to_numpy()


def _within(got, want, bound, what):
    """|got - want| <= bound elementwise; bound comes from the float format's unit roundoff."""
    ratio = np.abs(got - want) / bound
    assert ratio.max() <= 1.0, f"{what}: error {ratio.max():.2f}x its rounding bound"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_matrix_methods_vs_numpy(n, dtype):
    """Each result within a rounding-error bound (Higham): a sum of n products errs by at most
    gamma_n = n u times the sum of the magnitudes; an inverse by ~n u cond(A) (the random
    matrices reach cond 900), so the check holds on any IEEE CPU, FMA or not. The factor 4
    covers the reference's own f64 rounding and the determinant's n! terms."""
    a, b, x, s, M, v = _mat_results(n, dtype)
    u = np.finfo(dtype).eps / 2
    gamma = 4 * n * u
    abs_a, abs_b = np.abs(a), np.abs(b)
    mat = lambda bound: bound[:, None, None]  # noqa: E731
    inv = np.linalg.inv(a)
    cond = np.linalg.cond(a)
    _within(s[:, 0], np.linalg.det(a), gamma * np.prod(np.linalg.norm(a, axis=2), axis=1),
            "determinant")
    _within(s[:, 1], np.trace(a, axis1=1, axis2=2), gamma * abs_a.sum((1, 2)), "trace")
    _within(s[:, 2], a.sum((1, 2)), gamma * n * abs_a.sum((1, 2)), "sum")
    _within(s[:, 3], np.trace(a @ b, axis1=1, axis2=2), gamma * n * (abs_a @ abs_b).sum((1, 2)),
            "trace of a product")
    _within(M[:, 0], a @ b, gamma * (abs_a @ abs_b), "matmul")
    np.testing.assert_array_equal(M[:, 1], a.transpose(0, 2, 1), err_msg="transpose")
    _within(M[:, 2], inv, mat(gamma * cond * np.abs(inv).max((1, 2))), "inverse")
    _within(M[:, 3], a * b + 2 * a - b / 4, 4 * u * (abs_a * abs_b + 2 * abs_a + abs_b / 4),
            "elementwise")
    _within(M[:, 4], a.transpose(0, 2, 1) @ a, gamma * (abs_a.transpose(0, 2, 1) @ abs_a),
            "A^T A")
    _within(M[:, 5], np.broadcast_to(np.eye(n), a.shape), mat(gamma * cond), "A A^-1")
    _within(v, np.einsum("bij,bj->bi", a, x), gamma * np.einsum("bij,bj->bi", abs_a, np.abs(x)),
            "mat @ vec")


@ti.kernel
def mat_nonsquare(out: ti.template()):
    for _ in range(1):
        a = ti.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # 2x3
        b = ti.Matrix([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]])  # 3x2
        c = a @ b
        out[0] = c
        out[1] = a @ a.transpose()


def test_nonsquare_matmul():
    out = ti.Matrix.field(2, 2, ti.f32, shape=2)
    mat_nonsquare(out)
    a = np.array([[1.0, 2, 3], [4, 5, 6]])
    b = np.array([[1.0, 0], [0, 1], [2, -1]])
    np.testing.assert_array_equal(out.to_numpy()[0], a @ b)
    np.testing.assert_array_equal(out.to_numpy()[1], a @ a.T)


@ti.kernel
def constructors() -> ti.types.matrix(3, 3, ti.f32):
    eye = ti.Matrix.identity(ti.f32, 3)
    z = ti.Matrix.zero(ti.f32, 3, 3)
    d = ti.Matrix.diag(3, 2.0)
    return eye * 10 + z + d


@ti.kernel
def vec_constructors() -> ti.types.vector(3, ti.f32):
    z = ti.Vector.zero(ti.f32, 3)
    o = ti.Vector([1, 2, 3])
    return z + o * 0.5


def test_matrix_constructors():
    np.testing.assert_array_equal(constructors().to_numpy(), np.eye(3) * 12)
    np.testing.assert_array_equal(vec_constructors().to_numpy(), [0.5, 1.0, 1.5])


@ti.kernel
def local_element_assignment(x: ti.f32) -> ti.types.matrix(3, 3, ti.f32):
    m = ti.Matrix.zero(ti.f32, 3, 3)
    for i in ti.static(range(3)):
        m[i, i] = x + i
    m[0, 2] = 7.0
    m[2, 0] += m[0, 2] * 2
    v = ti.Vector([0.0, 0.0, 0.0])
    v[1] = x
    v.z = 5.0
    v.x += 1.0
    m[1, 0] = v.x
    m[1, 2] = v[1] + v.z
    return m


def test_local_matrix_element_assignment():
    expected = np.array([[2.0, 0, 7], [1.0, 3, 7], [14, 0, 4]])
    np.testing.assert_array_equal(local_element_assignment(2.0).to_numpy(), expected)


@ti.kernel
def local_matrix_reassign_in_loop(n: ti.i32) -> ti.types.matrix(2, 2, ti.f64):
    m = ti.Matrix([[1.0, 1.0], [1.0, 0.0]])
    r = ti.Matrix.identity(ti.f64, 2)
    ti.loop_config(serialize=True)
    for _ in range(n):
        r = r @ m
    return r


def test_local_matrix_updated_in_serial_loop():
    r = local_matrix_reassign_in_loop(10).to_numpy()
    np.testing.assert_array_equal(r, np.linalg.matrix_power(np.array([[1, 1], [1, 0]]), 10))


@ti.kernel
def field_component_writes(v: ti.template(), m: ti.template()):
    for i in v:
        v[i][1] = i * 2.0
        v[i][0] = -1.0
        v[i].z += 0.5
        m[i][1, 0] = i
        m[i][0, 1] = v[i].y + 1


@ti.kernel
def field_attribute_write(v: ti.template()):
    for i in v:
        v[i].y = i * 2.0


def test_field_element_component_writes():
    v = ti.Vector.field(3, ti.f32, shape=4)
    m = ti.Matrix.field(2, 2, ti.f32, shape=4)
    field_component_writes(v, m)
    i = np.arange(4)
    np.testing.assert_array_equal(v.to_numpy(),
                                  np.stack([-np.ones(4), 2.0 * i, 0.5 + 0 * i], 1))
    np.testing.assert_array_equal(m.to_numpy()[:, 1, 0], i)
    np.testing.assert_array_equal(m.to_numpy()[:, 0, 1], 2.0 * i + 1)


def test_field_element_attribute_assignment():
    v = ti.Vector.field(3, ti.f32, shape=4)
    field_attribute_write(v)
    np.testing.assert_array_equal(v.to_numpy()[:, 1], 2.0 * np.arange(4))


@ti.kernel
def vec_field_arith(x: ti.template(), v: ti.template(), dt: ti.f32):
    for i in x:
        v[i] += dt * ti.Vector([0.0, -9.8])
        x[i] += dt * v[i]


def test_vector_field_integration():
    x = ti.Vector.field(2, ti.f32, shape=8)
    v = ti.Vector.field(2, ti.f32, shape=8)
    x.from_numpy(np.arange(16, dtype=np.float32).reshape(8, 2))
    v.fill(1.0)
    vec_field_arith(x, v, 0.1)
    v_exp = np.ones((8, 2), np.float32) + np.float32(0.1) * np.array([0.0, -9.8], np.float32)
    np.testing.assert_allclose(v.to_numpy(), v_exp, rtol=1e-6)
    np.testing.assert_allclose(x.to_numpy(), np.arange(16).reshape(8, 2) + 0.1 * v_exp,
                               rtol=1e-6)


def test_matrix_python_scope_ops():
    a = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
    b = ti.Vector([1.0, -1.0])
    np.testing.assert_allclose((a @ b).to_numpy(), [-1.0, -1.0])
    assert a.determinant() == pytest.approx(-2.0)
    np.testing.assert_allclose(a.inverse().to_numpy(), np.linalg.inv(a.to_numpy()))
    assert b.norm() == pytest.approx(np.sqrt(2))
    assert b.x == 1.0 and b.y == -1.0
