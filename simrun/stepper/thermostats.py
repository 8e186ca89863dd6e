"""NVT integrators: Langevin (BAOAB), Nosé-Hoover chain, and velocity rescaling.

Per-particle work runs as simrun.lang kernels on the ``x`` and ``v`` fields; forces are the
autodiff ones (``System.forces``), copied into a field each step. What is a handful of numbers
per step (the chain's variables, the kinetic energy that drives them) stays in float64 NumPy,
where its sums are deterministic (a parallel float reduction is not, and the chain would then
differ from run to run).

- ``langevin``: BAOAB splitting (Leimkuhler & Matthews 2013): kick dt/2, drift dt/2, exact
  Ornstein-Uhlenbeck step v = c v + sqrt((1 - c^2) kT/m) xi with c = exp(-friction dt), drift
  dt/2, new forces, kick dt/2. Its configurational sampling is exact for a harmonic
  oscillator at any stable dt, which the tests use.
- ``nose_hoover``: velocity Verlet inside two half-steps of a Nosé-Hoover chain (Martyna,
  Klein & Tuckerman 1992; the Trotter splitting of Martyna et al. 1996). Masses Q1 = dof kT
  tau^2, Qj = kT tau^2. thermo.csv's ``conserved`` column is the extended energy
  K + U + sum Qj vj^2 / 2 + dof kT xi1 + kT sum_{j>1} xij, which the dynamics keeps constant.
- ``rescale``: velocity Verlet, and every ``every`` steps all velocities scaled so that the
  kinetic temperature is exactly the target: for equilibration, not for sampling.

The Langevin noise is counter-based (Philox-2x32-10 of (particle, step) under the seed), so it
does not depend on the number of threads and a resumed run draws the same numbers: there is no
generator state to save. The counter holds the step in 32 bits (runs of up to 2^32 steps), the
key the seed modulo 2^32.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import simrun.lang as ti
from simrun.lang.autodiff.tape import recording
from simrun.scene.schema import Scene
from simrun.stepper.integrators import State, apply_boundary, kinetic_energy
from simrun.stepper.system import System

PHILOX_M, PHILOX_W = 0xD256D193, 0x9E3779B9  # Random123's Philox-2x32 constants
TWO_PI = 2.0 * math.pi


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
def baoa(x: ti.template(), v: ti.template(), m: ti.template(), f: ti.template(),
         dim: ti.template(), dt: ti.f64, c1: ti.f64, kT: ti.f64, key: ti.u32, step: ti.u32):
    """BAOAB's first four parts: kick dt/2, drift dt/2, Ornstein-Uhlenbeck, drift dt/2."""
    for i in x:
        vi = v[i] + (0.5 * dt / m[i]) * f[i]
        xi = x[i] + (0.5 * dt) * vi
        sigma = ti.sqrt((1.0 - c1 * c1) * kT / m[i])
        vi = c1 * vi + sigma * gaussian_vector(i, step, key, dim)
        x[i] = xi + (0.5 * dt) * vi
        v[i] = vi


@ti.kernel
def scale_kick_drift(x: ti.template(), v: ti.template(), m: ti.template(), f: ti.template(),
                     scale: ti.f64, dt: ti.f64):
    """v = scale v + dt/2 F/m; x += dt v (velocity Verlet's first half after a thermostat)."""
    for i in x:
        vi = scale * v[i] + (0.5 * dt / m[i]) * f[i]
        x[i] = x[i] + dt * vi
        v[i] = vi


@ti.kernel
def kick_scale(v: ti.template(), m: ti.template(), f: ti.template(), dt: ti.f64,
               scale: ti.f64):
    """v = (v + dt/2 F/m) * scale: velocity Verlet's last kick, then a thermostat's scaling."""
    for i in v:
        v[i] = (v[i] + (0.5 * dt / m[i]) * f[i]) * scale


