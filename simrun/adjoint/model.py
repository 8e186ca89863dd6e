"""A System prepared for derivatives: the energy parameters being differentiated are read
from 0-D fields (`Kernel.with_field_args`), masses carry gradients, and one engine call gives
dU/dx, H lambda and the mixed derivatives d(dU/dx . lambda)/dp (forward over reverse)."""

from __future__ import annotations

import numpy as np

from simrun.keys.pairs import mask
from simrun.scene import Scene
from simrun.stepper.binding import BoundKernel
from simrun.stepper.energy import HessianVector, energy_and_reverse
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.objective import Objective
from simrun.stepper.system import System


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
            system.rebind_energy(i, BoundKernel(bound.ref, twin, bound.args))
            for key, (j, name) in energy_keys.items():
                if j == i:
                    self.param_fields[key] = twin.field_args[name]
        # a species kernel's (types x types) field: the KEY is a mask over it
        self.param_masks: dict[str, np.ndarray] = {}
        for key, (i, name, pair) in (pair_keys or {}).items():
            f = system.pair_fields(i)[name]
            f._make_grad()  # each is a no-op for a field that has it
            f._make_dual()
            f.grad._make_dual()
            self.param_fields[key] = f
            self.param_masks[key] = mask(f.shape[0], pair)
        system.reset_energy_terms()  # the twins and the new gradients (force evaluations
        # outside the stepper launch the twins; the stepper keeps `run`'s kernels)
        self.objective = Objective(scene, system, objective_keys)  # J at one state

    # ------------------------------------------------------------------ forces
    def hessian_vector(self, lean: bool = False) -> HessianVector | None:
        """The energies' forward-over-reverse launches (`EnergyTerms.hessian_vector`), None
        where they cannot be made directly; `lean`: tangents only."""
        return self.system.energy_terms().hessian_vector(lean, self.mass_gradient)

    def over_reverse(self, param, seed, energy: bool = True) -> None:
        """U and dU/d(every field) at the current x, with their tangents along `seed` of the
        field `param` (forward mode over the reverse pass)."""
        system, ti = self.system, self.system.ti
        hvp = self.hessian_vector()
        if hvp is not None and hvp.usable():
            hvp.run(param, seed, energy)
            return
        grads = list(system.energy_terms().touched_grads) + [system.m.grad]
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
        self.over_reverse(system.x, np.zeros(system.x.data.shape), energy=False)
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
