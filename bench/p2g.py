"""DiffTaichi diffmpm-style particle-to-grid scatter, written once for both modules.

Follows diffmpm.py's ``p2g``: quadratic B-spline weights over a 3x3 stencil, ``ti.Matrix``
deformation-gradient update, affine (APIC) momentum through ``C``, atomic scatter into a
vector momentum grid and a scalar mass grid. The timed version drops ``ti.polar_decompose``
(rotation replaced by the identity); the polar variant keeps it.
"""

import numpy as np
from program import Program


def _initial_state(n_particles: int) -> dict[str, np.ndarray]:
    """A deterministic block of particles with small random velocity, C and F perturbations."""
    rng = np.random.default_rng(3)
    eye = np.broadcast_to(np.eye(2, dtype=np.float32), (n_particles, 2, 2))
    return {
        "x": rng.uniform(0.2, 0.6, size=(n_particles, 2)).astype(np.float32),
        "v": rng.uniform(-1.0, 1.0, size=(n_particles, 2)).astype(np.float32),
        "C": rng.uniform(-0.5, 0.5, size=(n_particles, 2, 2)).astype(np.float32),
        "F": (eye + rng.uniform(-0.1, 0.1, size=(n_particles, 2, 2))).astype(np.float32),
    }


def _build(ti, n_particles: int, n_grid: int, use_polar: bool):
    """Allocate fields, define the p2g kernel, return (kernel, particle fields, grid fields)."""
    dx = 1.0 / n_grid
    inv_dx = float(n_grid)
    dt = 1e-3
    p_vol = 1.0
    p_mass = 1.0
    mu = 10.0
    la = 10.0

    x = ti.Vector.field(2, dtype=ti.f32, shape=n_particles, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f32, shape=n_particles, needs_grad=True)
    C = ti.Matrix.field(2, 2, dtype=ti.f32, shape=n_particles, needs_grad=True)
    F = ti.Matrix.field(2, 2, dtype=ti.f32, shape=n_particles, needs_grad=True)
    F_new = ti.Matrix.field(2, 2, dtype=ti.f32, shape=n_particles, needs_grad=True)
    grid_v = ti.Vector.field(2, dtype=ti.f32, shape=(n_grid, n_grid), needs_grad=True)
    grid_m = ti.field(dtype=ti.f32, shape=(n_grid, n_grid), needs_grad=True)

    @ti.kernel
    def p2g():
        for p in range(n_particles):
            base = ti.cast(x[p] * inv_dx - 0.5, ti.i32)
            fx = x[p] * inv_dx - ti.cast(base, ti.f32)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
            new_F = (ti.Matrix.diag(dim=2, val=1) + dt * C[p]) @ F[p]
            J = new_F.determinant()
            F_new[p] = new_F
            r = ti.Matrix.diag(dim=2, val=1.0)  # f32: an int matrix would truncate R
            if ti.static(use_polar):
                r, s = ti.polar_decompose(new_F)
            cauchy = 2 * mu * (new_F - r) @ new_F.transpose() + ti.Matrix.diag(2, la * (J - 1) * J)
            stress = -(dt * p_vol * 4 * inv_dx * inv_dx) * cauchy
            affine = stress + p_mass * C[p]
            for i in ti.static(range(3)):
                for j in ti.static(range(3)):
                    offset = ti.Vector([i, j])
                    dpos = (ti.cast(ti.Vector([i, j]), ti.f32) - fx) * dx
                    weight = w[i][0] * w[j][1]
                    ti.atomic_add(grid_v[base + offset], weight * (p_mass * v[p] + affine @ dpos))
                    grid_m[base + offset] += weight * p_mass

    particles = {"x": x, "v": v, "C": C, "F": F}
    return p2g, particles, (grid_v, grid_m, F_new)


def _sorted_by_cell(state: dict[str, np.ndarray], n_grid: int) -> dict[str, np.ndarray]:
    """The same particles ordered by their stencil's base cell (row-major), as a simulation
    that sorts particles for locality would hold them."""
    base = (state["x"] * n_grid - 0.5).astype(np.int64)
    order = np.argsort(base[:, 0] * n_grid + base[:, 1], kind="stable")
    return {k: np.ascontiguousarray(v[order]) for k, v in state.items()}


def _program(ti, n_particles: int, n_grid: int, use_polar: bool, sort: bool = False):
    """Wrap the kernel with state reset, result checks and seeded gradients."""
    p2g, particles, (grid_v, grid_m, F_new) = _build(ti, n_particles, n_grid, use_polar)
    state = _initial_state(n_particles)
    if sort:
        state = _sorted_by_cell(state, n_grid)
    for name, field in particles.items():
        field.from_numpy(state[name])
    grid_v.grad.fill(1.0)
    grid_m.grad.fill(1.0)
    F_new.grad.fill(1.0)

    def check() -> float:
        grid_v.fill(0.0)
        grid_m.fill(0.0)
        p2g()
        mass = grid_m.to_numpy().astype(np.float64).sum()
        momentum = np.abs(grid_v.to_numpy().astype(np.float64)).sum()
        return float(mass + momentum)

    def grad_check() -> float:
        for field in particles.values():
            field.grad.fill(0.0)
        p2g()
        p2g.grad()
        return float(
            sum(np.abs(f.grad.to_numpy().astype(np.float64)).sum() for f in particles.values())
        )

    return Program(run=p2g, check=check, grad=p2g.grad, grad_check=grad_check)


def build_p2g(ti, size: int = 8192, n_grid: int = 128):
    """P2G scatter without polar decomposition (the timed, differentiated version)."""
    return _program(ti, size, n_grid, use_polar=False)


def build_p2g_sorted(ti, size: int = 8192, n_grid: int = 128):
    """P2G without polar decomposition, particles sorted by grid cell: the same work as
    p2g_8192, but threads working on different chunks rarely touch the same grid lines."""
    return _program(ti, size, n_grid, use_polar=False, sort=True)


def build_p2g_polar(ti, size: int = 8192, n_grid: int = 128):
    """P2G scatter with diffmpm's ``ti.polar_decompose`` rotation (fixed-corotated stress)."""
    return _program(ti, size, n_grid, use_polar=True)
