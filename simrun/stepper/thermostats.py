"""NVT thermostats as update kernels: Langevin (BAOAB), Nosé-Hoover chain, velocity
rescaling and Bussi's stochastic velocity rescaling (CSVR).

Each thermostat is simrun.lang kernels on the system's fields, run inside the same chained
step as the integrators (`plan.py` puts them there; `fieldstep.FieldStepper` runs them), so a
step is one native call and `simrun grad` differentiates them as it differentiates any update
kernel: the engine reverses them (no hand-written adjoint). The force is ``-x.grad``, as the
integrators read it. What a step carries beyond x and v lives in fields the system keeps in
``System.extra`` (saved with each frame, so a resumed run continues bit for bit):
``nvt_clock`` (the step index, which the noise is drawn at), ``nvt_dof`` (the temperature's
degrees of freedom, decided at step 0) and the chain's ``nvt_xi`` / ``nvt_vxi``.

- ``langevin``: BAOAB splitting (Leimkuhler & Matthews 2013): kick dt/2, drift dt/2, exact
  Ornstein-Uhlenbeck step v = c v + sqrt((1 - c^2) kT/m) xi with c = exp(-friction dt), drift
  dt/2, walls, new forces, kick dt/2. Its configurational sampling is exact for a harmonic
  oscillator at any stable dt, which the tests use.
- ``nose_hoover``: velocity Verlet inside two half-steps of a Nosé-Hoover chain (Martyna,
  Klein & Tuckerman 1992; the Trotter splitting of Martyna et al. 1996). Masses Q1 = dof kT
  tau^2, Qj = kT tau^2. thermo.csv's ``conserved`` column is the extended energy
  K + U + sum Qj vj^2 / 2 + dof kT xi1 + kT sum_{j>1} xij, which the dynamics keeps constant.
- ``rescale``: velocity Verlet, and every ``every`` steps all velocities scaled so that the
  kinetic temperature is exactly the target: for equilibration, not for sampling.
- ``csvr``: velocity Verlet, then the kinetic energy resampled by Bussi, Donadio & Parrinello
  (2007): K' = K + (1 - c)(K_t (R1^2 + S) / dof - K) + 2 R1 sqrt(c (1 - c) K K_t / dof), c =
  exp(-dt / tau), R1 normal and S a sum of dof - 1 squared normals (drawn as one chi-square
  variate, Bussi's ``sumnoises``); v scaled by sqrt(K'/K).
  It samples the canonical ensemble; a system at rest (K = 0) stays at rest.

The noise is counter-based (Philox-2x32-10 of (particle or draw, step) under the seed), so it
does not depend on the number of threads, a resumed run draws the same numbers, and the
reverse sweep replays the very numbers the forward drew: the pathwise derivative. The
counter holds the step in 32 bits (runs of up to 2^32 steps), the key the seed modulo 2^32.
Sums over particles (the kinetic energy the chain and the rescalings read) run serially in a
fixed order, so they are the same bits at any thread count.
"""

from __future__ import annotations

import math

import numpy as np

import simrun.lang as ti
from simrun.scene.schema import Scene
from simrun.stepper.updates import _wall

PHILOX_M, PHILOX_W = 0xD256D193, 0x9E3779B9  # Random123's Philox-2x32 constants
TWO_PI = 2.0 * math.pi
CSVR_STREAM = 0x5EED5EED  # CSVR's draws: another key than Langevin's, under the same seed
FIELDS = ("nvt_clock", "nvt_dof", "nvt_xi", "nvt_vxi")  # what thermostat_fields may add


@ti.func
def philox2x32(c0, c1, key):
    """Philox-2x32-10: two u32 counters and a u32 key to two random u32 words."""
    for _ in ti.static(range(10)):
        prod = ti.cast(c0, ti.u64) * ti.u64(PHILOX_M)
        hi = ti.cast(prod >> ti.u64(32), ti.u32)
        lo = ti.cast(prod & ti.u64(0xFFFFFFFF), ti.u32)
        c0, c1 = hi ^ key ^ c1, lo
        key = key + ti.u32(PHILOX_W)
    return ti.Vector([c0, c1], dt=ti.u32)


@ti.func
def gaussian_pair(counter, step, key):
    """Two independent standard normal numbers (Box-Muller on Philox words), in float64."""
    words = philox2x32(counter, step, key)
    u1 = (ti.cast(words[0], ti.f64) + 0.5) * (1.0 / 4294967296.0)  # in (0, 1): log is finite
    u2 = (ti.cast(words[1], ti.f64) + 0.5) * (1.0 / 4294967296.0)
    r = ti.sqrt(-2.0 * ti.log(u1))
    return ti.Vector([r * ti.cos(TWO_PI * u2), r * ti.sin(TWO_PI * u2)], dt=ti.f64)


