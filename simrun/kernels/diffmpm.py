"""A soft robot in 2-D MLS-MPM whose muscles a sin-wave controller drives (the physics of
DiffTaichi's diffmpm.py): particles carry the deformation gradient F and the APIC matrix C;
actuated particles add a stress along y of strength `strength * act`.

controller (each step, before the step kernels):
    actuation     act[a] = tanh(sum_j weights[a, j] sin(omega t dt + 2 pi j / n) + bias[a])
step kernels, in order: clear_grid, p2g, grid_op, g2p
    p2g           F <- (I + dt C) F; corotated stress 2 mu (F - R) F^T + lambda (J - 1) J I
                  plus F A F^T (A = diag(0, act)); momentum and mass to the grid
    grid_op       gravity; walls and a floor that stop a grid node moving into them
                  (DiffTaichi's floor has Coulomb-friction code after zeroing the velocity,
                  so it never acts: its floor is sticky, and so is this one)
    g2p           velocities and C back to the particles; x += dt v
objective:
    run_distance  minus the solid particles' mean x: swim / walk right

`actuator` (-1 for passive particles, else the muscle index) is a field the scene sets from a
file (`fields: {actuator: robot.npz}`); the controller's `weights` start from a seeded normal
draw of scale 0.01, `bias` at zero. Every particle has mass 1 and volume 1 (DiffTaichi's
units: forces and masses scale alike, so only their ratio matters).
"""

import math

import numpy as np

import simrun.lang as ti

N_SIN_WAVES = 4
INIT_SEED = 0

_GRID = {"n_grid": 128}
DEFAULTS = {
    "actuation": {"omega": 20.0},
    "clear_grid": {},
    "p2g": {**_GRID, "mu": 10.0, "lam": 10.0, "strength": 4.0},
    "grid_op": {**_GRID, "gravity": 3.8, "bound": 3},
    "g2p": dict(_GRID),
    "run_distance": {},
}
LIMITS = {"p2g": ["n_grid >= 8"], "grid_op": ["bound >= 1", "2 * bound < n_grid"]}


def allocate(ctx) -> dict:
    """Grid, per-particle F, C and muscle index, and the controller's weights and output."""
    if ctx.dim != 2:
        raise ValueError(f"diffmpm is 2-D but the scene has dim {ctx.dim}")
    if ((ctx.x0 < 0) | (ctx.x0 >= 1)).any():
        raise ValueError("every particle must start inside the unit square [0, 1)^2")
    n_grid = int(ctx.params.get("n_grid", _GRID["n_grid"]))
    n_act = int(ctx.params.get("n_actuators", 4))
    rng = np.random.default_rng(INIT_SEED)

    def field(values: np.ndarray):
        f = ti.field(dtype=ctx.dtype, shape=values.shape, needs_grad=True)
        f.from_numpy(values.astype(ctx.np_dtype))
        return f

    F = ti.Matrix.field(2, 2, dtype=ctx.dtype, shape=ctx.n, needs_grad=True)
    F.from_numpy(np.tile(np.eye(2, dtype=ctx.np_dtype), (ctx.n, 1, 1)))
    actuator = ti.field(dtype=ti.i32, shape=ctx.n)
    actuator.fill(-1)
    return {
        "F": F, "C": ti.Matrix.field(2, 2, dtype=ctx.dtype, shape=ctx.n, needs_grad=True),
        "actuator": actuator,
        "weights": field(rng.standard_normal((n_act, N_SIN_WAVES)) * 0.01),
        "bias": field(np.zeros(n_act)), "act": field(np.zeros(n_act)),
        # scratch: clear_grid and grid_op rewrite them each step before they are read
        "grid_v": ctx.scratch(ti.Vector.field(2, dtype=ctx.dtype, shape=(n_grid, n_grid),
                                              needs_grad=True)),
        "grid_m": ctx.scratch(ti.field(dtype=ctx.dtype, shape=(n_grid, n_grid),
                                       needs_grad=True)),
        "grid_out": ctx.scratch(ti.Vector.field(2, dtype=ctx.dtype, shape=(n_grid, n_grid),
                                                needs_grad=True)),
    }


def render_shapes(params) -> dict:
    """The floor: grid nodes below `bound` cells stop or slide."""
    p = {**DEFAULTS["grid_op"], **params}
    wall = p["bound"] / p["n_grid"]
    return {"boxes": [[[0.0, 0.0], [1.0, wall]]]}


