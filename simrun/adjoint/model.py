"""A System prepared for derivatives: the energy parameters being differentiated are read
from 0-D fields (`Kernel.with_field_args`), masses carry gradients, and one engine call gives
dU/dx, H lambda and the mixed derivatives d(dU/dx . lambda)/dp (forward over reverse)."""

from __future__ import annotations

import numpy as np

from simrun.keys.pairs import mask
from simrun.lang.autodiff.tape import access_of, recording
from simrun.lang.fields import grad_of
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
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.forces import energy_and_reverse
from simrun.stepper.roles import require_accumulator
from simrun.stepper.system import System


class DirectHVP:
    """The launches of `FwdMode` around the energies' forward and gradient kernels, resolved
    once: clear the tangents and gradients these kernels touch (FwdMode clears every field's
    in the process), seed param.dual, U = 0, the energies' forward-mode variants, dU/dU = 1,
    their forward-over-reverse gradients in reverse order. The same compiled variants with
    the same inputs as `kernel.grad()` under FwdMode launches when no kernel reads a field it
    writes (then run_grad snapshots and replays nothing): the same bits, without the
    per-launch variant lookup, snapshots and process-wide clearing (~200 us a step).
    `lean`: the gradient launches make only the tangents (dU/dx etc. left out: the native
    reverse reads H lambda and the mixed terms alone, ~25% of the launch); without
    `masses`, not the mixed mass term either (~10% more)."""

    def __init__(self, system: System, lean: bool = False, masses: bool = True) -> None:
        self.system = system
        self.calls, touched = [], set()
        self.energy_free = True  # the gradients read nothing the forward launches write
        for bound in system.energy:
            prepare = getattr(bound.kernel, "prepare", None)
            if prepare is None:
                self.calls = None
                return
            primal, pflat, parrays = prepare(bound.args, "fwd")
            acc = access_of(primal)
            if primal.uses_random or parrays or acc.reads & acc.writes:
                self.calls = None  # run_grad would snapshot and replay
                return
            for f in acc.reads | acc.writes:  # as run_grad's _ensure_grad_duals
                if getattr(f, "dual", None) is not None and grad_of(f) is not None:
                    f.grad._make_dual()
            unread = [grad_of(f) for f in acc.reads if lean and grad_of(f) is not None]
            if lean and not masses:  # nobody asked for d/dm: no mixed mass term either
                unread += [system.m.grad.dual]
            varied = (system.x,) if lean else None  # the native reverse seeds x.dual alone
            grad, gflat, garrays = prepare(bound.args, "fwd_reverse", unread, varied)
            if garrays or grad.uses_random:
                self.calls = None
                return
            gacc = access_of(grad)
            touched |= acc.reads | acc.writes | gacc.reads | gacc.writes
            self.energy_free &= not (gacc.reads & acc.writes)
            self.calls.append((primal, pflat, grad, gflat))
        primals = {getattr(f, "primal", None) or f for f in touched}
        self.zero_fields = list(system._energy_grads()) + [system.m.grad]
        for p in primals:
            for f in (getattr(p, "dual", None), getattr(getattr(p, "grad", None), "dual", None)):
                if f is not None and getattr(f, "data", None) is not None:
                    self.zero_fields.append(f)
        used = set().union(*(access_of(g).writes | access_of(g).reads
                             for _, _, g, _ in self.calls))  # lean: no dU/dx to clear
        self.zero_fields = list({id(f): f for f in self.zero_fields if f is not system.U.grad
                                 and (f in used or not lean)}.values())  # each once

    def usable(self) -> bool:
        return self.calls is not None and not recording()

    def set_field_args(self) -> None:
        """The parameters bound as fields, as each launch through the kernels writes them."""
        if self.system._direct is not None:
            self.system._direct.set_field_args()

    def run(self, param, seed: np.ndarray, energy: bool = True) -> None:
        """dU/d(fields) and their tangents along `seed` of the field `param`; with `energy`,
        also U and its tangent (the forward launches; the gradients do not need them when
        they read nothing those launches write)."""
        system = self.system
        self.set_field_args()
        for f in self.zero_fields:
            f.data[...] = 0
        param.dual.data[...] = np.asarray(seed, dtype=param.data.dtype).reshape(param.data.shape)
        system.U.data[()] = 0
        system.U.grad.data[()] = 0
        if energy or not self.energy_free:
            for primal, flat, _, _ in self.calls:
                primal.launch(flat)
        system.U.grad.data[()] = 1
        for _, _, grad, flat in reversed(self.calls):
            grad.launch(flat)
        param.dual.data[...] = 0  # FwdMode clears its seed on exit


