"""What KEYs a scene offers, per kind (the table's `offered` column: read from its
energies', step kernels', thermostat's and objective's parameters), and the step kernels'
values."""

from __future__ import annotations

from simrun.keys.pairs import field_args, pair_keys
from simrun.scene import Scene
from simrun.stepper.binding import find_kernel, load_module, parameter_names

THERMOSTAT_FLOATS = ("temperature", "friction", "tau")
FIXED_KEYS = ("state.x0", "state.v0", "initial.velocity", "dt", "integrator.damping",
              "particles.mass")
THERMOSTAT_KEYS = tuple(f"integrator.{n}" for n in THERMOSTAT_FLOATS)  # where the scene sets it


def energy_keys(scene: Scene) -> list[str]:
    """energy.<i>.params.<name> for every float parameter (scene params and DEFAULTS); a
    species kernel's per-pair parameters as simrun/keys/pairs.py names them."""
    out = []
    for i, term in enumerate(scene.energy):
        kernel = find_kernel(term.kernel, load_module(term.kernel.path))
        defaults = getattr(load_module(term.kernel.path), "DEFAULTS", {}).get(term.kernel.name, {})
        values = {**defaults, **term.params}
        fields = field_args(term)  # their KEYs: pair_keys
        out += [f"energy.{i}.params.{n}" for n in parameter_names(kernel)
                if isinstance(values.get(n), float) and n not in fields]
    return out + list(pair_keys(scene))


def step_keys(scene: Scene) -> list[str]:
    """step_kernels.params.<name> for every float scalar the step kernels take (scene params
    and DEFAULTS), dt aside (that KEY is `dt`)."""
    sk = scene.step_kernels
    if sk is None:
        return []
    names: dict[str, None] = {}
    for ref in sk.kernels:
        module = load_module(ref.path)
        values = {**getattr(module, "DEFAULTS", {}).get(ref.name, {}), **sk.params}
        names.update({n: None for n in parameter_names(find_kernel(ref, module))
                      if n != "dt" and isinstance(values.get(n), float)})
    return [f"step_kernels.params.{n}" for n in names]


def thermostat_keys(scene: Scene) -> list[str]:
    """integrator.<name> for the thermostat's float parameters (the target temperature, the
    friction or time constant); its integers (chain, every, seed) have no derivative."""
    if not scene.integrator.thermostat or scene.step_kernels is not None:
        return []
    return [f"integrator.{n}" for n in THERMOSTAT_FLOATS
            if getattr(scene.integrator, n) is not None]


def damping_keys(scene: Scene) -> list[str]:
    """integrator.damping where the scene's integrator has one (no thermostat, no step
    kernels)."""
    no_damping = scene.step_kernels is not None or scene.integrator.thermostat
    return [] if no_damping else ["integrator.damping"]


def objective_keys(scene: Scene) -> list[str]:
    """objective.params.<name> for the objective's float parameters."""
    if scene.objective is None:
        return []
    return [f"objective.params.{n}" for n, v in scene.objective.params.items()
            if isinstance(v, float)]


def step_values(scene: Scene) -> dict:
    """The step kernels' parameters: DEFAULTS of every kernel, then the scene's params."""
    values: dict = {}
    for ref in scene.step_kernels.kernels:
        values.update(getattr(load_module(ref.path), "DEFAULTS", {}).get(ref.name, {}))
    return {**values, **scene.step_kernels.params}
