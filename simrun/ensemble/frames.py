"""Per-frame derivatives of the potential energy: U, dU/dtheta, and for a periodic box the
virial dU/ds (s scales the box and every position, as `stepper/pressure.py`) and its
derivatives d(dU/ds)/dtheta, all from one forward-over-reverse pass of the energy kernels.

The parameters theta are read from 0-D fields (`Kernel.with_field_args`), so the reverse pass
leaves dU/dtheta in their gradients; the forward tangent is seeded along the box scaling
(x - low for the positions, L for the box's upper corner), so U's tangent is dU/ds and the
parameters' gradient tangents are d^2U/(dtheta ds). No finite differences anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simrun.keys import key_of, with_checked_values, with_pair
from simrun.keys.pairs import mask
from simrun.lang.autodiff.tape import touched
from simrun.lang.fields import grad_of
from simrun.scene import Scene, initial_state
from simrun.stepper.binding import BoundKernel, parameter_names
from simrun.stepper.energy import energy_and_reverse
from simrun.stepper.system import System

Param = tuple[int, str]  # (energy term index, parameter name)


@dataclass
class FrameTable:
    """Per-frame values over n frames; k parameters in the evaluator's order."""

    potential: np.ndarray  # (n,)
    virial: np.ndarray  # (n,) dU/ds (zero without a periodic box)
    grad: np.ndarray  # (n, k) dU/dtheta
    virial_grad: np.ndarray  # (n, k) d(dU/ds)/dtheta


class FrameEvaluator:
    """The scene's energy terms with the parameters ``params`` as fields, bound to a box that
    carries gradients and tangents (one per process: it calls ``ti.init``)."""

    def __init__(self, scene: Scene, params: list[Param], threads: int | None = None) -> None:
        self.scene, self.params = scene, list(params)
        self.system = system = System(scene, initial_state(scene)[0], threads)
        terms, self.box = system.energy_with_box_gradient()
        self.fields: dict[Param, object] = {}
        # a species kernel's (types x types) field: the parameter is a mask over it
        self.masks: dict[Param, np.ndarray] = {}
        self.terms: list[BoundKernel] = []
        for i, bound in enumerate(terms):
            on_pairs = [(i, n) for j, n in self.params if j == i and
                        n.split("[")[0] in system.pair_fields(i)]
            names = [n for j, n in self.params if j == i and (i, n) not in on_pairs]
            kernel = bound.kernel.with_field_args(names) if names else bound.kernel
            self.terms.append(BoundKernel(bound.ref, kernel, bound.args))
            self.fields.update({(i, n): kernel.field_args[n] for n in names})
            for param in on_pairs:
                self.fields[param], self.masks[param] = self._pair_param(scene, *param)
        for f in (system.x, system.U, self.box["box_high"], self.box["box_low"]):
            f._make_dual()
        for f in self.fields.values():
            f._make_grad()  # a no-op for the 0-D twins, which have theirs
            f.grad._make_dual()
        self.tangents = self._tangents()
        bounds = scene.boundary
        dim = scene.particles.dim
        self.low = np.asarray(bounds.low if bounds.type != "none" else [0.0] * dim, float)
        high = np.asarray(bounds.high if bounds.type != "none" else [0.0] * dim, float)
        self.length = high - self.low
        self.periodic = bounds.type == "periodic"

    def _tangents(self) -> list | None:
        """The tangents a pass can read: those of the fields its kernels read or write, and
        of their gradients, but x's and the box's upper corner (the seed). A pass clears
        these alone, not every dual in the process (FwdMode's default walks every field
        alive: in a long process, a notebook or a test session, most of a pass's time)."""
        system, seeds = self.system, (self.system.x, self.box["box_high"])
        fields = {system.U}
        for bound in self.terms:
            if getattr(bound.kernel, "prepare", None) is None:  # a hand-written gradient
                return None  # hides what it touches: FwdMode clears every tangent
            fields |= touched(bound.kernel, bound.args)
        duals = [getattr(f, "dual", None) for f in fields if not any(f is s for s in seeds)]
        duals += [getattr(grad_of(f), "dual", None) for f in fields if grad_of(f) is not None]
        return list({id(d): d for d in duals
                     if getattr(d, "data", None) is not None}.values())

    def _pair_param(self, scene: Scene, index: int, text: str) -> tuple[object, np.ndarray]:
        """``epsilon[A:B]`` (one pair) or ``epsilon`` (every pair) of a species kernel: its
        field and the mask of the entries the parameter is."""
        name, _, rest = text.partition("[")
        field = self.system.pair_fields(index)[name]
        types = scene.energy[index].types
        pair = tuple(types.index(n) for n in rest.rstrip("]").split(":")) if rest else None
        return field, mask(field.shape[0], pair)  # type: ignore[arg-type]

    def set_values(self, values: dict[Param, float], by: str = "FrameEvaluator.set_values") -> None:
        """Evaluate at other parameter values from now on (reweighting moves theta). They
        are checked against the kernels' LIMITS first (``by``: what moved them, for the
        error): a cutoff past the neighbour list's would silently miss pairs."""
        moved = [(with_pair(self.scene, key_of(f"energy.{i}.params.{name}")), float(value))
                 for (i, name), value in values.items()]
        self.scene = with_checked_values(self.scene, moved, by)
        for (i, name), value in values.items():
            at = self.masks.get((i, name))
            if at is not None:  # a pair field: the masked entries take the value
                field = self.fields[(i, name)]
                held = field.to_numpy()
                field.from_numpy(np.where(at > 0, value, held).astype(held.dtype))
                continue
            bound = self.terms[i]
            args = list(bound.args)
            args[parameter_names(bound.kernel).index(name)] = float(value)
            self.terms[i] = BoundKernel(bound.ref, bound.kernel, tuple(args))

    def _pass(self, x: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
        system, ti = self.system, self.system.ti
        system.x.from_numpy(np.ascontiguousarray(x, dtype=system.np_dtype))
        system.refresh_neighbors()
        seed = (np.asarray(x, float) - self.low).reshape(-1) if self.periodic else \
            np.zeros(x.size)
        for d in self.tangents or ():
            d.data[...] = 0
        with ti.ad.FwdMode(loss=system.U, param=system.x, seed=seed,
                           clear_gradients=self.tangents is None):
            if self.periodic:
                self.box["box_high"].dual[None] = list(self.length)
            for f in self.fields.values():
                f.grad.fill(0)
            energy_and_reverse(system.U, self.terms)
        grads = np.array([self._value(p, self.fields[p].grad) for p in self.params])
        mixed = np.array([self._value(p, self.fields[p].grad.dual) for p in self.params])
        return float(system.U[None]), float(system.U.dual[None]), grads, mixed

    def _value(self, param: Param, values) -> float:
        """A parameter's share of a gradient (or its tangent): the 0-D value, or a pair
        parameter's mask summed over its field's."""
        at = self.masks.get(param)
        return float(values[None]) if at is None else float((at * values.to_numpy()).sum())

    def evaluate(self, frames: np.ndarray, progress=None) -> FrameTable:
        """The table over ``frames`` (n, N, dim); ``progress(done, total)`` now and then."""
        n, k = len(frames), len(self.params)
        table = FrameTable(np.empty(n), np.empty(n), np.empty((n, k)), np.empty((n, k)))
        for t, x in enumerate(frames):
            u, virial, grads, mixed = self._pass(x)
            table.potential[t], table.virial[t] = u, virial
            table.grad[t], table.virial_grad[t] = grads, mixed
            if progress is not None and (t % 200 == 0 or t == n - 1):
                progress(t + 1, n)
        return table
