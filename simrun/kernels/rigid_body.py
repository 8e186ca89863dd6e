"""2-D rigid boxes joined by springs, on a ground with friction and time-of-impact contact,
driven by a neural controller (the physics of DiffTaichi's rigid_body.py, written as a scene:
the scene's `bodies:` block gives the boxes and springs, the particles are their centres).

State: x, v (the centres, the engine's particles) and the module fields `angle`,
`angular_v`; each step gathers impulses into `v_inc`, `angular_v_inc` and the position
corrections of contacts into `x_inc`, `angle_inc`.

controller (each step, before the step kernels):
    hidden_layer      tanh(weights1 [sin waves, each box's offset from the head box, v, angle,
                      angular velocity (x 0.05), the goal] + bias1)
    actuation_layer   act = tanh(weights2 hidden + bias2), one value per spring
step kernels, in order:
    collide           each box corner that would pass below `ground` this step while falling
                      gets a normal impulse (restitution `elasticity`) and a friction impulse
                      (at most `friction` times it); a corner above the ground moves back by
                      its time of impact (DiffTaichi's toi). Each corner's impulse is
                      computed alone, as there: a wide box's two bottom corners together stop
                      less than its fall each step, so it sinks slowly when it rests flat
                      (DiffTaichi's penalty term, which would push it back, is zero there:
                      its kernel multiplies by a local it has just set to 0)
    springs           an impulse dt k (l - L) / l d between the two anchor points, l = |d| +
                      1e-4, L = length (1 + actuation act); a joint (L = 0) also removes the
                      anchors' relative velocity (|u| + 0.1 in its denominator)
    advance           v <- exp(-dt damping) v + v_inc + dt gravity; x <- x + dt v (+ x_inc
                      with toi); the same for angle and angular_v
objective:
    reach             L = |x[head] - goal|

Masses are the boxes' areas (density 1), the scene's `particles.mass`; inertia 4/3 hx hy
(hx^2 + hy^2). Constants the original folds in double precision (exp(-dt damping) and
dt gravity) are computed in f64 here and rounded once, as it does.
"""

import math

import numpy as np

import simrun.lang as ti

N_SIN_WAVES = 10
N_HIDDEN = 32
INIT_SEED = 0
# under the square roots of |d| and |relative velocity|: a joint's two points coincide, and
# move alike, at the start, where sqrt's derivative is infinite; with it the derivative
# there is 0, and any value it changes (|d|^2 < 1e-23) is far below the 1e-4 and 0.1 added
TINY = 1e-30

_CONTACT = {"ground": 0.1, "gravity": -9.8}
DEFAULTS = {
    "hidden_layer": {"wave_omega": 30.0, "head": 0, "goal_x": 0.9, "goal_y": 0.15},
    "actuation_layer": {},
    "collide": {**_CONTACT, "friction": 1.0, "elasticity": 0.0},
    "springs": {},
    "advance": {"gravity": -9.8, "damping": 10.0, "toi": 1},
    "reach": {"head": 0, "goal_x": 0.9, "goal_y": 0.15},
}
LIMITS = {"hidden_layer": ["0 <= head < n"], "reach": ["0 <= head < n"],
          "collide": ["friction >= 0", "0 <= elasticity <= 1"],
          "advance": ["damping >= 0", "0 <= toi <= 1"]}


def n_inputs(n_bodies: int) -> int:
    """Sin waves, 6 state inputs per box, the goal."""
    return N_SIN_WAVES + 6 * n_bodies + 2


def allocate(ctx) -> dict:
    """Box shapes, springs, rotation state, increments and the controller's weights."""
    bodies = getattr(ctx, "bodies", None)
    if bodies is None:
        raise ValueError("rigid_body's kernels need the scene's 'bodies:' block (boxes and "
                         "springs)")
    n, n_springs = ctx.n, max(len(bodies.springs), 1)
    fp = ctx.np_dtype
    half = np.array([b.halfsize for b in bodies.boxes], dtype=fp)
    hx, hy = half[:, 0], half[:, 1]
    inertia = fp(4 / 3) * hx * hy * (hx * hx + hy * hy)  # the original's order, in precision
    springs = bodies.springs
    rng = np.random.default_rng(INIT_SEED)
    n_in = n_inputs(n)
    w1 = rng.standard_normal((N_HIDDEN, n_in)) * math.sqrt(2 / (N_HIDDEN + n_in)) * 0.5
    w2 = rng.standard_normal((n_springs, N_HIDDEN)) * math.sqrt(2 / (N_HIDDEN + n_springs))

    def field(values, dtype=None, grad=True):
        values = np.asarray(values)
        f = ti.field(dtype=dtype or ctx.dtype, shape=values.shape, needs_grad=grad)
        f.from_numpy(values.astype(np.int32 if dtype is ti.i32 else fp))
        return f

    def vectors(values, grad=True):
        values = np.asarray(values, dtype=fp).reshape(-1, 2)
        f = ti.Vector.field(2, dtype=ctx.dtype, shape=len(values), needs_grad=grad)
        f.from_numpy(values)
        return f

    rows = [(s.a, s.b) for s in springs] or [(0, 0)]
    return {
        "halfsize": vectors(half, grad=False), "inv_inertia": field(1 / inertia, grad=False),
        "angle": field([b.angle for b in bodies.boxes]), "angular_v": field(np.zeros(n)),
        "x_inc": vectors(np.zeros((n, 2))), "v_inc": vectors(np.zeros((n, 2))),
        "angle_inc": field(np.zeros(n)), "angular_v_inc": field(np.zeros(n)),
        "anchors": field(rows, ti.i32, grad=False),
        "offset_a": vectors([s.offset_a for s in springs] or [(0, 0)], grad=False),
        "offset_b": vectors([s.offset_b for s in springs] or [(0, 0)], grad=False),
        "rest": field([s.length for s in springs] or [0.0], grad=False),
        "joint": field([int(s.joint) for s in springs] or [0], ti.i32, grad=False),
        "stiffness": field([s.stiffness for s in springs] or [0.0], grad=False),
        "amplitude": field([s.actuation for s in springs] or [0.0], grad=False),
        "n_springs": field(np.array(len(springs)), ti.i32, grad=False),
        "weights1": field(w1), "bias1": field(np.zeros(N_HIDDEN)),
        "weights2": field(w2), "bias2": field(np.zeros(n_springs)),
        "hidden": field(np.zeros(N_HIDDEN)), "act": field(np.zeros(n_springs)),
    }


