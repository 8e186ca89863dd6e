"""The reverse sweep's step as engine launches: one native call per step instead of ~40 NumPy
operations and an FwdMode around the HVP.

The same discrete adjoint as `Trajectory.reverse_step` (sweep.py, which documents it), term
for term: the adjoints live in f64 fields (x, v, the pending dJ/dF, the masses, dt and
damping, one slot per energy parameter bound as a field), the first kick is recomputed in the
state's precision exactly as the step made it, and H lambda comes from the energies'
forward-over-reverse launches that `DirectHVP` resolved. Only the sums over particles (dt,
damping) are accumulated in another order than NumPy's, so gradients equal the NumPy sweep's
to rounding; they are the same bits for the same schedule and thread count.
"""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.lang.api import runtime
from simrun.lang.runtime.chain import Chain
from simrun.stepper import updates
from simrun.stepper.fieldstep import chainable
from simrun.stepper.state import State

DT, DAMPING = 0, 1  # slots of the scalar adjoints


@ti.func
def _signs(sx: ti.template(), sign: ti.template(), box: ti.template(), i, v1, hfp,
           wall: ti.template()):
    """-1 on the components a reflecting wall flipped in the drift x + h v1, else 1 (the
    drift in the state's precision, compared in f64 as the NumPy sweep does)."""
    for c in ti.static(range(sx.n)):
        sign[i][c] = 1.0
        if ti.static(wall == updates.REFLECT):
            xd = ti.cast(sx[i][c] + hfp * v1[c], ti.f64)
            if xd < box[0][c] or xd > box[1][c]:
                sign[i][c] = -1.0


@ti.func
def _kick_adjoint(f: ti.template(), m: ti.template(), av: ti.template(), pend: ti.template(),
                  am: ti.template(), scal: ti.template(), i, vin, vbar, half, hk, g64):
    """v_out = v_in + hk (F/m - damping v_in), hk = half h: F's adjoint into pend, the
    mass, damping and dt adjoints, and v_in's adjoint into av."""
    fi = ti.cast(f[i], ti.f64)
    mi = ti.cast(m[i], ti.f64)
    pend[i] += hk * vbar / mi
    am[i] -= hk * (fi * vbar).sum() / (mi * mi)
    scal[DAMPING] -= hk * (vin * vbar).sum()
    scal[DT] += half * ((fi / mi - g64 * vin) * vbar).sum()
    av[i] = (1.0 - hk * g64) * vbar


@ti.kernel
def second_kick_adjoint(sx: ti.template(), sv: ti.template(), sf: ti.template(),
                        nf: ti.template(), m: ti.template(), av: ti.template(),
                        pend: ti.template(), am: ti.template(), scal: ti.template(),
                        sign: ti.template(), box: ti.template(), hh: float, hfp: float,
                        gamma: float, h: ti.f64, g64: ti.f64, wall: ti.template()):
    """Velocity Verlet: the first kick's v1 as the step made it, the walls' signs, then the
    adjoint of the second kick v' = v1b + h/2 (F'/m - damping v1b), v1b = signs v1."""
    for i in sv:
        v1 = sv[i] + hh * (sf[i] / m[i] - gamma * sv[i])
        _signs(sx, sign, box, i, v1, hfp, wall)
        vin = sign[i] * ti.cast(v1, ti.f64)
        _kick_adjoint(nf, m, av, pend, am, scal, i, vin, av[i], 0.5, 0.5 * h, g64)


@ti.kernel
def first_kick_adjoint(sx: ti.template(), sv: ti.template(), sf: ti.template(),
                       m: ti.template(), av: ti.template(), ax: ti.template(),
                       pend: ti.template(), am: ti.template(), scal: ti.template(),
                       sign: ti.template(), box: ti.template(), hh: float, hfp: float,
                       gamma: float, h: ti.f64, half: ti.f64, g64: ti.f64,
                       verlet: ti.template(), wall: ti.template()):
    """The drift x' = x + h v1 through the walls, then the first kick's adjoint."""
    for i in sv:
        v1 = sv[i] + hh * (sf[i] / m[i] - gamma * sv[i])
        if ti.static(not verlet):
            _signs(sx, sign, box, i, v1, hfp, wall)
        xbar = sign[i] * ax[i]
        vbar1 = sign[i] * av[i] + h * xbar
        scal[DT] += (ti.cast(v1, ti.f64) * xbar).sum()
        _kick_adjoint(sf, m, av, pend, am, scal, i, ti.cast(sv[i], ti.f64), vbar1, half,
                      half * h, g64)
        ax[i] = xbar


@ti.kernel
def seed_tangent(xdual: ti.template(), pend: ti.template(), fp: ti.template()):
    """x.dual = lambda (the pending dJ/dF) in the state's precision."""
    for i in pend:
        xdual[i] = ti.cast(pend[i], fp)