class NoseHooverChain:
    """The chain's positions ``xi`` and velocities ``vxi`` (float64), and its half-step."""

    def __init__(self, length: int, kT: float, tau: float, dof: int) -> None:
        self.kT, self.dof = kT, dof
        self.q = np.full(length, kT * tau * tau)
        self.q[0] *= dof
        self.xi = np.zeros(length)
        self.vxi = np.zeros(length)

    def _force(self, j: int, kinetic: float) -> float:
        if j == 0:
            return (2.0 * kinetic - self.dof * self.kT) / self.q[0]
        return (self.q[j - 1] * self.vxi[j - 1] ** 2 - self.kT) / self.q[j]

    def _update(self, j: int, kinetic: float, dt: float) -> None:
        """vxi_j over dt/4, damped by the next thermostat (exp(-dt/8 v_{j+1}) either side)."""
        last = j == len(self.vxi) - 1
        damp = 1.0 if last else math.exp(-0.125 * dt * self.vxi[j + 1])
        self.vxi[j] = (self.vxi[j] * damp + 0.25 * dt * self._force(j, kinetic)) * damp

    def half_step(self, kinetic: float, dt: float) -> float:
        """Advance the chain by dt/2 given the particles' kinetic energy; returns the factor
        by which the particles' velocities are to be scaled."""
        for j in reversed(range(len(self.vxi))):
            self._update(j, kinetic, dt)
        scale = math.exp(-0.5 * dt * self.vxi[0])
        kinetic *= scale * scale
        self.xi += 0.5 * dt * self.vxi
        for j in range(len(self.vxi)):
            self._update(j, kinetic, dt)
        return scale

    def energy(self) -> float:
        """The chain's share of the conserved extended energy."""
        return float(0.5 * np.sum(self.q * self.vxi ** 2) + self.dof * self.kT * self.xi[0]
                     + self.kT * np.sum(self.xi[1:]))


class Launch:
    """A kernel's compiled variant for fixed field arguments, launched with new scalars.

    Why: ``Kernel.__call__`` re-derives the variant from every argument and, as these kernels
    write ``x`` (which has a gradient), snapshots it for a backward pass that never comes;
    that cost three times the step of a small system. The same compiled code runs with the
    same arguments, so the bits are the call's. Under an active Tape the call is used.
    """

    def __init__(self, kernel, fields: tuple, scalars: tuple) -> None:
        self.kernel, self.fields = kernel, fields
        self.compiled, flat, arrays = kernel.prepare((*fields, *scalars), "primal")
        assert not arrays and len(flat) == len(scalars), "fields first, then scalars only"

    def __call__(self, *scalars: float) -> None:
        if recording():
            self.kernel(*self.fields, *scalars)
            return
        self.kernel.last_launch = None  # nothing of an earlier call to differentiate
        self.compiled.launch(list(scalars))


class ThermostatStep:
    """One NVT step on a System; ``dof`` is the temperature's degrees of freedom.

    Between steps the fields ``x``, ``v`` and the force field hold the state (the numpy
    arrays of ``State`` are copies for the loop): the first call loads them from the state,
    later ones take them as their last call left them."""

    extra_columns: tuple[str, ...] = ()

    def __init__(self, scene: Scene, system: System, dof: int) -> None:
        self.scene, self.system, self.dof = scene, system, dof
        p, integ = scene.particles, scene.integrator
        self.kT = float(integ.temperature or 0.0)
        self.f = ti.Vector.field(p.dim, dtype=system.fp, shape=p.count)
        self.masses = system.masses
        s, f = system, self.f
        self.scale_kick_drift = Launch(scale_kick_drift, (s.x, s.v, s.m, f), (1.0, 1.0))
        self.kick_scale = Launch(kick_scale, (s.v, s.m, f), (1.0, 1.0))
        self.loaded = False

    def __call__(self, state: State) -> None:
        raise NotImplementedError

    # --- the moves shared by the thermostats ---------------------------------------------
    def _load(self, state: State) -> None:
        if not self.loaded:
            self.system.set_state(state.x, state.v)
            self.f.from_numpy(state.f)
            self.loaded = True

    def _new_forces(self, state: State) -> None:
        """Read x back (and v, at walls), apply the boundary, compute the forces at x."""
        s = self.system
        state.x = s.x.to_numpy()
        if self.scene.boundary.type != "none":
            state.v = s.v.to_numpy()
            apply_boundary(self.scene.boundary, state.x, state.v)
            s.set_state(state.x, state.v)
        state.potential, state.f = s.forces()
        self.f.from_numpy(state.f)

    def _kick(self, state: State, scale: float = 1.0) -> None:
        """Velocity Verlet's last kick, then v scaled; the state's v read back."""
        self.kick_scale(self.scene.dt, scale)
        state.v = self.system.v.to_numpy()

    def _scale(self, state: State, scale: float) -> None:
        self.kick_scale(0.0, scale)
        state.v = self.system.v.to_numpy()

    def _verlet(self, state: State, scale_before: float = 1.0) -> None:
        """Velocity Verlet up to the last kick; ``scale_before`` multiplies v first."""
        self._load(state)
        self.scale_kick_drift(scale_before, self.scene.dt)
        self._new_forces(state)

    def kinetic(self, v: np.ndarray) -> float:
        return kinetic_energy(v, self.masses)

    def saved(self) -> dict[str, np.ndarray]:
        """Arrays to save with each frame, so that --resume continues bit for bit."""
        return {}

    def restore(self, checkpoint: dict[str, np.ndarray]) -> None:
        """Take back what ``saved`` returned (a resumed run)."""

    def extra_thermo(self, kinetic: float, potential: float) -> tuple[float, ...]:
        """Values of ``extra_columns`` for a thermo row."""
        return ()


