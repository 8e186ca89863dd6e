"""ti.polar_decompose and ti.svd against numpy: reconstruction, orthogonality, a symmetric
positive semi-definite polar factor, singular values; and Taichi 1.7.4's conventions where a
decomposition is not unique (det A < 0: U is a reflection and P stays positive; the zero
matrix gives (I, 0))."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simrun.lang as ti

out2 = ti.Matrix.field(2, 2, ti.f64, shape=4)
out3 = ti.Matrix.field(3, 3, ti.f64, shape=4)
a2 = ti.Matrix.field(2, 2, ti.f64, shape=())
a3 = ti.Matrix.field(3, 3, ti.f64, shape=())


@pytest.fixture(scope="module", autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


@ti.kernel
def decompose(a: ti.template(), out: ti.template()):
    R, P = ti.polar_decompose(a[None])
    U, S, V = ti.svd(a[None])
    out[0] = R
    out[1] = P
    out[2] = U @ S @ V.transpose()
    out[3] = S


def _run(a: np.ndarray):
    field, out = (a2, out2) if a.shape == (2, 2) else (a3, out3)
    field.from_numpy(a)
    decompose(field, out)
    return out.to_numpy()


matrices = st.integers(2, 3).flatmap(lambda n: st.lists(
    st.floats(-3, 3, allow_nan=False), min_size=n * n, max_size=n * n).map(
    lambda v, n=n: np.array(v).reshape(n, n)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(matrices)
def test_decompositions_match_numpy(a):
    if abs(np.linalg.det(a)) < 1e-3 or np.linalg.cond(a) > 1e4:
        return  # near-singular: the factors are ill-conditioned, the products still hold
    R, P, usv, S = _run(a)
    n = a.shape[0]
    np.testing.assert_allclose(R @ P, a, atol=1e-8)
    np.testing.assert_allclose(R @ R.T, np.eye(n), atol=1e-8)
    np.testing.assert_allclose(P, P.T, atol=1e-8)
    # Taichi's 2x2 SVD treats an off-diagonal of P below 1e-5 as 0 (A = [[0, 1], [1, 1e-5]]
    # comes back 5e-6 off in Taichi 1.7.4 too); simrun keeps the algorithm
    np.testing.assert_allclose(usv, a, atol=2e-5 if n == 2 else 1e-7)
    sigma = np.sort(np.abs(np.diag(S)))[::-1]
    np.testing.assert_allclose(sigma, np.linalg.svd(a, compute_uv=False), rtol=1e-7, atol=1e-8)
    if n == 2:  # Taichi's 2x2 convention: P = sqrt(A^T A), singular values >= 0, sorted
        np.testing.assert_allclose(np.linalg.eigvalsh(P), np.sort(sigma), rtol=1e-7, atol=1e-8)
        assert S[0, 0] >= S[1, 1] >= 0


def test_negative_determinant_2x2_follows_taichi():
    R, P, usv, S = _run(np.array([[1.0, 2.0], [3.0, 1.0]]))
    np.testing.assert_allclose(R, [[0.0, 1.0], [1.0, 0.0]], atol=1e-12)  # a reflection
    np.testing.assert_allclose(P, [[3.0, 1.0], [1.0, 2.0]], atol=1e-12)
    np.testing.assert_allclose(np.diag(S), [(5 + 5 ** 0.5) / 2, (5 - 5 ** 0.5) / 2], atol=1e-12)


def test_zero_matrix_2x2_is_identity_and_zero():
    R, P, usv, S = _run(np.zeros((2, 2)))
    np.testing.assert_array_equal(R, np.eye(2))
    np.testing.assert_array_equal(P, np.zeros((2, 2)))
    assert np.isfinite(usv).all()


ga = ti.Matrix.field(2, 2, ti.f64, shape=(), needs_grad=True)
gloss = ti.field(ti.f64, shape=(), needs_grad=True)
WU = np.array([[0.3, -1.2], [0.7, 0.4]])
WP = np.array([[1.1, 0.2], [-0.5, 0.9]])


@ti.kernel
def polar_loss():
    U, P = ti.polar_decompose(ga[None])
    for i, j in ti.static(ti.ndrange(2, 2)):
        gloss[None] += U[i, j] * WU[i, j] + P[i, j] * WP[i, j]


@pytest.mark.parametrize("a", [[[1.0, 2.0], [3.0, 1.0]], [[1.1, 0.2], [-0.3, 0.9]]],
                         ids=["det<0", "det>0"])
def test_polar_gradient_matches_finite_differences(a):
    def value(m):
        ga.from_numpy(m)
        gloss[None] = 0.0
        polar_loss()
        return gloss[None]

    a = np.array(a)
    with ti.ad.Tape(gloss):
        value(a)
    got = ga.grad.to_numpy()
    want = np.zeros((2, 2))
    for idx in np.ndindex(2, 2):
        plus, minus = a.copy(), a.copy()
        plus[idx] += 1e-6
        minus[idx] -= 1e-6
        want[idx] = (value(plus) - value(minus)) / 2e-6
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
