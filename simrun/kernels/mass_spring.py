"""A mass-spring robot with a neural controller on a ground with contact (the physics of
DiffTaichi's mass_spring.py, written as a scene: controller, energy, step kernel, objective).

controller (each step, before the forces; reads x, v and the step index):
    centroid          the robot's centre
    hidden_layer      tanh(weights1 [sin waves, state inputs, goal offset] + bias1)
    actuation_layer   act = tanh(weights2 hidden + bias2), one value per spring
energy:
    actuated_springs  springs whose rest length L = rest (1 + amplitude act) for the first
                      `n_actuated` springs. DiffTaichi's spring impulse is
                      dt k (r + e - L) / (r + e) d (r = |d|, e = 1e-4); that force is exactly
                      -dU/dx of U = k (r^2/2 - L r + L e ln(r + e)), the energy used here, so
                      the forces equal DiffTaichi's up to rounding (not an approximation).
step kernel:
    advance           v <- exp(-dt damping) v + dt g + dt F/m; x <- x + dt v, with a ground at
                      `ground`: a point that would cross it while falling moves to it at its
                      time of impact and stops there (DiffTaichi's `advance_toi`: contact
                      zeroes the whole velocity, i.e. infinite friction). Not an energy.
objective:
    run_distance      L = -x[head].x: run as far right as possible.

The weights are fields allocated here (`weights1`, `bias1`, `weights2`, `bias2`), drawn once
from a seeded normal distribution with DiffTaichi's scales (He-like, times 2 and 3).
"""

import math

import numpy as np

import simrun.lang as ti

N_SIN_WAVES = 10
N_HIDDEN = 32
EPS = 1e-4  # DiffTaichi's regulariser of the spring length
INIT_SEED = 0

DEFAULTS = {
    "centroid": {},
    "hidden_layer": {"omega": 10.0},
    "actuation_layer": {},
    "actuated_springs": {"stiffness": 3e4, "amplitude": 0.15, "n_actuated": 0},
    "advance": {"damping": 15.0, "gravity": -4.8, "ground": 0.1},
    "run_distance": {"head": 0},
}
LIMITS = {"actuated_springs": ["stiffness >= 0", "n_actuated >= 0"],
          "advance": ["damping >= 0"], "run_distance": ["0 <= head < n"]}


def n_inputs(n_objects: int) -> int:
    """Sin waves, 4 state inputs per point (offset from the centre, velocity), goal offset."""
    return N_SIN_WAVES + 4 * n_objects + 2


def allocate(ctx) -> dict:
    """Rest lengths (from the start shape), the controller's weights and its outputs."""
    if ctx.dim != 2:
        raise ValueError(f"the mass-spring robot is 2-D but the scene has dim {ctx.dim}")
    if "bonds" not in ctx.topology:
        raise ValueError("the springs are the scene's 'topology: bonds'")
    bonds = ctx.topology["bonds"]
    n_springs, n_in = len(bonds), n_inputs(ctx.n)
    x0 = np.asarray(ctx.x0, np.float64)
    rest = np.linalg.norm(x0[bonds[:, 0]] - x0[bonds[:, 1]], axis=1)
    rng = np.random.default_rng(INIT_SEED)
    w1 = rng.standard_normal((N_HIDDEN, n_in)) * math.sqrt(2 / (N_HIDDEN + n_in)) * 2
    w2 = rng.standard_normal((n_springs, N_HIDDEN)) * math.sqrt(2 / (N_HIDDEN + n_springs)) * 3

    def field(values: np.ndarray):
        f = ti.field(dtype=ctx.dtype, shape=values.shape, needs_grad=True)
        f.from_numpy(values.astype(ctx.np_dtype))
        return f

    return {
        "rest": field(rest), "weights1": field(w1), "bias1": field(np.zeros(N_HIDDEN)),
        "weights2": field(w2), "bias2": field(np.zeros(n_springs)),
        "hidden": field(np.zeros(N_HIDDEN)), "act": field(np.zeros(n_springs)),
        "centre": ti.Vector.field(2, dtype=ctx.dtype, shape=(), needs_grad=True),
        "goal": field(np.array([0.9, 0.2])),
    }