@ti.kernel
def actuation(weights: ti.template(), bias: ti.template(), act: ti.template(), step: ti.i32,
              dt: float, omega: float):
    for i in range(act.shape[0]):
        a = 0.0
        for j in ti.static(range(N_SIN_WAVES)):
            a += weights[i, j] * ti.sin(omega * step * dt +
                                        2 * math.pi / N_SIN_WAVES * j)
        a += bias[i]
        act[i] = ti.tanh(a)


@ti.kernel
def clear_grid(grid_v: ti.template(), grid_m: ti.template()):
    for i, j in grid_m:
        grid_v[i, j] = ti.Vector([0.0, 0.0])
        grid_m[i, j] = 0.0


@ti.kernel
def p2g(x: ti.template(), v: ti.template(), m: ti.template(), F: ti.template(),
        C: ti.template(), actuator: ti.template(), act: ti.template(), grid_v: ti.template(),
        grid_m: ti.template(), dt: float, n_grid: ti.i32, mu: float, lam: float,
        strength: float):
    for p in x:
        inv_dx = ti.cast(n_grid, float)
        dx = 1.0 / inv_dx
        base = ti.cast(x[p] * inv_dx - 0.5, ti.i32)
        fx = x[p] * inv_dx - ti.cast(base, float)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        new_F = (ti.Matrix([[1.0, 0.0], [0.0, 1.0]]) + dt * C[p]) @ F[p]
        J = new_F.determinant()
        F[p] = new_F
        r, s = ti.polar_decompose(new_F)
        muscle = 0.0
        if actuator[p] >= 0:
            muscle = act[actuator[p]] * strength
        A = ti.Matrix([[0.0, 0.0], [0.0, 1.0]]) * muscle
        cauchy = 2 * mu * (new_F - r) @ new_F.transpose() + \
            ti.Matrix([[1.0, 0.0], [0.0, 1.0]]) * (lam * (J - 1) * J)
        cauchy += new_F @ A @ new_F.transpose()
        stress = -(dt * 4 * inv_dx * inv_dx) * cauchy
        affine = stress + m[p] * C[p]
        for i in ti.static(range(3)):
            for j in ti.static(range(3)):
                dpos = (ti.Vector([i, j]) - fx) * dx
                weight = w[i][0] * w[j][1]
                grid_v[base[0] + i, base[1] + j] += weight * (m[p] * v[p] + affine @ dpos)
                grid_m[base[0] + i, base[1] + j] += weight * m[p]


@ti.kernel
def grid_op(grid_v: ti.template(), grid_m: ti.template(), grid_out: ti.template(), dt: float,
            n_grid: ti.i32, gravity: float, bound: ti.i32):
    for i, j in grid_m:
        v_out = (1 / (grid_m[i, j] + 1e-10)) * grid_v[i, j]
        v_out[1] -= dt * gravity
        if i < bound and v_out[0] < 0:
            v_out = ti.Vector([0.0, 0.0])
        if i > n_grid - bound and v_out[0] > 0:
            v_out = ti.Vector([0.0, 0.0])
        if j < bound and v_out[1] < 0:  # the floor stops what moves into it
            v_out = ti.Vector([0.0, 0.0])
        if j > n_grid - bound and v_out[1] > 0:
            v_out = ti.Vector([0.0, 0.0])
        grid_out[i, j] = v_out


@ti.kernel
def g2p(x: ti.template(), v: ti.template(), C: ti.template(), grid_out: ti.template(),
        dt: float, n_grid: ti.i32):
    for p in x:
        inv_dx = ti.cast(n_grid, float)
        base = ti.cast(x[p] * inv_dx - 0.5, ti.i32)
        fx = x[p] * inv_dx - ti.cast(base, float)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        new_v = ti.Vector([0.0, 0.0])
        new_C = ti.Matrix([[0.0, 0.0], [0.0, 0.0]])
        for i in ti.static(range(3)):
            for j in ti.static(range(3)):
                dpos = ti.Vector([i, j]) - fx
                g_v = grid_out[base[0] + i, base[1] + j]
                weight = w[i][0] * w[j][1]
                new_v += weight * g_v
                new_C += 4 * weight * g_v.outer_product(dpos) * inv_dx
        v[p] = new_v
        x[p] = x[p] + dt * new_v
        C[p] = new_C


@ti.kernel
def run_distance(x: ti.template(), actuator: ti.template(), L: ti.template()):
    for p in x:
        L[None] += -(1.0 / x.shape[0]) * x[p][0]
