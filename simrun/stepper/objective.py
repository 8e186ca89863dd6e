"""A scene's objective J at one state of a System: a built-in (kinetic, potential, total)
or the scene's objective kernel, and J's derivatives there (the kernel's by a Tape). The
gradient's sweeps (simrun/adjoint) read J and seed its adjoint state by state through it."""

from __future__ import annotations

import numpy as np

from simrun.scene import Scene, SceneError
from simrun.stepper.binding import (
    BoundKernel,
    KernelContext,
    bind,
    check_param_types,
    find_kernel,
    load_module,
    parameter_names,
)
from simrun.stepper.roles import require_accumulator
from simrun.stepper.system import System


class Objective:
    """J of `scene` on `system`'s fields; `keys` maps each differentiated objective KEY to
    the kernel's parameter, read from a 0-D field (`fields`) so it has a gradient."""

    def __init__(self, scene: Scene, system: System, keys: dict[str, str]) -> None:
        self.scene, self.system = scene, system
        self.fields: dict[str, object] = {}  # objective KEY -> its 0-D field
        self.loss = None
        self.kernel = self._bind(keys)

    def _bind(self, keys: dict[str, str]) -> BoundKernel | None:
        obj = self.scene.objective
        if obj is None or obj.kernel is None:
            return None
        ti, system = self.system.ti, self.system
        self.loss = ti.field(system.fp, shape=(), needs_grad=True)
        module = load_module(obj.kernel.path)
        kernel = find_kernel(obj.kernel, module)
        if keys:
            kernel = kernel.with_field_args(list(keys.values()))
            self.fields = {k: kernel.field_args[n] for k, n in keys.items()}
        defaults = getattr(module, "DEFAULTS", {}).get(obj.kernel.name, {})
        check_param_types(obj.kernel, kernel, obj.params, obj.where, {})
        names = parameter_names(kernel)
        self._step_arg = names.index("step") if "step" in names else None
        bound = bind(obj.kernel, kernel, {**system.values(), **self._allocate(module),
                                          "L": self.loss, "step": 0, **obj.params}, defaults,
                     accumulator=("objective", "L"))
        require_accumulator(bound, self.loss, "objective", "L",
                            "J would be 0 and every gradient 0")
        return bound

    def _launch_at(self, step: int) -> None:
        """Launch the objective kernel; an argument named `step` gets the step index (so an
        objective can weight time or pick one step: J sums it over steps with `at: mean`)."""
        bound = self.kernel
        if self._step_arg is None:
            bound()
            return
        args = list(bound.args)
        args[self._step_arg] = int(step)
        bound.kernel(*args)

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
            raise SceneError(f"{obj.kernel.where}: {obj.kernel.path.name}'s allocate() "
                             f"rejected this scene: {exc}. Check the scene's objective and "
                             "particles for this module.") from None

    def value(self, x: np.ndarray, v: np.ndarray, potential: float, step: int = 0) -> float:
        obj = self.scene.objective
        if obj.kernel is not None:
            self.system.set_state(x, v)
            self.loss.fill(0)
            self._launch_at(step)
            return float(self.loss[None])
        kinetic = 0.5 * float(np.sum(np.asarray(self.system.masses, float)[:, None] * v * v))
        return {"kinetic": kinetic, "potential": potential,
                "total": kinetic + potential}[obj.builtin]

    def gradient(self, x: np.ndarray, v: np.ndarray, step: int = 0
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        """dJ/dx, dJ/dv, dJ/dm and dJ/dp (objective KEYs) of the objective at one state; the
        potential's share of a built-in objective is the caller's (it holds the forces)."""
        obj, system = self.scene.objective, self.system
        masses = np.asarray(system.masses, float)
        if obj.kernel is None:
            kinetic = obj.builtin in ("kinetic", "total")
            dv = masses[:, None] * v if kinetic else np.zeros_like(v)
            dm = 0.5 * np.sum(v * v, axis=1) if kinetic else np.zeros(len(v))
            return np.zeros_like(x), dv, dm, {}
        system.set_state(x, v)
        with system.ti.ad.Tape(loss=self.loss):
            self._launch_at(step)
        grads = [f.grad.to_numpy().astype(float) for f in (system.x, system.v, system.m)]
        params = {k: float(f.grad[None]) for k, f in self.fields.items()}
        return grads[0], grads[1], grads[2], params

    @property
    def uses_potential(self) -> bool:
        obj = self.scene.objective
        return obj.kernel is None and obj.builtin in ("potential", "total")
