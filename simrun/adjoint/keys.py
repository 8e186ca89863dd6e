"""The KEYs `simrun grad --wrt` differentiates: scene paths (the `--set` grammar) and the
reserved arrays `state.x0` / `state.v0` / `fields.<name>`; each knows its value and how to put
a new one in."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

import numpy as np

from simrun.adjoint.pair_keys import (
    field_args,
    normalise,
    pair_keys,
    pair_value,
    with_pair_value,
)
from simrun.scene import Scene, SceneError, initial_state
from simrun.scene.errors import MAX_SHOWN, shorten
from simrun.scene.load_terms import ENSEMBLE_BUILTINS
from simrun.stepper.binding import find_kernel, load_module, parameter_names
from simrun.stepper.thermostats import controller_conflict

FIXED_KEYS = ("state.x0", "state.v0", "initial.velocity", "dt", "integrator.damping",
              "particles.mass")
THERMOSTAT_FLOATS = ("temperature", "friction", "tau")
THERMOSTAT_KEYS = tuple(f"integrator.{n}" for n in THERMOSTAT_FLOATS)  # where the scene sets it
KEY_KINDS = (*FIXED_KEYS, "energy.<i>.params.<name>", "energy.<i>.params.<name>[A:B]", "step_kernels.params.<name>",
             "objective.params.<name>", "fields.<name>", *THERMOSTAT_KEYS)  # `grad --help`
FIELDS_HINT = "fields.<name> (a float field a kernel module's allocate hook makes)"


@dataclass(frozen=True)
class Key:
    """One differentiated quantity: `kind` says where it lives, `index`/`name` which one."""

    text: str
    kind: str  # x0 | v0 | velocity | dt | damping | mass | energy | objective | step | field
    #            | thermostat (integrator.temperature | friction | tau)
    index: int = -1
    name: str = ""
    per_pair: bool = False  # a species kernel's field argument (adjoint/pair_keys.py)
    pair: tuple[int, int] | None = None  # which pair; None: the number filling every pair

    @property
    def term_param(self) -> str:
        """An energy KEY's parameter as the term's evaluators name it: ``epsilon``, or
        ``epsilon[A:B]`` for one species pair."""
        return self.text.split(".params.", 1)[1] if self.kind == "energy" else self.name


def _energy_params(scene: Scene) -> list[str]:
    """energy.<i>.params.<name> for every float parameter (scene params and DEFAULTS)."""
    out = []
    for i, term in enumerate(scene.energy):
        kernel = find_kernel(term.kernel, load_module(term.kernel.path))
        defaults = getattr(load_module(term.kernel.path), "DEFAULTS", {}).get(term.kernel.name, {})
        values = {**defaults, **term.params}
        fields = field_args(term)  # their KEYs: adjoint/pair_keys.py
        out += [f"energy.{i}.params.{n}" for n in parameter_names(kernel)
                if isinstance(values.get(n), float) and n not in fields]
    return out + list(pair_keys(scene))


def _step_params(scene: Scene) -> list[str]:
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


def _thermostat_keys(scene: Scene) -> list[str]:
    """integrator.<name> for the thermostat's float parameters (the target temperature, the
    friction or time constant); its integers (chain, every, seed) have no derivative."""
    if not scene.integrator.thermostat or scene.step_kernels is not None:
        return []
    return [f"integrator.{n}" for n in THERMOSTAT_FLOATS
            if getattr(scene.integrator, n) is not None]


def known_keys(scene: Scene) -> list[str]:
    no_damping = scene.step_kernels is not None or scene.integrator.thermostat
    fixed = [k for k in FIXED_KEYS if not (no_damping and k == "integrator.damping")]
    keys = fixed + _energy_params(scene) + _step_params(scene) + _thermostat_keys(scene)
    if scene.objective is not None:
        keys += [f"objective.params.{n}" for n, v in scene.objective.params.items()
                 if isinstance(v, float)]
    return keys


def parse_key(scene: Scene, text: str) -> Key:
    """A --wrt KEY, or SceneError (exit 2) with the keys that would work. `fields.<name>`
    is checked against the allocated fields later (`check_field_keys`): they exist only
    once the kernel modules have run."""
    parts = text.split(".")
    if controller_conflict(scene):  # what `simrun run` cannot run has no derivative
        raise SceneError(controller_conflict(scene))
    if scene.objective is None:
        raise SceneError(f"{scene.source}: the scene has no 'objective', so there is nothing to "
                         "differentiate. Add e.g. 'objective: {builtin: kinetic, at: end}'.")
    if scene.objective.builtin in ENSEMBLE_BUILTINS or scene.objective.targets is not None:
        what = scene.objective.builtin or "targets"
        raise SceneError(f"{scene.objective.where}: the objective '{what}' is made of ensemble "
                         "averages, which only --method ensemble differentiates (with a "
                         "Langevin or Nose-Hoover thermostat and at: mean).")
    if parts[0] == "fields" and len(parts) == 2 and parts[1]:
        if scene.step_kernels is None and scene.controller is None:
            raise SceneError(f"--wrt {shorten(text)}: fields are differentiated in scenes with "
                             "step_kernels or a controller only (their kernels carry the "
                             "fields from step to step); this scene has neither. Its keys: "
                             f"{', '.join(known_keys(scene))}.")
        return Key(text, "field", name=parts[1])
    known = known_keys(scene)
    if text not in known and normalise(scene, text) in known:
        raise SceneError(f"--wrt {shorten(text)}: write this KEY as {normalise(scene, text)} "
                         "(the pair in the scene's order of species, joined by ':', as "
                         "gradients.json and the CSV columns name it).")
    if text not in known:
        close = difflib.get_close_matches(text, known, n=3) if len(text) <= MAX_SHOWN else []
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        more = f", {FIELDS_HINT}" if scene.step_kernels is not None or \
            scene.controller is not None else ""
        raise SceneError(f"--wrt {shorten(text)}: not a differentiable key of this scene.{hint} Its "
                         f"keys: {', '.join(known)}{more}.")
    kinds = {"state.x0": "x0", "state.v0": "v0", "initial.velocity": "velocity", "dt": "dt",
             "integrator.damping": "damping", "particles.mass": "mass"}
    if text in kinds:
        if text == "particles.mass" and scene.initial.temperature > 0:
            raise SceneError("--wrt particles.mass: the thermal start velocities are drawn "
                             "with sqrt(T/m), a random draw simrun does not differentiate; set "
                             "initial.temperature: 0 or leave the mass out.")
        return Key(text, kinds[text])
    per_pair = pair_keys(scene)
    if text in per_pair:
        index, name, pair = per_pair[text]
        return Key(text, "energy", index, name, per_pair=True, pair=pair)
    if parts[0] == "energy":
        return Key(text, "energy", int(parts[1]), parts[3])
    if parts[0] == "integrator":
        return Key(text, "thermostat", name=parts[1])
    if parts[0] == "step_kernels":
        return Key(text, "step", name=parts[2])
    return Key(text, "objective", name=parts[2])


def check_field_keys(keys: list[Key], fields: dict) -> None:
    """Each fields.<name> KEY names a float field the kernel modules allocated."""
    names = sorted(n for n, f in fields.items() if f.dtype.is_float)
    for key in keys:
        if key.kind == "field" and key.name not in names:
            close = difflib.get_close_matches(key.name, names, n=3) \
                if len(key.name) <= MAX_SHOWN else []
            hint = f" Did you mean {' or '.join('fields.' + c for c in close)}?" if close else ""
            raise SceneError(f"--wrt {shorten(key.text)}: no kernel module of this scene allocates a "
                             f"float field '{shorten(key.name)}'.{hint} Its fields: "
                             f"{', '.join('fields.' + n for n in names) or 'none'}.")


def value_of(scene: Scene, key: Key) -> np.ndarray | float:
    if key.kind in ("x0", "v0"):
        return initial_state(scene)[0 if key.kind == "x0" else 1]
    if key.kind == "velocity":
        return np.asarray(scene.initial.velocity, float)
    if key.kind == "dt":
        return scene.dt
    if key.kind == "damping":
        return scene.integrator.damping
    if key.kind == "mass":
        masses = np.asarray(scene.particles.masses, float)
        return float(masses[0]) if len(set(scene.particles.masses)) == 1 else masses
    if key.kind == "thermostat":
        return float(getattr(scene.integrator, key.name))
    if key.kind == "energy" and key.pair is not None:
        return pair_value(scene.energy[key.index], key.name, key.pair)
    if key.kind == "energy":
        term = scene.energy[key.index]
        defaults = getattr(load_module(term.kernel.path), "DEFAULTS", {}).get(term.kernel.name, {})
        return float({**defaults, **term.params}[key.name])
    if key.kind == "step":
        return float(_step_values(scene)[key.name])
    if key.kind == "field":
        raise SceneError(f"{key.text}: a field has no value in the scene file (its kernel "
                         "module allocates it when the scene starts), so --sweep does not "
                         "take fields; `simrun grad --wrt` and `simrun optimize` do.")
    return float(scene.objective.params[key.name])


def _step_values(scene: Scene) -> dict:
    """The step kernels' parameters: DEFAULTS of every kernel, then the scene's params."""
    values: dict = {}
    for ref in scene.step_kernels.kernels:
        values.update(getattr(load_module(ref.path), "DEFAULTS", {}).get(ref.name, {}))
    return {**values, **scene.step_kernels.params}


def with_value(scene: Scene, key: Key, value) -> Scene:
    """The scene with one key's value replaced (state.x0/v0 are not scene values)."""
    if key.kind == "velocity":
        return replace(scene, initial=replace(scene.initial, velocity=tuple(map(float, value))))
    if key.kind == "dt":
        return replace(scene, dt=float(value))
    if key.kind == "damping":
        return replace(scene, integrator=replace(scene.integrator, damping=float(value)))
    if key.kind == "mass":
        masses = np.broadcast_to(np.asarray(value, float), (scene.particles.count,))
        return replace(scene, particles=replace(scene.particles,
                                                masses=tuple(float(m) for m in masses)))
    if key.kind == "thermostat":
        return replace(scene, integrator=replace(scene.integrator, **{key.name: float(value)}))
    def with_param(part):  # an energy term, the step kernels or the objective
        return replace(part, params={**part.params, key.name: float(value)})
    if key.kind == "energy":
        terms = list(scene.energy)
        terms[key.index] = with_param(terms[key.index]) if key.pair is None else \
            with_pair_value(terms[key.index], key.name, key.pair, value)
        return replace(scene, energy=tuple(terms))
    if key.kind == "step":
        return replace(scene, step_kernels=with_param(scene.step_kernels))
    if key.kind == "objective":
        return replace(scene, objective=with_param(scene.objective))
    raise ValueError(f"{key.text} is not a scene value")