def render_shapes(params) -> dict:
    """The ground as a strip below its height, the goal as a target."""
    p = {**DEFAULTS["collide"], **DEFAULTS["reach"], **params}
    ground = p["ground"]
    return {"boxes": [[[0.0, ground - 0.02], [1.0, ground]]],
            "targets": [[p["goal_x"], p["goal_y"]]]}


@ti.func
def _rotated(angle, r):
    """R(angle) r, as the original's matrix product."""
    c, s = ti.cos(angle), ti.sin(angle)
    return ti.Vector([c * r[0] + (-s) * r[1], s * r[0] + c * r[1]])


@ti.func
def _to_world(x, v, angle, angular_v, i, local):
    """A point fixed on box i: its position, velocity and offset from the centre."""
    rela = _rotated(angle[i], local)
    world_v = v[i] + angular_v[i] * ti.Vector([-rela[1], rela[0]])
    return x[i] + rela, world_v, rela


@ti.func
def _impulse(x, m, inv_inertia, x_inc, v_inc, angle_inc, angular_v_inc, i, impulse,
             location, toi_in, dt):
    """Impulse `impulse` on box i at `location`, and the time-of-impact correction."""
    delta_v = impulse * (1.0 / m[i])
    d = location - x[i]
    delta_w = (d[0] * impulse[1] - d[1] * impulse[0]) * inv_inertia[i]
    toi = ti.min(ti.max(0.0, toi_in), dt)
    x_inc[i] += toi * (-delta_v)
    angle_inc[i] += toi * (-delta_w)
    v_inc[i] += delta_v
    angular_v_inc[i] += delta_w


