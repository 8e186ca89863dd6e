"""A soft robot in 3-D MLS-MPM whose 16 muscles a sin-wave controller drives (the physics of
DiffTaichi's diffmpm3d.py, and of liquid.py where fluid particles share the grid): particles
carry F and the APIC matrix C; a muscle adds a stress along z of strength `strength * act`.

controller (each step, before the step kernels):
    actuation     act[a] = tanh(sum_j weights[a, j] sin(omega t dt + 2 pi j / 4) + bias[a])
step kernels, in order: clear_grid, p2g, grid_op, g2p
    p2g           F <- (I + dt C) F; solid (particle_type 1): neo-Hookean Kirchhoff stress
                  mu F F^T + (lambda ln J - mu) I, plus F A F^T (A = diag(0, 0, act));
                  fluid (0): pressure E (J - 1) I, and F is reset to diag(sqrt J, sqrt J, 1)
                  as the original does; momentum and mass to the n_grid^3 grid
    grid_op       gravity; walls that stop a node moving into them, a sticky floor (the
                  original's Coulomb branch runs on a velocity it has just zeroed)
    g2p           velocities and C back to the particles; x += dt v
objective:
    run_distance  minus the solid particles' mean x (walk, or swim, to +x); `axis` 1 or 2
                  for their mean y or z instead

`actuator` (-1 passive), `particle_type`, `weights` (16, 4) and `bias` come from the
scene's `fields:` file (bench/robots/mpm3d_geometry.py); particle masses are the scene's
(`m`: 1 solid, 4 fluid as in liquid.py), each particle's volume 1.
"""

import math

import numpy as np

import simrun.lang as ti

N_SIN_WAVES = 4
_GRID = {"n_grid": 64}
DEFAULTS = {
    "actuation": {"omega": 40.0},
    "clear_grid": {},
    "p2g": {**_GRID, "mu": 10.0, "lam": 10.0, "E": 10.0, "strength": 5.0},
    "grid_op": {**_GRID, "gravity": 10.0, "bound": 3},
    "g2p": dict(_GRID),
    "run_distance": {"axis": 0},
}
LIMITS = {"p2g": ["n_grid >= 8"], "grid_op": ["bound >= 1", "2 * bound < n_grid"],
          "run_distance": ["0 <= axis < dim"]}


def allocate(ctx) -> dict:
    """Grid, per-particle F, C, muscle and type, and the controller's weights and output."""
    if ctx.dim != 3:
        raise ValueError(f"diffmpm3d is 3-D but the scene has dim {ctx.dim}")
    if ((ctx.x0 < 0) | (ctx.x0 >= 1)).any():
        raise ValueError("every particle must start inside the unit cube [0, 1)^3")
    n_grid = int(ctx.params.get("n_grid", _GRID["n_grid"]))
    n_act = int(ctx.params.get("n_actuators", 16))
    # grid_v, grid_m, grid_out: 7 numbers a node, each with its gradient
    ctx.check_memory(n_grid ** 3 * 7 * 2 * np.dtype(ctx.np_dtype).itemsize,
                     f"the {n_grid}^3 grid (n_grid = {n_grid})")

    def field(*shape: int):
        f = ti.field(dtype=ctx.dtype, shape=shape, needs_grad=True)
        f.from_numpy(np.zeros(shape, ctx.np_dtype))
        return f

    def ints(value: int):
        f = ti.field(dtype=ti.i32, shape=ctx.n)
        f.fill(value)
        return f

    def grid(vector: bool):  # scratch: clear_grid and grid_op rewrite it before it is read
        shape = (n_grid, n_grid, n_grid)
        if vector:
            return ctx.scratch(ti.Vector.field(3, dtype=ctx.dtype, shape=shape,
                                               needs_grad=True))
        return ctx.scratch(ti.field(dtype=ctx.dtype, shape=shape, needs_grad=True))

    F = ti.Matrix.field(3, 3, dtype=ctx.dtype, shape=ctx.n, needs_grad=True)
    F.from_numpy(np.tile(np.eye(3, dtype=ctx.np_dtype), (ctx.n, 1, 1)))
    return {
        "F": F, "C": ti.Matrix.field(3, 3, dtype=ctx.dtype, shape=ctx.n, needs_grad=True),
        "actuator": ints(-1), "particle_type": ints(1),
        "weights": field(n_act, N_SIN_WAVES), "bias": field(n_act), "act": field(n_act),
        "grid_v": grid(True), "grid_m": grid(False), "grid_out": grid(True),
    }


def render_shapes(params) -> dict:
    """The floor: grid nodes below `bound` cells stop."""
    p = {**DEFAULTS["grid_op"], **params}
    wall = p["bound"] / p["n_grid"]
    return {"boxes": [[[0.0, 0.0], [1.0, wall]]]}