class Langevin(ThermostatStep):
    """BAOAB; the noise's key is ``integrator.seed`` (default: the scene's seed)."""

    def __init__(self, scene: Scene, system: System, dof: int) -> None:
        super().__init__(scene, system, dof)
        integ = scene.integrator
        self.c1 = math.exp(-float(integ.friction) * scene.dt)
        seed = integ.seed if integ.seed is not None else scene.seed
        self.key = seed % 2**32
        s = system
        self.baoa = Launch(baoa, (s.x, s.v, s.m, self.f, scene.particles.dim),
                           (scene.dt, self.c1, self.kT, self.key, 0))

    def __call__(self, state: State) -> None:
        self._load(state)
        self.baoa(self.scene.dt, self.c1, self.kT, self.key, state.step % 2**32)
        self._new_forces(state)
        self._kick(state)


class NoseHoover(ThermostatStep):
    """Chain half-step, velocity Verlet, chain half-step."""

    extra_columns = ("conserved",)

    def __init__(self, scene: Scene, system: System, dof: int) -> None:
        super().__init__(scene, system, dof)
        integ = scene.integrator
        self.chain = NoseHooverChain(int(integ.chain or 1), self.kT, float(integ.tau), dof)

    def __call__(self, state: State) -> None:
        dt = self.scene.dt
        self._verlet(state, self.chain.half_step(self.kinetic(state.v), dt))
        self._kick(state)
        self._scale(state, self.chain.half_step(self.kinetic(state.v), dt))

    def saved(self) -> dict[str, np.ndarray]:
        return {"thermostat:xi": self.chain.xi.copy(), "thermostat:vxi": self.chain.vxi.copy()}

    def restore(self, checkpoint: dict[str, np.ndarray]) -> None:
        if "thermostat:xi" in checkpoint:
            self.chain.xi = np.array(checkpoint["thermostat:xi"], dtype=np.float64)
            self.chain.vxi = np.array(checkpoint["thermostat:vxi"], dtype=np.float64)

    def extra_thermo(self, kinetic: float, potential: float) -> tuple[float, ...]:
        return (kinetic + potential + self.chain.energy(),)


class Rescale(ThermostatStep):
    """Velocity Verlet; every ``every`` steps, v scaled to the target temperature exactly."""

    def __call__(self, state: State) -> None:
        self._verlet(state)
        self._kick(state)
        if (state.step + 1) % int(self.scene.integrator.every) == 0:
            kinetic = self.kinetic(state.v)
            if kinetic > 0:
                self._scale(state, math.sqrt(0.5 * self.dof * self.kT / kinetic))


THERMOSTAT_STEPS: dict[str, type[ThermostatStep]] = {
    "langevin": Langevin, "nose_hoover": NoseHoover, "rescale": Rescale}


def make_thermostat(scene: Scene, system: System, dof: int,
                    checkpoint: dict[str, Any] | None = None) -> ThermostatStep:
    """The step function of the scene's thermostat, restored from ``checkpoint`` if any."""
    step = THERMOSTAT_STEPS[scene.integrator.type](scene, system, dof)
    if checkpoint is not None:
        step.restore(checkpoint)
    return step
