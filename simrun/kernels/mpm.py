"""2-D MLS-MPM driven by forces from an autodiff energy (after Taichi's mpm_lagrangian_forces).

Particles carry a triangle mesh; an energy term (e.g. ``kernels/fem.py:neo_hookean``) gives
x.grad = dU/dx under the tape, and these step kernels transfer momentum plus the force
impulse -dt * x.grad to a grid (p2g), update the grid (gravity, a round obstacle, walls) and
bring velocities and the APIC affine matrix C back to the particles (g2p). A scene lists them
in order: clear_grid, p2g, grid_op, g2p. The domain is the unit square.

Gravity can act on the grid (``gravity`` of grid_op) or be an energy term
(``kernels/external.py:uniform_gravity``), which puts it into the potential energy that
energy.csv records; ``scenes/mpm.yaml`` does the latter and sets ``gravity: 0`` here, as it
must, or gravity would count twice.
"""

import simrun.lang as ti

_STEP = {"n_grid": 64}
DEFAULTS = {
    "clear_grid": {},
    "p2g": dict(_STEP),
    "grid_op": {**_STEP, "gravity": 9.8, "bound": 3, "obstacle_x": 0.5, "obstacle_y": 0.5,
                "obstacle_r": 0.07},
    "g2p": dict(_STEP),
}
_GRID = ["n_grid >= 4"]
LIMITS = {"p2g": _GRID, "g2p": _GRID,
          "grid_op": _GRID + ["bound >= 1", "2 * bound < n_grid", "obstacle_r >= 0"]}


def render_shapes(params) -> dict:
    """What the pictures draw behind the particles: the walls and the round obstacle."""
    p = {**DEFAULTS["grid_op"], **params}
    wall = p["bound"] / p["n_grid"]  # grid nodes closer than `bound` cells stop at the walls
    return {"boxes": [[[wall, wall], [1.0 - wall, 1.0 - wall]]],
            "circles": [[p["obstacle_x"], p["obstacle_y"], p["obstacle_r"]]]}


def allocate(ctx) -> dict:
    """The grid (velocity/momentum and mass) and the per-particle affine matrix C."""
    n_grid = int(ctx.params.get("n_grid", _STEP["n_grid"]))
    if ctx.dim != 2:
        raise ValueError(f"the MPM kernels are 2-D but the scene has dim {ctx.dim}")
    if ((ctx.x0 < 0) | (ctx.x0 >= 1)).any():  # the grid covers the unit square only
        raise ValueError("every particle must start inside the unit square [0, 1)^2")
    return {
        "C": ti.Matrix.field(ctx.dim, ctx.dim, dtype=ctx.dtype, shape=ctx.n),
        # scratch: clear_grid zeroes the grid each step before p2g, grid_op and g2p read it,
        # so a gradient's stored states leave it out
        "grid_v": ctx.scratch(ti.Vector.field(ctx.dim, dtype=ctx.dtype,
                                              shape=(n_grid, n_grid))),
        "grid_m": ctx.scratch(ti.field(dtype=ctx.dtype, shape=(n_grid, n_grid))),
    }


@ti.kernel
def clear_grid(grid_v: ti.template(), grid_m: ti.template()):
    for i, j in grid_m:
        grid_v[i, j] = ti.Vector([0.0, 0.0])
        grid_m[i, j] = 0.0


@ti.kernel
def p2g(x: ti.template(), v: ti.template(), m: ti.template(), C: ti.template(),
        grid_v: ti.template(), grid_m: ti.template(), dt: float, n_grid: ti.i32):
    for p in x:
        dx = 1.0 / n_grid
        base = ti.cast(x[p] * n_grid - 0.5, ti.i32)
        fx = x[p] * n_grid - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        affine = m[p] * C[p]
        for i in ti.static(range(3)):
            for j in ti.static(range(3)):
                dpos = (ti.Vector([i, j]) - fx) * dx
                weight = w[i][0] * w[j][1]
                momentum = m[p] * v[p] - dt * x.grad[p] + affine @ dpos
                grid_v[base[0] + i, base[1] + j] += weight * momentum
                grid_m[base[0] + i, base[1] + j] += weight * m[p]


@ti.kernel
def grid_op(grid_v: ti.template(), grid_m: ti.template(), dt: float, n_grid: ti.i32,
            gravity: float, bound: ti.i32, obstacle_x: float, obstacle_y: float,
            obstacle_r: float):
    for i, j in grid_m:
        if grid_m[i, j] > 0:
            gv = grid_v[i, j] / grid_m[i, j]
            gv[1] -= dt * gravity
            dist = ti.Vector([i / n_grid - obstacle_x, j / n_grid - obstacle_y])
            if dist.norm() < obstacle_r:  # slip on the round obstacle
                normal = dist.normalized()
                inward = gv.dot(normal)
                if inward < 0:
                    gv -= normal * inward
            if i < bound and gv[0] < 0:
                gv[0] = 0.0
            if i > n_grid - bound and gv[0] > 0:
                gv[0] = 0.0
            if j < bound and gv[1] < 0:
                gv[1] = 0.0
            if j > n_grid - bound and gv[1] > 0:
                gv[1] = 0.0
            grid_v[i, j] = gv


@ti.kernel
def g2p(x: ti.template(), v: ti.template(), C: ti.template(), grid_v: ti.template(),
        dt: float, n_grid: ti.i32):
    for p in x:
        base = ti.cast(x[p] * n_grid - 0.5, ti.i32)
        fx = x[p] * n_grid - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        new_v = ti.Vector([0.0, 0.0])
        new_C = ti.Matrix([[0.0, 0.0], [0.0, 0.0]])
        for i in ti.static(range(3)):
            for j in ti.static(range(3)):
                dpos = ti.Vector([i, j]) - fx
                g_v = grid_v[base[0] + i, base[1] + j]
                weight = w[i][0] * w[j][1]
                new_v += weight * g_v
                new_C += 4.0 * n_grid * weight * g_v.outer_product(dpos)
        v[p] = new_v
        x[p] += dt * new_v
        C[p] = new_C
