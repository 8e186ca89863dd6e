"""Gradients through Vector/Matrix functions, the gravity energy, and Hessian-vector products.

Matrix functions are plain compositions of scalar ops in simrun, so these tests check that the
composition (unrolled component code, local matrices, matrix literals) differentiates right:
reverse (Tape and kernel.grad) and forward (FwdMode) against central differences in f64, and the
primal against NumPy.
"""

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import simrun.lang as ti

v = ti.Vector.field(3, ti.f64, 2, needs_grad=True, needs_dual=True)
A = ti.Matrix.field(3, 3, ti.f64, (), needs_grad=True, needs_dual=True)
B = ti.Matrix.field(2, 2, ti.f64, (), needs_grad=True, needs_dual=True)
L = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
PARAMS = (v, A, B)
FEW = settings(max_examples=3, deadline=None, derandomize=True, database=None,
               phases=(Phase.explicit, Phase.generate))


@pytest.fixture(scope="module", autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


@ti.kernel
def apply(f: ti.template()):
    L[None] = f(v[0], v[1], A[None], B[None])


@ti.func
def m_norm(p, q, m, b):
    return p.norm()


@ti.func
def m_norm_eps(p, q, m, b):
    return 1.0 / (p - q).norm(1e-3)


@ti.func
def m_norm_sqr(p, q, m, b):
    return p.norm_sqr() * q.norm()


@ti.func
def m_normalized(p, q, m, b):
    return p.normalized().dot(q)


@ti.func
def m_dot(p, q, m, b):
    return p.dot(q) * p.dot(p)


@ti.func
def m_cross(p, q, m, b):
    return p.cross(q).dot(ti.Vector([0.3, -0.2, 0.7]))


@ti.func
def m_cross_norm(p, q, m, b):
    return p.cross(q).norm()


@ti.func
def m_det3(p, q, m, b):
    return m.determinant()


@ti.func
def m_det2(p, q, m, b):
    return b.determinant()


@ti.func
def m_inverse3(p, q, m, b):
    return (m.inverse() @ p).dot(q)


@ti.func
def m_inverse2(p, q, m, b):
    c = b.inverse()
    return c[0, 0] - 2.0 * c[0, 1] + 0.5 * c[1, 0] + 3.0 * c[1, 1]


@ti.func
def m_outer(p, q, m, b):
    return (p.outer_product(q) @ m).trace()


@ti.func
def m_matmul(p, q, m, b):
    return ((m @ m.transpose()) @ p).dot(q)


@ti.func
def m_matvec_norm(p, q, m, b):
    return (m @ p).norm()


@ti.func
def m_local_matrix(p, q, m, b):
    k = ti.Matrix([[p[0], q[1]], [p[2] * q[0], b[0, 1]]])
    return k.determinant() + (k @ b).sum()


@ti.func
def m_elementwise(p, q, m, b):
    return ti.sin(p).dot(ti.exp(q * 0.5)) + (p * q).sum()


def _inv_pq(V, M, Bm):
    return (np.linalg.inv(M) @ V[0]) @ V[1]


def _inv2(V, M, Bm):
    c = np.linalg.inv(Bm)
    return c[0, 0] - 2 * c[0, 1] + 0.5 * c[1, 0] + 3 * c[1, 1]


def _local(V, M, Bm):
    p, q = V
    k = np.array([[p[0], q[1]], [p[2] * q[0], Bm[0, 1]]])
    return np.linalg.det(k) + np.sum(k @ Bm)


MATRIX_FUNCS = [
    ("norm", m_norm, lambda V, M, Bm: np.linalg.norm(V[0])),
    ("norm(eps)", m_norm_eps, lambda V, M, Bm: 1 / np.sqrt(np.sum((V[0] - V[1]) ** 2) + 1e-3)),
    ("norm_sqr", m_norm_sqr, lambda V, M, Bm: (V[0] @ V[0]) * np.linalg.norm(V[1])),
    ("normalized", m_normalized, lambda V, M, Bm: V[0] / np.linalg.norm(V[0]) @ V[1]),
    ("dot", m_dot, lambda V, M, Bm: (V[0] @ V[1]) * (V[0] @ V[0])),
    ("cross", m_cross, lambda V, M, Bm: np.cross(V[0], V[1]) @ np.array([0.3, -0.2, 0.7])),
    ("cross norm", m_cross_norm, lambda V, M, Bm: np.linalg.norm(np.cross(V[0], V[1]))),
    ("determinant 3x3", m_det3, lambda V, M, Bm: np.linalg.det(M)),
    ("determinant 2x2", m_det2, lambda V, M, Bm: np.linalg.det(Bm)),
    ("inverse 3x3", m_inverse3, _inv_pq),
    ("inverse 2x2", m_inverse2, _inv2),
    ("outer_product", m_outer, lambda V, M, Bm: np.trace(np.outer(V[0], V[1]) @ M)),
    ("@ and transpose", m_matmul, lambda V, M, Bm: ((M @ M.T) @ V[0]) @ V[1]),
    ("matrix @ vector norm", m_matvec_norm, lambda V, M, Bm: np.linalg.norm(M @ V[0])),
    ("local ti.Matrix", m_local_matrix, _local),
    ("element-wise", m_elementwise,
     lambda V, M, Bm: np.sin(V[0]) @ np.exp(V[1] * 0.5) + np.sum(V[0] * V[1])),
]

unit = st.floats(0.0, 1.0, exclude_max=True, allow_nan=False)


def sample(u):
    """Vectors with |p| >= 0.3 and p, q not parallel; matrices well away from singular."""
    u = np.asarray(u)
    V = (u[:6].reshape(2, 3) - 0.5) * 3.0
    V[0] += np.array([0.6, 0.0, 0.0]) * np.sign(V[0, 0] + 1e-9)
    V[1] += np.array([0.0, 0.7, 0.0])
    M = 2.0 * np.eye(3) + (u[6:15].reshape(3, 3) - 0.5)
    Bm = 1.5 * np.eye(2) + (u[15:19].reshape(2, 2) - 0.5)
    return V, M, Bm


def load(V, M, Bm):
    v.from_numpy(V)
    A.from_numpy(M)
    B.from_numpy(Bm)


def value(f, V, M, Bm) -> float:
    load(V, M, Bm)
    apply(f)
    return L[None]


def central(f, V, M, Bm, h=1e-6):
    arrays = [V, M, Bm]
    grads = []
    for k, arr in enumerate(arrays):
        g = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[k][idx] += h
            minus[k][idx] -= h
            g[idx] = (value(f, *plus) - value(f, *minus)) / (2 * h)
        grads.append(g)
    return grads


@pytest.mark.parametrize("name,f,ref", MATRIX_FUNCS, ids=[m[0] for m in MATRIX_FUNCS])
@FEW
@given(u=st.lists(unit, min_size=19, max_size=19), d=st.lists(unit, min_size=19, max_size=19))
def test_matrix_function_gradient(name, f, ref, u, d):
    V, M, Bm = sample(u)
    assert value(f, V, M, Bm) == pytest.approx(ref(V, M, Bm), rel=1e-12, abs=1e-12)
    fd = central(f, V, M, Bm)

    load(V, M, Bm)
    with ti.ad.Tape(loss=L):
        apply(f)
    tape = [fld.grad.to_numpy() for fld in PARAMS]

    load(V, M, Bm)
    apply(f)
    for fld in PARAMS:
        fld.grad.fill(0)
    L.grad[None] = 1.0
    apply.grad(f)
    rev = [fld.grad.to_numpy() for fld in PARAMS]

    for k, fld in enumerate(PARAMS):
        np.testing.assert_allclose(tape[k], fd[k], rtol=1e-6, atol=1e-7,
                                   err_msg=f"{name}: Tape gradient of {fld.name}")
        np.testing.assert_allclose(rev[k], tape[k], rtol=1e-13, atol=1e-13,
                                   err_msg=f"{name}: kernel.grad disagrees with Tape")

    seeds = sample(d)  # any direction; reuse the sampler's shapes
    for k, fld in enumerate(PARAMS):
        seed = seeds[k] - seeds[k].mean()
        load(V, M, Bm)
        with ti.ad.FwdMode(loss=L, param=fld, seed=seed):
            apply(f)
        np.testing.assert_allclose(L.dual[None], np.sum(tape[k] * seed), rtol=1e-9, atol=1e-10,
                                   err_msg=f"{name}: FwdMode along {fld.name} vs reverse")


# ---------------------------------------------------------------- gravity (reference document)
NP = 8
x = ti.Vector.field(2, dtype=ti.f64, shape=NP, needs_grad=True, needs_dual=True)
U = ti.field(dtype=ti.f64, shape=(), needs_grad=True, needs_dual=True)


@ti.kernel
def compute_U():
    for i, j in ti.ndrange(NP, NP):
        r = x[i] - x[j]
        # r.norm(1e-3) is equivalent to ti.sqrt(r.norm()**2 + 1e-3)
        U[None] += -1 / r.norm(1e-3)  # U += -1 / |r|


def energy(X) -> float:
    x.from_numpy(X)
    U[None] = 0
    compute_U()
    return U[None]


def energy_gradient(X) -> np.ndarray:
    x.from_numpy(X)
    with ti.ad.Tape(loss=U):
        compute_U()
    return x.grad.to_numpy()


def closed_form_dU(X) -> np.ndarray:
    """U = -sum_{i,j} (|xi - xj|^2 + 1e-3)^(-1/2); each ordered pair counts once."""
    r = X[:, None, :] - X[None, :, :]
    s = np.sum(r * r, axis=-1) + 1e-3
    pair = r / s[..., None] ** 1.5  # d/dxi of the (i, j) term
    return pair.sum(axis=1) - pair.sum(axis=0)


positions = st.lists(unit, min_size=2 * NP, max_size=2 * NP).map(
    lambda u: np.asarray(u).reshape(NP, 2))


@FEW
@given(X=positions)
def test_gravity_energy_gradient(X):
    g = energy_gradient(X)
    np.testing.assert_allclose(g, closed_form_dU(X), rtol=1e-10, atol=1e-10)
    force = -g  # F_i = -dU/dx_i sums to zero (Newton's third law)
    np.testing.assert_allclose(force.sum(axis=0), 0.0, atol=1e-9 * np.abs(force).max())
    h = 1e-6
    fd = np.zeros_like(X)
    for idx in np.ndindex(X.shape):
        d = np.zeros_like(X)
        d[idx] = h
        fd[idx] = (energy(X + d) - energy(X - d)) / (2 * h)
    # the differences' own rounding: each energy is a sum of NP^2 terms of magnitude up to
    # |U|, added in an order a GPU's atomics choose (all X equal: g is 0, fd is noise)
    noise = 2 * NP * NP * np.finfo(np.float64).eps * abs(energy(X)) / h
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(g).max() + noise)


