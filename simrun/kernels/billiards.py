"""Billiards (the physics of DiffTaichi's billiards.py): balls of equal mass collide with
restitution `elasticity`, resolved by impulses and a time-of-impact position correction;
there is no energy, so a scene lists the step kernels `collide`, `roll` and no energy terms.

collide   for each ball, the sum over the other balls that will overlap after this step
          (centres closer than 2 radius at x + dt v) and approach: impulse -(1 + e)/2 (n.v) n,
          and a position correction min(toi - dt, 0) * impulse that puts the contact at its
          time of impact toi = (|d| - 2 radius) / min(-1e-3, n.v)
roll      v += impulse; x += dt v + correction
miss      the objective: squared distance of ball `target` from the goal (gx, gy)

Ball 0, the cue ball, starts from the module fields `cue_x`, `cue_v` (the kernel `place_cue`,
run as the scene's controller, puts it there at step 0), so `simrun optimize` can tune them
as `fields.cue_x`, `fields.cue_v` while the rack stays where the scene sets it.
"""

import simrun.lang as ti

DEFAULTS = {
    "place_cue": {},
    "collide": {"radius": 0.03, "elasticity": 0.8},
    "roll": {},
    "miss": {"target": 10, "gx": 0.9, "gy": 0.75},
}
LIMITS = {"collide": ["radius > 0", "0 <= elasticity <= 1"], "miss": ["0 <= target < n"]}


def allocate(ctx) -> dict:
    """Per-ball impulse and position correction of the current step; the cue's start."""
    if ctx.dim != 2:
        raise ValueError(f"billiards is 2-D but the scene has dim {ctx.dim}")
    cue_x = ti.Vector.field(2, dtype=ctx.dtype, shape=(), needs_grad=True)
    cue_v = ti.Vector.field(2, dtype=ctx.dtype, shape=(), needs_grad=True)
    cue_x.from_numpy(ctx.x0[0].astype(ctx.np_dtype))
    cue_v.from_numpy(ctx.np_dtype([0.3, 0.0]))
    return {"cue_x": cue_x, "cue_v": cue_v,
            "impulse": ti.Vector.field(2, dtype=ctx.dtype, shape=ctx.n, needs_grad=True),
            "x_inc": ti.Vector.field(2, dtype=ctx.dtype, shape=ctx.n, needs_grad=True)}


def render_shapes(params) -> dict:
    """The goal (the objective's gx, gy) as a target, and the balls at their radius."""
    p = {**DEFAULTS["miss"], **DEFAULTS["collide"], **params}
    return {"targets": [[p["gx"], p["gy"]]], "particle_radius": p["radius"]}


@ti.kernel
def place_cue(x: ti.template(), v: ti.template(), cue_x: ti.template(), cue_v: ti.template(),
              step: ti.i32):
    for _ in range(1):
        if step == 0:
            x[0] = cue_x[None]
            v[0] = cue_v[None]


@ti.func
def _pair(x, v, i, j, dt, radius, elasticity):
    """(impulse, position correction) on ball i from ball j."""
    imp = ti.Vector([0.0, 0.0])
    shift = ti.Vector([0.0, 0.0])
    d = (x[i] + dt * v[i]) - (x[j] + dt * v[j])
    dist = d.norm()
    if dist < 2 * radius:
        n = d.normalized(1e-6)
        approach = n.dot(v[i] - v[j])
        if approach < 0:
            imp = -(1 + elasticity) * 0.5 * approach * n
            toi = (dist - 2 * radius) / ti.min(-1e-3, approach)
            shift = ti.min(toi - dt, 0) * imp
    return imp, shift


@ti.kernel
def collide(x: ti.template(), v: ti.template(), impulse: ti.template(), x_inc: ti.template(),
            dt: float, radius: float, elasticity: float):
    for i in range(x.shape[0]):
        imp = ti.Vector([0.0, 0.0])
        shift = ti.Vector([0.0, 0.0])
        for j in range(x.shape[0]):  # j < i first, then j > i: DiffTaichi's order
            if j != i:
                a, b = _pair(x, v, i, j, dt, radius, elasticity)
                imp += a
                shift += b
        impulse[i] = imp
        x_inc[i] = shift


@ti.kernel
def roll(x: ti.template(), v: ti.template(), impulse: ti.template(), x_inc: ti.template(),
         dt: float):
    for i in x:
        v[i] = v[i] + impulse[i]
        x[i] = x[i] + dt * v[i] + x_inc[i]


@ti.kernel
def miss(x: ti.template(), L: ti.template(), target: ti.i32, gx: float, gy: float):
    L[None] += (x[target][0] - gx) ** 2 + (x[target][1] - gy) ** 2