@ti.kernel
def actuation(weights: ti.template(), bias: ti.template(), act: ti.template(), step: ti.i32,
              dt: float, omega: float):
    for i in range(act.shape[0]):
        a = 0.0
        for j in ti.static(range(N_SIN_WAVES)):
            a += weights[i, j] * ti.sin(omega * step * dt + 2 * math.pi / N_SIN_WAVES * j)
        a += bias[i]
        act[i] = ti.tanh(a)


@ti.kernel
def clear_grid(grid_v: ti.template(), grid_m: ti.template()):
    for i, j, k in grid_m:
        grid_v[i, j, k] = ti.Vector([0.0, 0.0, 0.0])
        grid_m[i, j, k] = 0.0


@ti.kernel
def p2g(x: ti.template(), v: ti.template(), m: ti.template(), F: ti.template(),
        C: ti.template(), actuator: ti.template(), particle_type: ti.template(),
        act: ti.template(), grid_v: ti.template(), grid_m: ti.template(), dt: float,
        n_grid: ti.i32, mu: float, lam: float, E: float, strength: float):
    for p in x:
        inv_dx = ti.cast(n_grid, float)
        dx = 1.0 / inv_dx
        base = ti.cast(x[p] * inv_dx - 0.5, ti.i32)
        fx = x[p] * inv_dx - ti.cast(base, float)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        ident = ti.Matrix([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
        new_F = (ident + dt * C[p]) @ F[p]
        J = new_F.determinant()
        cauchy = ident * ((J - 1) * E)
        if particle_type[p] == 0:
            root = ti.sqrt(J)
            new_F = ti.Matrix([[root, 0.0, 0.0], [0.0, root, 0.0], [0.0, 0.0, 1.0]])
        else:
            cauchy = mu * (new_F @ new_F.transpose()) + ident * (lam * ti.log(J) - mu)
        F[p] = new_F
        muscle = 0.0
        if actuator[p] >= 0:
            muscle = act[actuator[p]] * strength
        A = ti.Matrix([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]) * muscle
        cauchy += new_F @ A @ new_F.transpose()
        stress = -(dt * 4 * inv_dx * inv_dx) * cauchy
        affine = stress + m[p] * C[p]
        for i in ti.static(range(3)):
            for j in ti.static(range(3)):
                for k in ti.static(range(3)):
                    dpos = (ti.Vector([i, j, k]) - fx) * dx
                    weight = w[i][0] * w[j][1] * w[k][2]
                    node = base + ti.Vector([i, j, k])
                    grid_v[node] += weight * (m[p] * v[p] + affine @ dpos)
                    grid_m[node] += weight * m[p]


@ti.kernel
def grid_op(grid_v: ti.template(), grid_m: ti.template(), grid_out: ti.template(), dt: float,
            n_grid: ti.i32, gravity: float, bound: ti.i32):
    for i, j, k in grid_m:
        v_out = (1 / (grid_m[i, j, k] + 1e-10)) * grid_v[i, j, k]
        v_out[1] -= dt * gravity
        stop = (i < bound and v_out[0] < 0) or (i > n_grid - bound and v_out[0] > 0)
        stop = stop or (k < bound and v_out[2] < 0) or (k > n_grid - bound and v_out[2] > 0)
        stop = stop or (j < bound and v_out[1] < 0) or (j > n_grid - bound and v_out[1] > 0)
        if stop:
            v_out = ti.Vector([0.0, 0.0, 0.0])
        grid_out[i, j, k] = v_out


@ti.kernel
def g2p(x: ti.template(), v: ti.template(), C: ti.template(), grid_out: ti.template(),
        dt: float, n_grid: ti.i32):
    for p in x:
        inv_dx = ti.cast(n_grid, float)
        base = ti.cast(x[p] * inv_dx - 0.5, ti.i32)
        fx = x[p] * inv_dx - ti.cast(base, float)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        new_v = ti.Vector([0.0, 0.0, 0.0])
        new_C = ti.Matrix([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        for i in ti.static(range(3)):
            for j in ti.static(range(3)):
                for k in ti.static(range(3)):
                    dpos = ti.Vector([i, j, k]) - fx
                    g_v = grid_out[base[0] + i, base[1] + j, base[2] + k]
                    weight = w[i][0] * w[j][1] * w[k][2]
                    new_v += weight * g_v
                    new_C += 4 * weight * g_v.outer_product(dpos) * inv_dx
        v[p] = new_v
        x[p] = x[p] + dt * new_v
        C[p] = new_C


@ti.kernel
def run_distance(x: ti.template(), particle_type: ti.template(), L: ti.template(),
                 axis: ti.i32):
    for _ in range(1):  # the solid particles' count, then their mean x: one serial pass each
        solid = 0.0
        for p in range(x.shape[0]):
            solid += ti.cast(particle_type[p], float)
        total = 0.0
        for p in range(x.shape[0]):
            total += ti.cast(particle_type[p], float) * x[p][axis]
        L[None] += -total / ti.max(solid, 1.0)
