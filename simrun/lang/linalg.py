"""polar_decompose, svd and sym_eig for 2x2 and 3x3 matrices, written in the language itself.

They are ti.funcs, so kernels inline them and autodiff differentiates them like user code.
The 3-D SVD diagonalises A^T A with a fixed number of cyclic Jacobi sweeps (unrolled).
"""

from __future__ import annotations

from . import builtins as B
from .api import func
from .frontend.special import static
from .matrix import Matrix

_JACOBI_SWEEPS = 8


@func
def _polar2(A):
    """A = U P with P symmetric positive semi-definite, as Taichi 1.7.4 (U a reflection when
    det A < 0, (I, A) for the zero matrix): U is B / sqrt|det B| for B = A + cof(A) or, when
    det A < 0, A - cof(A), and P = (A^T A + |det A| I) / sqrt|det B|. Selects instead of
    branches, so the gradient of a loop calling it still vectorises; det B is 0 only for the
    zero matrix, whose k is kept finite and then not used."""
    det = A[0, 0] * A[1, 1] - A[1, 0] * A[0, 1]
    flip = -1.0 if det < 0.0 else 1.0
    Bm = Matrix([[A[0, 0] + flip * A[1, 1], A[0, 1] - flip * A[1, 0]],
                 [A[1, 0] - flip * A[0, 1], A[1, 1] + flip * A[0, 0]]])
    zero = 1.0 if (A[0, 0] == 0.0 and A[0, 1] == 0.0 and A[1, 0] == 0.0
                   and A[1, 1] == 0.0) else 0.0
    k = (1.0 - zero) / B.sqrt(max(abs(Bm[0, 0] * Bm[1, 1] - Bm[1, 0] * Bm[0, 1]), 1e-30))
    eye = Matrix([[1.0, 0.0], [0.0, 1.0]])
    U = Bm * k + eye * zero
    P = (A.transpose() @ A + abs(det) * eye) * k + A * zero
    return U, P


@func
def _svd2(A):
    R, S = _polar2(A)
    c = 1.0 + 0.0 * A[0, 0]
    s = 0.0 * A[0, 0]
    s1 = S[0, 0]
    s2 = S[1, 1]
    if abs(S[0, 1]) >= 1e-5:
        tao = 0.5 * (S[0, 0] - S[1, 1])
        w = B.sqrt(tao * tao + S[0, 1] * S[0, 1])
        t = 0.0 * tao
        if tao > 0:
            t = S[0, 1] / (tao + w)
        else:
            t = S[0, 1] / (tao - w)
        c = 1.0 / B.sqrt(t * t + 1.0)
        s = -t * c
        s1 = c * c * S[0, 0] - 2.0 * c * s * S[0, 1] + s * s * S[1, 1]
        s2 = s * s * S[0, 0] + 2.0 * c * s * S[0, 1] + c * c * S[1, 1]
    V = Matrix([[c, s], [-s, c]])
    if s1 < s2:
        tmp = s1
        s1 = s2
        s2 = tmp
        V = Matrix([[-s, c], [-c, -s]])
    U = R @ V
    return U, Matrix([[s1, 0.0 * s1], [0.0 * s1, s2]]), V


@func
def _sym_eig3(M):
    """Eigen-decomposition of a symmetric 3x3 matrix: M = V diag(lam) V^T (unsorted)."""
    A = M
    V = Matrix([[1.0 + 0.0 * M[0, 0], 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.0, 0.0, 1.0]])
    for _sweep in static(range(_JACOBI_SWEEPS)):
        for p, q in static(((0, 1), (0, 2), (1, 2))):
            apq = A[p, q]
            c = 1.0 + 0.0 * apq
            s = 0.0 * apq
            if abs(apq) > 1e-30:
                theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                t = 1.0 / (abs(theta) + B.sqrt(theta * theta + 1.0))
                if theta < 0:
                    t = -t
                c = 1.0 / B.sqrt(t * t + 1.0)
                s = t * c
            J = Matrix([[1.0 + 0.0 * c, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
            J[p, p] = c
            J[q, q] = c
            J[p, q] = s
            J[q, p] = -s
            A = J.transpose() @ A @ J
            V = V @ J
    return V, Matrix([A[0, 0], A[1, 1], A[2, 2]])


@func
def _svd3(A):
    V, lam = _sym_eig3(A.transpose() @ A)
    # sort eigenvalues descending, swapping the columns of V along
    for i, j in static(((0, 1), (0, 2), (1, 2))):
        if lam[i] < lam[j]:
            tl = lam[i]
            lam[i] = lam[j]
            lam[j] = tl
            for r in static(range(3)):
                tv = V[r, i]
                V[r, i] = V[r, j]
                V[r, j] = tv
    if V.determinant() < 0:
        for r in static(range(3)):
            V[r, 2] = -V[r, 2]
    AV = A @ V
    u0 = Matrix([AV[0, 0], AV[1, 0], AV[2, 0]]).normalized(1e-30)
    u1 = Matrix([AV[0, 1], AV[1, 1], AV[2, 1]])
    u1 = (u1 - u0 * u0.dot(u1)).normalized(1e-30)
    u2 = u0.cross(u1)
    U = Matrix([[u0[0], u1[0], u2[0]], [u0[1], u1[1], u2[1]], [u0[2], u1[2], u2[2]]])
    sig = U.transpose() @ AV
    zero = 0.0 * sig[0, 0]
    return U, Matrix([[sig[0, 0], zero, zero], [zero, sig[1, 1], zero],
                      [zero, zero, sig[2, 2]]]), V


def svd(A, dt=None):
    """A = U @ sigma @ V^T with U, V rotations (Taichi's convention: sigma[-1] may be negative)."""
    if A.n == 2:
        return _svd2(A)
    if A.n == 3:
        return _svd3(A)
    raise TypeError(f"ti.svd supports 2x2 and 3x3 matrices, got {A.n}x{A.m}")


def polar_decompose(A, dt=None):
    """A = R @ S with R a rotation and S symmetric."""
    if A.n == 2:
        return _polar2(A)
    if A.n == 3:
        U, sig, V = _svd3(A)
        return U @ V.transpose(), V @ sig @ V.transpose()
    raise TypeError(f"ti.polar_decompose supports 2x2 and 3x3 matrices, got {A.n}x{A.m}")


def sym_eig(A, dt=None):
    """Eigenvalues and eigenvectors (columns) of a symmetric 2x2 or 3x3 matrix."""
    if A.n == 3:
        V, lam = _sym_eig3(A)
        return lam, V
    a, b, d = A[0, 0], A[0, 1], A[1, 1]
    tr = a + d
    disc = B.sqrt((a - d) * (a - d) * 0.25 + b * b)
    l1, l2 = tr * 0.5 + disc, tr * 0.5 - disc
    v1 = Matrix([b, l1 - a]).normalized(1e-30)
    return Matrix([l1, l2]), Matrix([[v1[0], -v1[1]], [v1[1], v1[0]]])
