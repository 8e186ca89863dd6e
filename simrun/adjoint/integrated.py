"""Trajectory gradients of scenes with a `controller` that integrate with `integrator:
symplectic_euler | velocity_verlet` (a thrust, a feedback law: kernels run each step before
the forces).

The integrator's updates are already simrun.lang kernels (`stepper/updates.py`), so such a
scene is differentiated by the step-kernel machinery (`ControlledTrajectory`), with those
update kernels as its step kernels: the controller, the energies and the integrator go
through one chain of differentiated launches, and fields the controller reads and writes are
part of the state. A step, as `simrun run` makes it (stepper/fieldstep.py):

    controller(k); G1 = dU/dx at x_k; kick_drift(G1)            (symplectic Euler: h = dt)
    ... velocity Verlet also: G2 = dU/dx at x_(k+1); kick(G2)    (h = dt / 2 in both)

with the same kernels compiled the same way (IEEE, no contraction) on the same values, so the
differentiated trajectory is `run`'s bit for bit. Each update kernel reads its G from a field
of its own (`Kernel.with_grad_reads`), and `dt` / `integrator.damping`, when differentiated,
from 0-D fields (`Kernel.with_field_args`; h = dt/2 carries the factor). Reverse, velocity
Verlet's step is two Tapes: the kick (G2's adjoint goes through the forces at x_(k+1) by one
forward-over-reverse pass), then kick_drift (G1's at x_k), then the controller
(controlled.py). Walls are inside kick_drift, so the Tape differentiates the bounce.

The forward steps (the schedule's advances) are `run`'s own stepper, one native call a step;
each reverse step is one native call too (integrated_native.py), or the Tape replay below
where a launch cannot be chained or the objective reads the potential.
"""

from __future__ import annotations

import numpy as np

from simrun.adjoint.controlled import ControlledTrajectory
from simrun.adjoint.integrated_native import IntegratedNative
from simrun.adjoint.kernel_sweep import KernelAdjoint, KernelState
from simrun.adjoint.sweep import Tangent
from simrun.stepper import updates
from simrun.stepper.binding import BoundKernel
from simrun.stepper.state import State


