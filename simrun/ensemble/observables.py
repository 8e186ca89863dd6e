"""What an ensemble average is taken of: built-in observables (potential energy, per
particle, pressure, kinetic and total energy) and scene objective kernels, per frame, with
their explicit derivatives dO/dtheta and dO/dT.

Frames carry positions only. The kinetic energy's canonical average is exactly dof kT / 2,
so the observables that contain it (pressure, kinetic, total) take that value instead of the
frame's noisy one: the average is the same, with less noise, and dO/dT = dof / 2 is exact
(the pressure's kinetic share is dof kT / (dim V), so dP/dT has dof / (dim V) explicitly).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simrun.ensemble.frames import FrameTable
from simrun.scene import Scene, SceneError
from simrun.stepper.binding import bind, find_kernel, load_module, parameter_names

BUILTINS = ("potential", "potential_per_particle", "pressure", "kinetic", "total")


@dataclass
class Observed:
    """Per-frame values (n, m) of an observable and its explicit derivatives: ``partial``
    per KEY (n, m), ``partial_t`` with respect to the temperature (m,)."""

    values: np.ndarray
    partial: dict[str, np.ndarray] = field(default_factory=dict)
    partial_t: np.ndarray | float = 0.0


@dataclass
class EnergyFrames:
    """What a KEY's density series (simrun.keys' table, `density`) reads per frame."""

    table: FrameTable  # at the KEYs' values
    kt: float
    energy: list[str]  # the energy KEYs, in the order of the table's gradient columns
    boltz: float = 1.0  # k_B: d/dT = k_B d/d(kT) for a temperature in K (real, metal, si)

    @property
    def potential(self) -> np.ndarray:
        return self.table.potential

    @property
    def count(self) -> int:
        return len(self.table.potential)

    def energy_derivative(self, text: str) -> np.ndarray:
        return self.table.grad[:, self.energy.index(text)]


def volume(scene: Scene) -> float:
    b = scene.boundary
    return float(np.prod(np.asarray(b.high, float) - np.asarray(b.low, float)))


def builtin(name: str, scene: Scene, table: FrameTable, energy_keys: list[str], dof: int
            ) -> Observed:
    """A built-in observable over the frames of ``table`` (columns of ``table.grad`` are the
    ``energy_keys`` in order)."""
    kt, n = scene.kT, scene.particles.count  # k_B T in energy units (scene.units)
    boltz = scene.constants.boltz  # partial_t is per temperature unit (K): d(kT)/dT = k_B
    u, du = table.potential[:, None], {k: table.grad[:, [j]] for j, k in enumerate(energy_keys)}
    if name in ("potential", "potential_per_particle"):
        scale = 1.0 if name == "potential" else 1.0 / n
        return Observed(u * scale, {k: g * scale for k, g in du.items()})
    if name == "kinetic":
        return Observed(np.full_like(u, 0.5 * dof * kt), {}, 0.5 * dof * boltz)
    if name == "total":
        return Observed(u + 0.5 * dof * kt, du, 0.5 * dof * boltz)
    if name == "pressure":
        if scene.boundary.type != "periodic":
            raise SceneError(f"{scene.objective.where}: the pressure needs a periodic box "
                             "(boundary: {type: periodic, ...}); this scene has "
                             f"'{scene.boundary.type}'. Choose another observable.")
        denom = scene.particles.dim * volume(scene) / scene.constants.nktv2p  # atm, bar
        values = (dof * kt - table.virial[:, None]) / denom
        return Observed(values, {k: -table.virial_grad[:, [j]] / denom
                                 for j, k in enumerate(energy_keys)}, dof * boltz / denom)
    raise SceneError(f"{scene.objective.where}: '{name}' is not an ensemble observable; use "
                     f"one of {', '.join(BUILTINS)} or a kernel")


class KernelObservable:
    """The scene's objective kernel (accumulating into L) evaluated per frame, with dL/dp for
    its parameters named by objective KEYs (read from fields)."""

    def __init__(self, scene: Scene, system, keys: dict[str, str]) -> None:
        obj, ti = scene.objective, system.ti
        module = load_module(obj.kernel.path)
        kernel = find_kernel(obj.kernel, module)
        names = parameter_names(kernel)
        if "v" in names:
            raise SceneError(f"{obj.where}: objective kernel '{obj.kernel.name}' reads the "
                             "velocities v; the ensemble method samples positions only (the "
                             "velocities' canonical law is known: Maxwell-Boltzmann). Write the "
                             "observable as a function of x, or use --method trajectory.")
        if hasattr(module, "allocate") and obj.kernel.path not in \
                {r.path for r in scene.kernel_refs()}:
            raise SceneError(f"{obj.where}: objective module {obj.kernel.path.name} allocates "
                             "fields, which the ensemble method does not provide; put the "
                             "kernel in a module without an allocate hook.")
        self.keys = keys
        if keys:
            kernel = kernel.with_field_args(list(keys.values()))
        self.fields = {k: kernel.field_args[n] for k, n in keys.items()}
        self.loss = ti.field(system.fp, shape=(), needs_grad=True)
        self.ti, self.system = ti, system
        self.step_at = names.index("step") if "step" in names else None
        defaults = getattr(module, "DEFAULTS", {}).get(obj.kernel.name, {})
        self.bound = bind(obj.kernel, kernel, {**system.values(), "L": self.loss, "step": 0,
                                               **obj.params}, defaults,
                          accumulator=("objective", "L"))

    def _launch(self, step: int) -> None:
        args = list(self.bound.args)
        if self.step_at is not None:
            args[self.step_at] = int(step)
        self.bound.kernel(*args)

    def evaluate(self, frames: np.ndarray, steps: np.ndarray) -> Observed:
        system = self.system
        values = np.empty((len(frames), 1))
        partial = {k: np.empty((len(frames), 1)) for k in self.fields}
        for t, (x, step) in enumerate(zip(frames, steps)):
            system.x.from_numpy(np.ascontiguousarray(x, dtype=system.np_dtype))
            system.refresh_neighbors()  # a kernel over the list sees this frame's pairs
            if self.fields:
                with self.ti.ad.Tape(loss=self.loss):
                    self._launch(step)
                for k, f in self.fields.items():
                    partial[k][t, 0] = float(f.grad[None])
            else:
                self.loss.fill(0)
                self._launch(step)
            values[t, 0] = float(self.loss[None])
        return Observed(values, partial)