@ti.kernel
def collect(ax: ti.template(), am: ti.template(), pend: ti.template(), hlam: ti.template(),
            mixed_m: ti.template()):
    """adj.x -= H lambda, adj.mass -= d(dU/dx . lambda)/dm, then lambda is spent."""
    for i in ax:
        ax[i] -= ti.cast(hlam[i], ti.f64)
        am[i] -= ti.cast(mixed_m[i], ti.f64)
        for c in ti.static(range(pend.n)):
            pend[i][c] = 0.0


@ti.kernel
def collect_param(ap: ti.template(), j: ti.i32, mixed: ti.template()):
    ap[j] -= ti.cast(mixed[None], ti.f64)


@ti.kernel
def adjoint_watch(ax: ti.template(), av: ti.template(), bad: ti.template()):
    for i in ax:
        for c in ti.static(range(ax.n)):
            if ax[i][c] - ax[i][c] != 0 or av[i][c] - av[i][c] != 0:
                bad[None] = 1


class NativeReverse:
    """The adjoint state in fields and the reverse step as one chain of launches."""

    def __init__(self, traj, hvp) -> None:
        model, scene = traj.model, traj.scene
        system = model.system
        n, dim, fp = scene.particles.count, scene.particles.dim, system.fp
        self.system, self.traj = system, traj
        vec = ti.Vector.field
        self.sx, self.sv, self.sf, self.nf = (vec(dim, fp, shape=n) for _ in range(4))
        self.ax, self.av, self.pend, self.sign = (vec(dim, ti.f64, shape=n) for _ in range(4))
        self.am = ti.field(ti.f64, shape=n)
        self.scal = ti.field(ti.f64, shape=2)
        self.params = list(model.param_fields)
        self.ap = ti.field(ti.f64, shape=max(len(self.params), 1))
        self.box = vec(dim, ti.f64, shape=2)
        self.bad = ti.field(ti.i32, shape=())
        wall = updates.WALLS[scene.boundary.type]
        if wall == updates.REFLECT:
            self.box.from_numpy(np.array([scene.boundary.low, scene.boundary.high], float))
        verlet = scene.integrator.type == "velocity_verlet"
        half, h, g = (0.5 if verlet else 1.0), scene.dt, scene.integrator.damping
        state = (self.sx, self.sv, self.sf)
        adj = (self.av, self.pend, self.am, self.scal, self.sign, self.box)
        launches = []
        with updates.ieee():
            if verlet:
                launches.append((second_kick_adjoint, (*state, self.nf, system.m, *adj,
                                                       half * h, h, g, h, g, wall)))
            launches += [(updates.zero, (f,)) for f in hvp.zero_fields]
            launches += [(seed_tangent, (system.x.dual, self.pend, fp)),
                         (updates.reset_loss, (system.U,))]
            hvp_launches = [(grad, flat) for _, _, grad, flat in reversed(hvp.calls)]
            after = [(collect, (self.ax, self.am, self.pend, system.x.grad.dual,
                                system.m.grad.dual))]
            after += [(collect_param, (self.ap, j, model.param_fields[k].grad.dual))
                      for j, k in enumerate(self.params)]
            after += [(first_kick_adjoint, (*state, system.m, self.av, self.ax, self.pend,
                                            self.am, self.scal, self.sign, self.box,
                                            half * h, h, g, h, half, g, verlet, wall)),
                      (adjoint_watch, (self.ax, self.av, self.bad))]
            resolved = [chainable(k, a) for k, a in launches] + hvp_launches + \
                [chainable(k, a) for k, a in after]
        self.launches = resolved  # the reverse step's launches (adjoint/program.py chains them)
        self.chain = Chain(runtime(), resolved) if all(resolved) else None
        self.hvp = hvp

    def push(self, adj) -> None:
        """An Adjoint (NumPy) into the fields."""
        self.ax.from_numpy(adj.x)
        self.av.from_numpy(adj.v)
        self.pend.from_numpy(adj.pending)
        self.am.from_numpy(adj.mass)
        self.scal.from_numpy(np.array([adj.dt, adj.damping]))
        self.ap.from_numpy(np.array([adj.params.get(k, 0.0) for k in self.params] or [0.0]))

    def pull(self, adj) -> None:
        """The fields into an Adjoint (parameter adjoints added to what push saw)."""
        adj.x, adj.v, adj.pending = (f.to_numpy() for f in (self.ax, self.av, self.pend))
        adj.mass = self.am.to_numpy()
        adj.dt, adj.damping = (float(s) for s in self.scal.to_numpy())
        ap = self.ap.to_numpy()
        for j, key in enumerate(self.params):
            adj.params[key] = float(ap[j])

    def step(self, state: State, nxt: State) -> bool:
        """One reverse step on the fields; False when an adjoint became NaN or Inf."""
        self.sx.from_numpy(state.x)
        self.sv.from_numpy(state.v)
        self.sf.from_numpy(state.f)
        self.nf.from_numpy(nxt.f)
        self.system.x.from_numpy(nxt.x)
        self.system.refresh_neighbors()  # any valid list gives the same terms in one order
        self.hvp.set_field_args()
        self.bad.data[()] = 0
        self.chain.run(1)
        return not self.bad.data[()]