class IntegratedTrajectory(ControlledTrajectory):
    """ControlledTrajectory whose step kernels are the integrator's update kernels."""

    native_class = IntegratedNative

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        scene, system = self.scene, self.system
        verlet = scene.integrator.type == "velocity_verlet"
        dt, damping = scene.dt, scene.integrator.damping
        self.half = 0.5 if verlet else 1.0
        box = self.model.stepper.box  # the bounds `run`'s stepper gives kick_drift
        wall = updates.WALLS[scene.boundary.type]
        x, v, m = system.x, system.v, system.m
        self.scalars: list = []  # (KEY, 0-D field, d value / d KEY) read by the updates
        # differentiated, the damping term stays in at damping 0 (its derivative is there):
        # acc - 0 * v is acc, up to the sign of a zero acceleration
        damped = damping != 0 or "integrator.damping" in self.step_keys
        first = (x, v, m, box, self.half * dt, dt, damping, wall, damped)
        self.first = self._update(updates.kick_drift, first, ["h", "dt"], self.G)
        self.G2 = self.ti.Vector.field(scene.particles.dim, dtype=system.fp,
                                       shape=scene.particles.count, needs_grad=True,
                                       needs_dual=True)  # G at x_(k+1), the second kick's
        self.second = self._update(updates.kick, (x, v, m, 0.5 * dt, damping, damped),
                                   ["h"], self.G2) if verlet else None
        self.twins = [t for t in (self.first, self.second) if t is not None]  # reuse.py's

    def _update(self, kernel, args: tuple, dt_names: list[str], g) -> BoundKernel:
        """The update kernel reading the field `g` for x.grad, and the differentiated scalars
        from 0-D fields: (KEY, field, d value / d KEY) of each in `self.scalars`."""
        twin = kernel.with_grad_reads({"x": g})
        wanted = []
        if "dt" in self.step_keys:
            wanted += dt_names
        if "integrator.damping" in self.step_keys:
            wanted.append("damping")
        if wanted:
            twin = twin.with_field_args(wanted)
        for name, f in twin.field_args.items():
            key = "integrator.damping" if name == "damping" else "dt"
            factor = 1.0 if name in ("dt", "damping") else \
                (self.half if kernel is updates.kick_drift else 0.5)  # h = factor * dt
            self.scalars.append((key, f, factor))
        return BoundKernel(None, twin, args)


    @staticmethod
    def _launch(bound: BoundKernel) -> None:
        with updates.ieee():  # compiled as `run`'s stepper compiles them
            bound()

    # ------------------------------------------------------------------ forward
    def advance(self, state: KernelState, k: int) -> KernelState:
        """Step k by `run`'s own stepper (one chained native call where `run` makes one)."""
        stepper, system = self.model.stepper, self.system
        for n, f in system.extra.items():
            f.from_numpy(state.fields[n])
        stepper.load(State(k, state.x, state.v, state.f, state.potential))
        stepper.advance(1)  # a NaN shows in the next reverse step's finite check
        nxt = State(k + 1, state.x, state.v, state.f, state.potential)
        stepper.store(nxt)
        return KernelState(k + 1, nxt.x, nxt.v, nxt.f, nxt.potential, self._fields())

    def advance_launches(self, state: KernelState, k: int) -> KernelState:
        """Step k by the launches `reverse_step` replays (the update kernels' twins): the
        same bits as `advance` (a test holds them to it)."""
        system = self.system
        self._load(state)
        self._before_kernels(k)  # controller(k), G1 = dU/dx at x_k
        self._launch(self.first)
        potential, f = system.forces()
        if self.second is not None:
            self.G2.from_numpy(np.negative(f))
            self._launch(self.second)  # x stays: F at x_(k+1) is the state's
        x, v = system.get_state()
        return KernelState(k + 1, x, v, f, potential, self._fields())

    # ------------------------------------------------------------------ reverse
    def _reverse_update(self, adj: KernelAdjoint, bound: BoundKernel, G, x: np.ndarray,
                        v: np.ndarray, g: np.ndarray) -> np.ndarray:
        """adj.x, adj.v from after one update launch (from x, v with its force field G = g)
        to before it; the masses' and scalars' adjoints added; returns G's adjoint."""
        system, ti, dtype = self.system, self.ti, self.system.np_dtype
        system.set_state(x, v)
        G.from_numpy(g)
        for grad in [system.x.grad, system.v.grad, system.m.grad, G.grad] + \
                [f.grad for _, f, _ in self.scalars]:
            grad.fill(0)
        with updates.ieee(), ti.ad.Tape(loss=None, clear_gradients=False):
            bound()
            system.x.grad.from_numpy(adj.x.astype(dtype))
            system.v.grad.from_numpy(adj.v.astype(dtype))
        adj.x = system.x.grad.to_numpy().astype(float)
        adj.v = system.v.grad.to_numpy().astype(float)
        adj.mass += system.m.grad.to_numpy().astype(float)
        for key, f, factor in self.scalars:
            value = factor * float(f.grad[None])
            if key == "dt":
                adj.dt += value
            else:
                adj.damping += value
        return G.grad.to_numpy().astype(float)

    def reverse_step(self, adj: KernelAdjoint, state: KernelState, k: int, steps: int) -> None:
        """adj holds dJ/d(state after step k); make it dJ/d(state before step k)."""
        system = self.system
        self._load(state)
        self._before_kernels(k)
        x1, v1 = system.get_state()  # as the controller left them
        g1 = self.G.to_numpy()
        if self.second is not None:
            self._launch(self.first)
            x2, v2 = system.get_state()
            _, f2 = system.forces()
            g_bar = self._reverse_update(adj, self.second, self.G2, x2, v2, np.negative(f2))
            self._through_forces(adj, x2.astype(float), g_bar)
        g_bar = self._reverse_update(adj, self.first, self.G, x1, v1, g1)
        self._through_forces(adj, x1.astype(float), g_bar)
        self._reverse_before_kernels(adj, state, k)
        self._seed(adj, state, self._weight(k, steps))
        self._check_finite(adj, k)
        self.progress("reverse", steps - k, steps)

    # ------------------------------------------------------------------ forward mode
    def _tangent_update(self, bound: BoundKernel, G, x: np.ndarray, v: np.ndarray,
                        g: np.ndarray, tan: Tangent, g_dot: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """(xdot, vdot) after one update launch from x, v (tangents tan.x, tan.v), its force
        field G = g (tangent g_dot)."""
        system, ti, dtype = self.system, self.ti, self.system.np_dtype
        system.set_state(x, v)
        G.from_numpy(g)
        system.v.dual.from_numpy(tan.v.astype(dtype))
        system.m.dual.from_numpy(tan.mass.astype(dtype))
        G.dual.from_numpy(g_dot.astype(dtype))
        for key, f, factor in self.scalars:
            f.dual[None] = factor * (tan.dt if key == "dt" else tan.damping)
        with updates.ieee(), ti.ad.FwdMode(loss=system.U, param=system.x,
                                           seed=tan.x.astype(dtype).reshape(-1),
                                           clear_gradients=False):
            bound()
            return (system.x.dual.to_numpy().astype(float),
                    system.v.dual.to_numpy().astype(float))

    def _kernels_tangent(self, state: KernelState, tan: Tangent, fields_dot: dict
                         ) -> tuple[np.ndarray, np.ndarray, dict, float]:
        """The updates' tangents from `state` (as the controller left it, F at x_k)."""
        system = self.system
        g_dot, _ = self._force_tangent(state, tan, fields_dot)
        xdot, vdot = self._tangent_update(self.first, self.G, state.x, state.v,
                                          np.negative(state.f), tan, g_dot)
        if self.second is not None:
            system.set_state(state.x, state.v)
            self.G.from_numpy(np.negative(state.f))
            self._launch(self.first)
            x2, v2 = system.get_state()
            potential, f2 = system.forces()
            mid = KernelState(state.step, x2, v2, f2, potential, state.fields)
            moved = Tangent(xdot, vdot, tan.mass, tan.dt, tan.damping, tan.params)
            g_dot, _ = self._force_tangent(mid, moved, fields_dot)
            xdot, vdot = self._tangent_update(self.second, self.G2, x2, v2, np.negative(f2),
                                              moved, g_dot)
        return xdot, vdot, fields_dot, 0.0