@FEW
@given(X=positions, s=positions)
def test_gravity_hessian_vector_product(X, s):
    """Forward-over-reverse: inside FwdMode, compute_U.grad() gives x.grad.dual = H s."""
    s = s - 0.5
    x.from_numpy(X)
    U[None] = 0
    U.grad[None] = 1.0
    x.grad.fill(0)
    with ti.ad.FwdMode(loss=U, param=x, seed=s):
        compute_U()
        compute_U.grad()
    hv = x.grad.dual.to_numpy()
    g = x.grad.to_numpy()
    np.testing.assert_allclose(g, closed_form_dU(X), rtol=1e-10, atol=1e-10)
    assert U.dual[None] == pytest.approx(np.sum(g * s), rel=1e-9, abs=1e-9)
    h = 1e-5
    fd = (energy_gradient(X + h * s) - energy_gradient(X - h * s)) / (2 * h)
    scale = np.abs(fd).max()
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-6 * scale)


def test_gravity_substep_matches_closed_form_force():
    """The document's substep (Tape around compute_U, then advance) in f64."""
    v_ = ti.Vector.field(2, dtype=ti.f64, shape=NP)
    dt = 1e-5
    rng = np.random.default_rng(3)
    X = rng.random((NP, 2))

    @ti.kernel
    def advance():
        for i in x:
            v_[i] += dt * -x.grad[i]
        for i in x:
            x[i] += dt * v_[i]

    x.from_numpy(X)
    with ti.ad.Tape(loss=U):
        compute_U()
    advance()
    F = -closed_form_dU(X)
    np.testing.assert_allclose(v_.to_numpy(), dt * F, rtol=1e-10)
    np.testing.assert_allclose(x.to_numpy(), X + dt * dt * F, rtol=1e-12)