@ti.kernel
def hidden_layer(x: ti.template(), v: ti.template(), angle: ti.template(),
                 angular_v: ti.template(), weights1: ti.template(), bias1: ti.template(),
                 hidden: ti.template(), step: ti.i32, dt: float, wave_omega: float,
                 head: ti.i32, goal_x: float, goal_y: float):
    for i in range(N_HIDDEN):
        a = 0.0
        for j in ti.static(range(N_SIN_WAVES)):
            a += weights1[i, j] * ti.sin(wave_omega * step * dt +
                                         2 * math.pi / N_SIN_WAVES * j)
        for j in range(x.shape[0]):
            offset = x[j] - x[head]
            a += weights1[i, j * 6 + N_SIN_WAVES] * offset[0] * 0.05
            a += weights1[i, j * 6 + N_SIN_WAVES + 1] * offset[1] * 0.05
            a += weights1[i, j * 6 + N_SIN_WAVES + 2] * v[j][0] * 0.05
            a += weights1[i, j * 6 + N_SIN_WAVES + 3] * v[j][1] * 0.05
            a += weights1[i, j * 6 + N_SIN_WAVES + 4] * angle[j] * 0.05
            a += weights1[i, j * 6 + N_SIN_WAVES + 5] * angular_v[j] * 0.05
        last = x.shape[0] * 6 + N_SIN_WAVES
        a += weights1[i, last] * goal_x
        a += weights1[i, last + 1] * goal_y
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
def collide(x: ti.template(), v: ti.template(), m: ti.template(), angle: ti.template(),
            angular_v: ti.template(), halfsize: ti.template(), inv_inertia: ti.template(),
            x_inc: ti.template(), v_inc: ti.template(), angle_inc: ti.template(),
            angular_v_inc: ti.template(), dt: float, ground: float, gravity: ti.f64,
            friction: float, elasticity: float):
    for i in range(x.shape[0]):
        x_inc[i] = ti.Vector([0.0, 0.0])
        v_inc[i] = ti.Vector([0.0, 0.0])
        angle_inc[i] = 0.0
        angular_v_inc[i] = 0.0
        fall = ti.cast(ti.cast(dt, ti.f64) * gravity, float)  # rounded once, as Python's
        hs = halfsize[i]
        for k in ti.static(range(4)):
            corner = ti.Vector([k % 2 * 2 - 1, k // 2 % 2 * 2 - 1]) * hs
            corner_x, corner_v, rela = _to_world(x, v, angle, angular_v, i, corner)
            corner_v = corner_v + ti.Vector([0.0, fall])
            rn = rela[0]  # rela x normal (0, 1)
            rt = -rela[1]  # rela x tangent (1, 0)
            contribution = 1.0 / m[i] + rn * rn * inv_inertia[i]
            t_contribution = 1.0 / m[i] + rt * rt * inv_inertia[i]
            new_corner_x = corner_x + dt * corner_v
            impulse = 0.0
            t_impulse = 0.0
            toi = 0.0
            if corner_v[1] < 0 and new_corner_x[1] < ground:
                impulse = -(1 + elasticity) * corner_v[1] / contribution
                if impulse > 0:
                    t_impulse = -corner_v[0] / t_contribution
                    t_impulse = ti.min(friction * impulse, ti.max(-friction * impulse,
                                                                  t_impulse))
                    if corner_x[1] > ground:
                        toi = -(corner_x[1] - ground) / ti.min(corner_v[1], -1e-3)
            _impulse(x, m, inv_inertia, x_inc, v_inc, angle_inc, angular_v_inc, i,
                     ti.Vector([t_impulse, impulse]), new_corner_x, toi, dt)


@ti.kernel
def springs(x: ti.template(), v: ti.template(), m: ti.template(), angle: ti.template(),
            angular_v: ti.template(), inv_inertia: ti.template(), x_inc: ti.template(),
            v_inc: ti.template(), angle_inc: ti.template(), angular_v_inc: ti.template(),
            anchors: ti.template(), offset_a: ti.template(), offset_b: ti.template(),
            rest: ti.template(), joint: ti.template(), stiffness: ti.template(),
            amplitude: ti.template(), act: ti.template(), n_springs: ti.template(),
            dt: float):
    for s in range(n_springs[None]):
        a = anchors[s, 0]
        b = anchors[s, 1]
        pos_a, vel_a, rela_a = _to_world(x, v, angle, angular_v, a, offset_a[s])
        pos_b, vel_b, rela_b = _to_world(x, v, angle, angular_v, b, offset_b[s])
        dist = pos_a - pos_b
        length = dist.norm(TINY) + 1e-4
        target = rest[s] * (1.0 + amplitude[s] * act[s])
        if joint[s] != 0:
            target = 0.0
        impulse = dt * (length - target) * stiffness[s] / length * dist
        if joint[s] != 0:
            rela_v = vel_a - vel_b
            rela_v_norm = rela_v.norm(TINY) + 1e-1
            direction = rela_v / rela_v_norm
            ca = direction[0] * rela_a[1] - direction[1] * rela_a[0]
            cb = direction[0] * rela_b[1] - direction[1] * rela_b[0]
            contribution = 1.0 / m[a] + ca * ca * inv_inertia[a] + 1.0 / m[b] + \
                cb * cb * inv_inertia[b]
            impulse += rela_v_norm / contribution * direction
        _impulse(x, m, inv_inertia, x_inc, v_inc, angle_inc, angular_v_inc, a, -impulse,
                 pos_a, 0.0, dt)
        _impulse(x, m, inv_inertia, x_inc, v_inc, angle_inc, angular_v_inc, b, impulse,
                 pos_b, 0.0, dt)


@ti.kernel
def advance(x: ti.template(), v: ti.template(), angle: ti.template(),
            angular_v: ti.template(), x_inc: ti.template(), v_inc: ti.template(),
            angle_inc: ti.template(), angular_v_inc: ti.template(), dt: float,
            gravity: ti.f64, damping: ti.f64, toi: ti.i32):
    for i in range(x.shape[0]):
        wide_dt = ti.cast(dt, ti.f64)
        s = ti.cast(ti.exp(-wide_dt * damping), float)  # rounded once, as Python's math.exp
        fall = ti.cast(wide_dt * gravity, float)
        v[i] = s * v[i] + v_inc[i] + ti.Vector([0.0, fall])
        angular_v[i] = s * angular_v[i] + angular_v_inc[i]
        if toi != 0:
            x[i] = x[i] + dt * v[i] + x_inc[i]
            angle[i] = angle[i] + dt * angular_v[i] + angle_inc[i]
        else:
            x[i] = x[i] + dt * v[i]
            angle[i] = angle[i] + dt * angular_v[i]


@ti.kernel
def reach(x: ti.template(), L: ti.template(), head: ti.i32, goal_x: float, goal_y: float):
    L[None] += (x[head] - ti.Vector([goal_x, goal_y])).norm()
