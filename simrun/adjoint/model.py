"""A System prepared for derivatives: the energy parameters being differentiated are read
from 0-D fields (`Kernel.with_field_args`), masses carry gradients, and one engine call gives
dU/dx, H lambda and the mixed derivatives d(dU/dx . lambda)/dp (forward over reverse)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simrun.scene import Scene, SceneError
from simrun.stepper.binding import (
    BoundKernel,
    KernelContext,
    bind,
    find_kernel,
    load_module,
)
from simrun.stepper.system import System


@dataclass
class Second:
    """Derivatives of U at one position x, along lambda."""

    grad_x: np.ndarray  # dU/dx
    h_lam: np.ndarray  # H lambda
    grad_m: np.ndarray  # dU/dm
    mixed_m: np.ndarray  # d(dU/dx . lambda)/dm
    grad_p: dict[str, float] = field(default_factory=dict)  # dU/dp per energy KEY
    mixed_p: dict[str, float] = field(default_factory=dict)


class DiffModel:
    """Forces, their derivatives and the objective for one scene (one per process: ti.init)."""

    def __init__(self, scene: Scene, x0: np.ndarray, energy_keys: dict[str, tuple[int, str]],
                 objective_keys: dict[str, str], threads: int | None = None) -> None:
        self.scene = scene
        self.system = system = System(scene, x0, threads)
        for f in (system.x, system.U, system.m):
            f._make_dual()
        for f in (system.m, system.v):
            f._make_grad()
        for f in (system.x, system.m):
            f.grad._make_dual()  # H lambda lands in x.grad.dual, also from hand-written grads
        self.param_fields: dict[str, object] = {}
        by_term: dict[int, list[str]] = {}
        for i, name in energy_keys.values():
            by_term.setdefault(i, []).append(name)
        for i, names in by_term.items():
            bound = system.energy[i]
            twin = bound.kernel.with_field_args(names)
            system.energy[i] = BoundKernel(bound.ref, twin, bound.args)
            for key, (j, name) in energy_keys.items():
                if j == i:
                    self.param_fields[key] = twin.field_args[name]
        system._grads = None  # the twins read other fields: find them again
        self.objective_fields: dict[str, object] = {}
        self.loss = None
        self.objective_kernel = self._bind_objective(objective_keys)

    def _bind_objective(self, keys: dict[str, str]) -> BoundKernel | None:
        obj = self.scene.objective
        if obj is None or obj.kernel is None:
            return None
        ti, system = self.system.ti, self.system
        self.loss = ti.field(system.fp, shape=(), needs_grad=True)
        module = load_module(obj.kernel.path)
        kernel = find_kernel(obj.kernel, module)
        if keys:
            kernel = kernel.with_field_args(list(keys.values()))
            self.objective_fields = {k: kernel.field_args[n] for k, n in keys.items()}
        defaults = getattr(module, "DEFAULTS", {}).get(obj.kernel.name, {})
        return bind(obj.kernel, kernel, {**system.values(), **self._allocate(module),
                                         "L": self.loss, **obj.params}, defaults)

    def _allocate(self, module) -> dict:
        """Fields of the objective module's `allocate(ctx)` hook (e.g. observations to fit),
        unless the module also holds energy or step kernels (the System allocated it)."""
        obj, system, p = self.scene.objective, self.system, self.scene.particles
        hook = getattr(module, "allocate", None)
        if hook is None or obj.kernel.path in {r.path for r in self.scene.kernel_refs()}:
            return {}
        ctx = KernelContext(p.count, p.dim, system.fp, system.np_dtype, system.x0_np,
                            system.masses, dict(self.scene.topology.arrays), dict(obj.params))
        try:
            return dict(hook(ctx))
        except (ValueError, KeyError) as exc:
            raise SceneError(f"{obj.kernel.path}: allocate() rejected this scene: {exc}. Check "
                             "the scene's objective and particles for this module.") from None

    # ------------------------------------------------------------------ forces
    def _over_reverse(self, param, seed) -> None:
        """U and dU/d(every field) at the current x, with their tangents along `seed` of the
        field `param` (forward mode over the reverse pass)."""
        system, ti = self.system, self.system.ti
        grads = list(system._energy_grads()) + [system.m.grad]
        with ti.ad.FwdMode(loss=system.U, param=param,
                           seed=np.asarray(seed, dtype=system.np_dtype).reshape(-1)):
            for g in grads:
                g.fill(0)
            system.U.fill(0)
            for k in system.energy:
                k()
            system.U.grad.fill(1)
            for k in reversed(system.energy):
                k.kernel.grad(*k.args)

    def second(self, x: np.ndarray, lam: np.ndarray) -> Second:
        """dU/dx, H lambda and the parameter derivatives at x (one forward-over-reverse pass)."""
        system = self.system
        system.x.from_numpy(np.ascontiguousarray(x, dtype=system.np_dtype))
        system.refresh_neighbors()  # any valid list: the same terms in the same order
        self._over_reverse(system.x, lam)
        out = Second(system.x.grad.to_numpy().astype(float),
                     system.x.grad.dual.to_numpy().astype(float),
                     system.m.grad.to_numpy().astype(float),
                     system.m.grad.dual.to_numpy().astype(float))
        for key, f in self.param_fields.items():
            out.grad_p[key] = float(f.grad[None])
            out.mixed_p[key] = float(f.grad.dual[None])
        return out

    def force_tangent(self, x: np.ndarray, xdot: np.ndarray, seeds: dict) -> tuple[np.ndarray,
                                                                                 float]:
        """dF and dU at x along xdot and `seeds` ({"mass": per-particle tangent, energy KEY:
        tangent}): one forward-over-reverse pass per nonzero seed."""
        system = self.system
        system.x.from_numpy(np.ascontiguousarray(x, dtype=system.np_dtype))
        system.refresh_neighbors()  # any valid list: the same terms in the same order
        passes = [(system.x, xdot)] + [(system.m if k == "mass" else self.param_fields[k], s)
                                       for k, s in seeds.items()]
        dforce, denergy = np.zeros_like(xdot, dtype=float), 0.0
        for param, seed in passes:
            if not np.any(seed):
                continue
            self._over_reverse(param, seed)
            dforce -= system.x.grad.dual.to_numpy().astype(float)
            denergy += float(system.U.dual[None])
        return dforce, denergy

    # ------------------------------------------------------------------ objective
    def objective(self, x: np.ndarray, v: np.ndarray, potential: float) -> float:
        obj = self.scene.objective
        if obj.kernel is not None:
            self._load_state(x, v)
            self.loss.fill(0)
            self.objective_kernel()
            return float(self.loss[None])
        kinetic = 0.5 * float(np.sum(np.asarray(self.system.masses, float)[:, None] * v * v))
        return {"kinetic": kinetic, "potential": potential,
                "total": kinetic + potential}[obj.builtin]

    def objective_grad(self, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray, dict]:
        """dJ/dx, dJ/dv, dJ/dm and dJ/dp (objective KEYs) of the objective at one state; the
        potential's share of a built-in objective is added by the caller from `second`."""
        obj, system = self.scene.objective, self.system
        masses = np.asarray(system.masses, float)
        if obj.kernel is None:
            kinetic = obj.builtin in ("kinetic", "total")
            dv = masses[:, None] * v if kinetic else np.zeros_like(v)
            dm = 0.5 * np.sum(v * v, axis=1) if kinetic else np.zeros(len(v))
            return np.zeros_like(x), dv, dm, {}
        self._load_state(x, v)
        with system.ti.ad.Tape(loss=self.loss):
            self.objective_kernel()
        grads = [f.grad.to_numpy().astype(float) for f in (system.x, system.v, system.m)]
        params = {k: float(f.grad[None]) for k, f in self.objective_fields.items()}
        return grads[0], grads[1], grads[2], params

    def uses_potential(self) -> bool:
        obj = self.scene.objective
        return obj.kernel is None and obj.builtin in ("potential", "total")

    def _load_state(self, x: np.ndarray, v: np.ndarray) -> None:
        self.system.set_state(x, v)