# ---------------------------------------------------------------- forward over reverse in time
NT = 4
DT = 1e-2
xt = ti.Vector.field(2, dtype=ti.f64, shape=NT, needs_grad=True, needs_dual=True)
vt = ti.Vector.field(2, dtype=ti.f64, shape=NT, needs_dual=True)
Ut = ti.field(dtype=ti.f64, shape=(), needs_grad=True, needs_dual=True)


@ti.kernel
def soft_energy():
    for i, j in ti.ndrange(NT, NT):
        r = xt[i] - xt[j]
        Ut[None] += -1 / r.norm(1e-1)


@ti.kernel
def kick_drift():
    for i in xt:
        vt[i] += DT * -xt.grad[i]
    for i in xt:
        xt[i] += DT * vt[i]


def trajectory(X0, steps) -> np.ndarray:
    xt.from_numpy(X0)
    vt.fill(0)
    for _ in range(steps):
        with ti.ad.Tape(loss=Ut):
            soft_energy()
        kick_drift()
    return xt.to_numpy()


def trajectory_jvp(X0, s, steps) -> np.ndarray:
    """d x_T / d x_0 . s by running the whole trajectory inside FwdMode."""
    xt.from_numpy(X0)
    vt.fill(0)
    with ti.ad.FwdMode(loss=Ut, param=xt, seed=s):
        for _ in range(steps):
            with ti.ad.Tape(loss=Ut):
                soft_energy()
            kick_drift()
        return xt.dual.to_numpy()


def _trajectory_case(steps):
    rng = np.random.default_rng(1)
    X0, s = rng.random((NT, 2)), rng.standard_normal((NT, 2))
    h = 1e-6
    fd = (trajectory(X0 + h * s, steps) - trajectory(X0 - h * s, steps)) / (2 * h)
    np.testing.assert_allclose(trajectory_jvp(X0, s, steps), fd, rtol=1e-7, atol=1e-8)


def test_trajectory_jvp_one_step():
    """Forces from a Tape, then an update reading x.grad, all inside FwdMode: one step."""
    _trajectory_case(1)


def test_trajectory_jvp_several_steps():
    _trajectory_case(5)