def render_shapes(params) -> dict:
    """The ground, drawn as a strip below its height."""
    ground = {**DEFAULTS["advance"], **params}["ground"]
    return {"boxes": [[[0.0, ground - 0.02], [1.0, ground]]]}


@ti.kernel
def centroid(x: ti.template(), centre: ti.template()):
    for _ in range(1):
        c = ti.Vector([0.0, 0.0])
        for i in range(x.shape[0]):
            c += x[i]
        centre[None] = (1.0 / x.shape[0]) * c


@ti.kernel
def hidden_layer(x: ti.template(), v: ti.template(), centre: ti.template(),
                 goal: ti.template(), weights1: ti.template(), bias1: ti.template(),
                 hidden: ti.template(), step: ti.i32, dt: float, omega: float):
    for i in range(N_HIDDEN):
        a = 0.0
        for j in ti.static(range(N_SIN_WAVES)):
            a += weights1[i, j] * ti.sin(omega * step * dt +
                                         2 * math.pi / N_SIN_WAVES * j)
        for j in range(x.shape[0]):
            offset = x[j] - centre[None]
            a += weights1[i, j * 4 + N_SIN_WAVES] * offset[0] * 0.05
            a += weights1[i, j * 4 + N_SIN_WAVES + 1] * offset[1] * 0.05
            a += weights1[i, j * 4 + N_SIN_WAVES + 2] * v[j][0] * 0.05
            a += weights1[i, j * 4 + N_SIN_WAVES + 3] * v[j][1] * 0.05
        last = x.shape[0] * 4 + N_SIN_WAVES
        a += weights1[i, last] * (goal[0] - centre[None][0])
        a += weights1[i, last + 1] * (goal[1] - centre[None][1])
        a += bias1[i]
        hidden[i] = ti.tanh(a)


@ti.kernel
def actuation_layer(hidden: ti.template(), weights2: ti.template(), bias2: ti.template(),
                    act: ti.template()):
    for i in range(act.shape[0]):
        a = 0.0
        for j in ti.static(range(N_HIDDEN)):
            a += weights2[i, j] * hidden[j]
        a += bias2[i]
        act[i] = ti.tanh(a)


@ti.kernel
def actuated_springs(x: ti.template(), bonds: ti.template(), rest: ti.template(),
                     act: ti.template(), U: ti.template(), stiffness: float, amplitude: float,
                     n_actuated: ti.i32):
    for s in range(bonds.shape[0]):
        d = x[bonds[s, 0]] - x[bonds[s, 1]]
        r = d.norm()
        target = rest[s]
        if s < n_actuated:
            target = rest[s] * (1.0 + amplitude * act[s])
        U[None] += stiffness * (0.5 * r * r - target * r + target * EPS * ti.log(r + EPS))


@ti.kernel
def advance(x: ti.template(), v: ti.template(), m: ti.template(), dt: float, damping: float,
            gravity: float, ground: float):
    for i in x:
        s = ti.exp(-dt * damping)
        old_v = s * v[i] + dt * gravity * ti.Vector([0.0, 1.0]) - dt * x.grad[i] / m[i]
        old_x = x[i]
        new_x = old_x + dt * old_v
        toi = 0.0
        new_v = old_v
        if new_x[1] < ground and old_v[1] < -1e-4:
            toi = -(old_x[1] - ground) / old_v[1]
            new_v = ti.Vector([0.0, 0.0])
        x[i] = old_x + toi * old_v + (dt - toi) * new_v
        v[i] = new_v


@ti.kernel
def run_distance(x: ti.template(), L: ti.template(), head: ti.i32):
    L[None] += -x[head][0]