class DiffModel:
    """Forces, their derivatives and the objective for one scene (one per process: ti.init)."""

    def __init__(self, scene: Scene, x0: np.ndarray, energy_keys: dict[str, tuple[int, str]],
                 objective_keys: dict[str, str], threads: int | None = None,
                 mass_gradient: bool = True,
                 pair_keys: dict[str, tuple[int, str, tuple[int, int] | None]] | None = None
                 ) -> None:
        self.scene = scene
        self.mass_gradient = mass_gradient  # False: no KEY asks for d/dm (H lambda skips it)
        # built as `run` builds it (deterministic, System's default): the forward sweep is
        # run's frames, a checkpoint's recomputation replays the forward bit for bit, and
        # gradients repeat exactly at any thread count
        self.system = system = System(scene, x0, threads)
        # the trajectory's steps, compiled before the masses get gradients and the parameters
        # become fields: their forces then accumulate nothing the sweeps never read (dU/dm,
        # dU/dp at every pair), so a step costs what `run`'s does
        self.stepper = FieldStepper(scene, system)
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
        # a species kernel's (types x types) field: the KEY is a mask over it
        self.param_masks: dict[str, np.ndarray] = {}
        for key, (i, name, pair) in (pair_keys or {}).items():
            f = system._pair_fields[i][name]
            f._make_grad()  # each is a no-op for a field that has it
            f._make_dual()
            f.grad._make_dual()
            self.param_fields[key] = f
            self.param_masks[key] = mask(f.shape[0], pair)
        system._grads = None  # the twins read other fields: find them again
        system._direct = None  # and force evaluations outside the stepper launch the twins
        self._hvp: dict[bool, DirectHVP] = {}
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
        check_param_types(obj.kernel, kernel, obj.params, obj.where, {})
        names = parameter_names(kernel)
        self._step_arg = names.index("step") if "step" in names else None
        bound = bind(obj.kernel, kernel, {**system.values(), **self._allocate(module),
                                          "L": self.loss, "step": 0, **obj.params}, defaults,
                     accumulator=("objective", "L"))
        require_accumulator(bound, self.loss, "objective", "L",
                            "J would be 0 and every gradient 0")
        return bound

    def _objective_at(self, step: int) -> None:
        """Launch the objective kernel; an argument named `step` gets the step index (so an
        objective can weight time or pick one step: J sums it over steps with `at: mean`)."""
        bound = self.objective_kernel
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
            raise SceneError(f"{obj.kernel.path}: allocate() rejected this scene: {exc}. Check "
                             "the scene's objective and particles for this module.") from None

    # ------------------------------------------------------------------ forces
    def direct_hvp(self, lean: bool = False) -> DirectHVP:
        """The resolved forward-over-reverse launches (made on first use); `lean`: tangents
        only (see DirectHVP)."""
        if self._hvp.get(lean) is None:
            self._hvp[lean] = DirectHVP(self.system, lean, self.mass_gradient)
        return self._hvp[lean]

    def _over_reverse(self, param, seed, energy: bool = True) -> None:
        """U and dU/d(every field) at the current x, with their tangents along `seed` of the
        field `param` (forward mode over the reverse pass)."""
        system, ti = self.system, self.system.ti
        if self.direct_hvp().usable():
            self.direct_hvp().run(param, seed, energy)
            return
        grads = list(system._energy_grads()) + [system.m.grad]
        with ti.ad.FwdMode(loss=system.U, param=param,
                           seed=np.asarray(seed, dtype=system.np_dtype).reshape(-1)):
            for g in grads:
                g.fill(0)
            energy_and_reverse(system.U, system.energy)

    def energy_gradients(self, x: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
        """dU/dm and dU/dp per energy KEY at x (dU/d(field) left in the fields' .grad)."""
        system = self.system
        system.x.from_numpy(np.ascontiguousarray(x, dtype=system.np_dtype))
        system.refresh_neighbors()  # any valid list: the same terms in the same order
        self._over_reverse(system.x, np.zeros(system.x.data.shape), energy=False)
        return (system.m.grad.to_numpy().astype(float),
                {key: self.param_value(key, f.grad) for key, f in self.param_fields.items()})

    def param_value(self, key: str, values) -> float:
        """A parameter KEY's share of a field's values (its gradient or adjoint): the
        0-D field's value, or a per-pair KEY's mask summed over the (types x types) one."""
        at = self.param_masks.get(key)
        array = values.to_numpy() if hasattr(values, "to_numpy") else np.asarray(values)
        return float(array[()] if at is None else (at * array).sum())

    def seed_param_duals(self, tangents: dict[str, float]) -> None:
        """Each parameter field's dual from the KEYs' tangents (per-pair KEYs of one field
        add up their masks)."""
        duals: dict[int, tuple[object, np.ndarray]] = {}
        for key, f in self.param_fields.items():
            at = self.param_masks.get(key)
            value = tangents.get(key, 0.0)
            if at is None:
                f.dual[None] = value
                continue
            held = duals.setdefault(id(f), (f, np.zeros(at.shape)))
            held[1][...] += value * at
        for f, dual in duals.values():
            f.dual.from_numpy(dual.astype(f.dual.to_numpy().dtype))

    # ------------------------------------------------------------------ objective
    def objective(self, x: np.ndarray, v: np.ndarray, potential: float, step: int = 0
                  ) -> float:
        obj = self.scene.objective
        if obj.kernel is not None:
            self._load_state(x, v)
            self.loss.fill(0)
            self._objective_at(step)
            return float(self.loss[None])
        kinetic = 0.5 * float(np.sum(np.asarray(self.system.masses, float)[:, None] * v * v))
        return {"kinetic": kinetic, "potential": potential,
                "total": kinetic + potential}[obj.builtin]

    def objective_grad(self, x: np.ndarray, v: np.ndarray, step: int = 0
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
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
            self._objective_at(step)
        grads = [f.grad.to_numpy().astype(float) for f in (system.x, system.v, system.m)]
        params = {k: float(f.grad[None]) for k, f in self.objective_fields.items()}
        return grads[0], grads[1], grads[2], params

    def uses_potential(self) -> bool:
        obj = self.scene.objective
        return obj.kernel is None and obj.builtin in ("potential", "total")

    def _load_state(self, x: np.ndarray, v: np.ndarray) -> None:
        self.system.set_state(x, v)