@ti.func
def gaussian_vector(i, step, key, dim: ti.template()):
    """``dim`` (2 or 3) standard normals for particle ``i`` at ``step``."""
    first = gaussian_pair(ti.cast(2 * i, ti.u32), step, key)
    if ti.static(dim == 2):
        return first
    second = gaussian_pair(ti.cast(2 * i + 1, ti.u32), step, key)
    return ti.Vector([first[0], first[1], second[0]], dt=ti.f64)


@ti.kernel
def baoa(x: ti.template(), v: ti.template(), m: ti.template(), box: ti.template(),
         clock: ti.template(), dt: float, friction: float, kT: float, key: ti.u32,
         wall: ti.template()):
    """BAOAB's first four parts: kick dt/2, drift dt/2, Ornstein-Uhlenbeck, drift dt/2; then
    the walls. The noise is drawn at the step ``clock`` holds."""
    for i in x:  # c1 and the step per particle: one loop, so the reverse rebuilds it alone
        c1 = ti.exp(-friction * dt)
        step = ti.cast(clock[None], ti.u32)
        vi = v[i] + (0.5 * dt / m[i]) * (-x.grad[i])
        xi = x[i] + (0.5 * dt) * vi
        sigma = ti.sqrt((1.0 - c1 * c1) * kT / m[i])
        vi = c1 * vi + sigma * gaussian_vector(i, step, key, x.n)
        x[i] = xi + (0.5 * dt) * vi
        v[i] = vi
        _wall(x, v, box, i, wall)


@ti.kernel
def kinetic(v: ti.template(), m: ti.template(), K: ti.template()):
    """K += sum m |v|^2 / 2 in float64 (K zeroed by the launch before), summed in particle
    order: the same bits at any thread count."""
    ti.loop_config(serialize=True)
    for i in v:
        K[None] += 0.5 * ti.cast(m[i], ti.f64) * ti.cast(v[i].dot(v[i]), ti.f64)


@ti.kernel
def scale_velocities(v: ti.template(), scale: ti.template()):
    for i in v:
        v[i] = v[i] * scale[None]


@ti.kernel
def tick(clock: ti.template()):
    """The step is done: the clock the noise is drawn at moves on."""
    clock[None] += 1


@ti.kernel
def chain_half(K: ti.template(), xi: ti.template(), vxi: ti.template(),
               scale: ti.template(), dof_field: ti.template(), dt: float, kT: float,
               tau: float, length: ti.template()):
    """Advance the Nosé-Hoover chain by dt/2 given the kinetic energy K; ``scale`` gets the
    factor the velocities are to be scaled by. Each chain velocity moves by dt/4, damped by
    the next one (exp(-dt/8 v_{j+1}) either side), from the last to the first, then back."""
    dof = ti.cast(dof_field[None], ti.f64)
    q = ti.Vector.zero(ti.f64, length)
    for j in ti.static(range(length)):
        q[j] = kT * tau * tau
    q[0] = dof * kT * tau * tau
    vs = ti.Vector.zero(ti.f64, length)
    for j in ti.static(range(length)):
        vs[j] = vxi[j]
    kin = K[None]
    for j in ti.static(range(length - 1, -1, -1)):
        vs[j] = _chain_update(vs, q, j, length, kin, dof, kT, dt)
    s = ti.exp(-0.5 * dt * vs[0])
    kin = kin * s * s
    for j in ti.static(range(length)):
        xi[j] = xi[j] + 0.5 * dt * vs[j]
    for j in ti.static(range(length)):
        vs[j] = _chain_update(vs, q, j, length, kin, dof, kT, dt)
    for j in ti.static(range(length)):
        vxi[j] = vs[j]
    scale[None] = s


@ti.func
def _chain_update(vs, q, j: ti.template(), length: ti.template(), kin, dof, kT, dt):
    force = 0.0
    if ti.static(j == 0):
        force = (2.0 * kin - dof * kT) / q[0]
    else:
        force = (q[j - 1] * vs[j - 1] * vs[j - 1] - kT) / q[j]
    damp = 1.0
    if ti.static(j < length - 1):
        damp = ti.exp(-0.125 * dt * vs[j + 1])
    return (vs[j] * damp + 0.25 * dt * force) * damp


@ti.kernel
def rescale_factor(K: ti.template(), scale: ti.template(), clock: ti.template(),
                   dof_field: ti.template(), kT: float, every: ti.i64):
    """scale = sqrt(dof kT / 2K) at the end of every ``every``-th step, else 1."""
    s = 1.0
    if (clock[None] + 1) % every == 0 and K[None] > 0:
        s = ti.sqrt(0.5 * ti.cast(dof_field[None], ti.f64) * kT / K[None])
    scale[None] = s


