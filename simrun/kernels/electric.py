"""A charged particle steered by eight fixed electrodes whose charges a neural network sets
each step, so that it follows a moving goal (the physics of DiffTaichi's electric.py).

controller (each step k, on the state x_k, v_k):
    goal_ahead     the goal the step aims at: goal and goal_v at step k + 1 (`aim`, `aim_v`)
    hidden_layer   hidden = tanh(weight1^T [x - 0.5, v, aim - 0.5, aim_v - 0.5] + bias1)
    charge_layer   charge = tanh(weight2^T hidden + bias2), one in [-1, 1] per electrode
step kernel:
    advance        F = sum_e strength charge_e (x - p_e) / max(|x - p_e|, 0.1)^3;
                   v <- exp(-dt damping) v + dt F;  x <- x + dt v;
                   cost += dt |x - aim|^2 (the original's loss, summed as the steps go)
objective (at: end):
    follow_goal    L = cost: dt |x_k - goal_k|^2 summed over the states x_1 .. x_n

The original's network reads x[t] and v[t] before its step writes them, i.e. the state its
previous forward pass left there; here it reads the state the step starts from
(bench/difftaichi_electric.py runs the original with that one change). `weight1`
(8, 64), `bias1`, `weight2` (64, 8), `bias2`, `goal` and `goal_v` (512, 2) come from the
scene's `fields:` file (bench/robots/electric_start.py writes it).
"""

import numpy as np

import simrun.lang as ti

N_HIDDEN, N_ELECTRODES, N_INPUTS = 64, 8, 8
MAX_STEPS = 512  # rows of the goal's path
PAD = 0.1
ELECTRODES = [[PAD, PAD], [PAD, 1 - PAD], [1 - PAD, 1 - PAD], [1 - PAD, PAD],
              [0.5, 1 - PAD], [0.5, PAD], [PAD, 0.5], [1 - PAD, 0.5]]

DEFAULTS = {
    "goal_ahead": {},
    "hidden_layer": {},
    "charge_layer": {},
    "advance": {"strength": 1e-3, "damping": 0.2},
    "follow_goal": {},
}
LIMITS = {"advance": ["damping >= 0"]}


def allocate(ctx) -> dict:
    """The network's weights and activations, the electrodes' charges and the goal's path."""
    if ctx.dim != 2 or ctx.n != 1:
        raise ValueError(f"electric steers one particle in 2-D; the scene has {ctx.n} "
                         f"particle(s) in {ctx.dim}-D")

    def field(*shape: int):
        f = ti.field(dtype=ctx.dtype, shape=shape, needs_grad=True)
        f.from_numpy(np.zeros(shape, ctx.np_dtype))
        return f

    return {
        "weight1": field(N_INPUTS, N_HIDDEN), "bias1": field(N_HIDDEN),
        "weight2": field(N_HIDDEN, N_ELECTRODES), "bias2": field(N_ELECTRODES),
        "hidden": field(N_HIDDEN), "charge": field(N_ELECTRODES),
        "goal": ti.Vector.field(2, dtype=ctx.dtype, shape=MAX_STEPS),
        "goal_v": ti.Vector.field(2, dtype=ctx.dtype, shape=MAX_STEPS),
        "aim": ti.Vector.field(2, dtype=ctx.dtype, shape=()),
        "aim_v": ti.Vector.field(2, dtype=ctx.dtype, shape=()),
        "cost": field(),
    }


def render_shapes(params) -> dict:
    """The electrodes, drawn as small circles."""
    return {"circles": [[p[0], p[1], 0.02] for p in ELECTRODES], "particle_radius": 0.015}


@ti.kernel
def goal_ahead(goal: ti.template(), goal_v: ti.template(), aim: ti.template(),
               aim_v: ti.template(), step: ti.i32):
    for _ in range(1):
        aim[None] = goal[step + 1]
        aim_v[None] = goal_v[step + 1]


@ti.kernel
def hidden_layer(x: ti.template(), v: ti.template(), aim: ti.template(),
                 aim_v: ti.template(), weight1: ti.template(), bias1: ti.template(),
                 hidden: ti.template()):
    for i in range(N_HIDDEN):
        g = aim[None]
        gv = aim_v[None]
        a = (x[0][0] - 0.5) * weight1[0, i] + (x[0][1] - 0.5) * weight1[1, i]
        a += v[0][0] * weight1[2, i] + v[0][1] * weight1[3, i]
        a += (g[0] - 0.5) * weight1[4, i] + (g[1] - 0.5) * weight1[5, i]
        a += (gv[0] - 0.5) * weight1[6, i] + (gv[1] - 0.5) * weight1[7, i]
        hidden[i] = ti.tanh(a + bias1[i])


@ti.kernel
def charge_layer(hidden: ti.template(), weight2: ti.template(), bias2: ti.template(),
                 charge: ti.template()):
    for i in range(N_ELECTRODES):
        a = 0.0
        for j in ti.static(range(N_HIDDEN)):
            a += hidden[j] * weight2[j, i]
        charge[i] = ti.tanh(a + bias2[i])


@ti.kernel
def advance(x: ti.template(), v: ti.template(), charge: ti.template(), aim: ti.template(),
            cost: ti.template(), dt: float, strength: float, damping: float):
    for p in x:
        force = ti.Vector([0.0, 0.0])
        for e in ti.static(range(N_ELECTRODES)):
            r = x[p] - ti.Vector(ELECTRODES[e])
            reach = ti.max(r.norm(), 0.1)
            force += strength * charge[e] / (reach * reach * reach) * r
        new_v = v[p] * ti.exp(-dt * damping) + dt * force
        new_x = x[p] + dt * new_v
        v[p] = new_v
        x[p] = new_x
        cost[None] += dt * (new_x - aim[None]).norm_sqr()


@ti.kernel
def follow_goal(cost: ti.template(), L: ti.template()):
    for _ in range(1):
        L[None] += cost[None]