@ti.func
def uniform_open(counter, step, key):
    """A uniform number in (0, 1) (never 0: its log is finite), in float64."""
    return (ti.cast(philox2x32(counter, step, key)[0], ti.f64) + 0.5) * (1.0 / 4294967296.0)


@ti.func
def chi_square_draw(n, step, key):
    """A chi-square variate with ``n`` degrees of freedom (the sum of n squared standard
    normals), drawn at ``step`` from counters 1, 2, ...: 2 Gamma(n / 2) by Marsaglia &
    Tsang's exact rejection (attempt t: a normal from counter 2t + 1, a uniform from 2t + 2;
    it accepts 95% (n = 2) to ~100%), one squared normal for n = 1 (Bussi's ``sumnoises``)."""
    out = ti.f64(0.0)
    if n == 1:
        z = gaussian_pair(ti.u32(1), step, key)[0]
        out = z * z
    elif n >= 2:
        d = 0.5 * ti.cast(n, ti.f64) - 1.0 / 3.0
        c = 1.0 / ti.sqrt(9.0 * d)
        t, accepted = 0, 0
        while accepted == 0:
            x = gaussian_pair(ti.cast(2 * t + 1, ti.u32), step, key)[0]
            u = uniform_open(ti.cast(2 * t + 2, ti.u32), step, key)
            v = 1.0 + c * x
            if v > 0.0:
                v = v * v * v
                if ti.log(u) < 0.5 * x * x + d - d * v + d * ti.log(v):
                    out, accepted = 2.0 * d * v, 1
            t += 1
    return out


@ti.kernel
def chi_square(S: ti.template(), clock: ti.template(), dof_field: ti.template(), key: ti.u32):
    """S += CSVR's sum of dof - 1 squared standard normals, drawn at this step as one
    chi-square variate (S zeroed by the launch before): a few draws, not dof - 1."""
    S[None] += chi_square_draw(dof_field[None] - 1, ti.cast(clock[None], ti.u32), key)


@ti.kernel
def csvr_factor(K: ti.template(), S: ti.template(), scale: ti.template(),
                clock: ti.template(), dof_field: ti.template(), dt: float, kT: float,
                tau: float, key: ti.u32):
    """Bussi's resampled kinetic energy K' and scale = sqrt(K'/K) (1 at K = 0)."""
    dof = ti.cast(dof_field[None], ti.f64)
    r1 = gaussian_pair(ti.u32(0), ti.cast(clock[None], ti.u32), key)[0]
    c = ti.exp(-dt / tau)
    target = 0.5 * dof * kT
    kin = K[None]
    s = 1.0
    if kin > 0:
        new = kin + (1.0 - c) * (target * (S[None] + r1 * r1) / dof - kin) + \
            2.0 * r1 * ti.sqrt(kin * target / dof * (1.0 - c) * c)
        s = ti.sqrt(new / kin)
    scale[None] = s


# ---------------------------------------------------------------------- carried fields
def thermostat_fields(scene: Scene) -> dict:
    """The fields a thermostat's step carries (see the module docstring); {} for NVE."""
    integ = scene.integrator
    if not integ.thermostat:
        return {}
    fields = {"nvt_clock": ti.field(ti.i64, shape=()), "nvt_dof": ti.field(ti.i32, shape=())}
    fields["nvt_dof"][None] = scene.particles.count * scene.particles.dim
    if integ.type == "nose_hoover":
        fields["nvt_xi"] = ti.field(ti.f64, shape=int(integ.chain or 1))
        fields["nvt_vxi"] = ti.field(ti.f64, shape=int(integ.chain or 1))
    return fields


def controller_conflict(scene: Scene) -> str | None:
    """Why the scene cannot run (a controller beside a thermostat), or None."""
    if scene.integrator.thermostat and scene.controller is not None \
            and scene.step_kernels is None:
        return (f"{scene.source}: a 'controller' runs with the integrators symplectic_euler "
                "and velocity_verlet or with step_kernels, not with the "
                f"'{scene.integrator.type}' thermostat. Choose one.")
    return None


def noise_key(scene: Scene) -> int:
    """The noise's key: ``integrator.seed`` (default: the scene's seed) modulo 2^32."""
    seed = scene.integrator.seed if scene.integrator.seed is not None else scene.seed
    return seed % 2**32


def chain_energy(scene: Scene, extra: dict) -> float:
    """The Nosé-Hoover chain's share of the conserved extended energy."""
    kT, tau = scene.kT, float(scene.integrator.tau)
    dof = int(extra["nvt_dof"].to_numpy())
    xi, vxi = extra["nvt_xi"].to_numpy(), extra["nvt_vxi"].to_numpy()
    q = np.full(len(xi), kT * tau * tau)
    q[0] *= dof
    return float(0.5 * np.sum(q * vxi ** 2) + dof * kT * xi[0] + kT * np.sum(xi[1:]))
