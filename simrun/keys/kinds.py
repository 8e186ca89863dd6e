"""The table of what each kind of KEY means (simrun.keys' docstring lists its columns).

Every field of `Kind` is required, so an entry that lacks one is a TypeError at import, and a
`Key` of a kind without an entry is a ValueError when it is made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simrun.keys.known import (
    THERMOSTAT_FLOATS,
    THERMOSTAT_KEYS,
    damping_keys,
    energy_keys,
    objective_keys,
    step_keys,
    step_values,
    thermostat_keys,
)
from simrun.keys.pairs import pair_value, with_pair_value
from simrun.scene import Scene, SceneError, initial_state
from simrun.scene.errors import shorten
from simrun.scene.load_grids import grid_field_names
from simrun.stepper.binding import load_module

FIELD = "field"  # the kind of `fields.<name>` (simrun.keys.field_key makes one)
GRID = "grid"  # the kind of `state.<field>`: a grid field's start (scene/load_grids.py)
ROLES = ("start", "mass", "energy", "objective", "step", "field")  # what the sweep needs


@dataclass(frozen=True)
class Key:
    """One differentiated quantity: `kind` names its entry in KINDS, `index`/`name` which
    one (an energy term's index, a parameter's or a field's name). `per_pair`: a species
    kernel's (types x types) parameter (simrun/keys/pairs.py), one `pair` of it or, with
    pair None, the number filling every pair; `simrun.keys.parse_key` resolves them."""

    text: str
    kind: str
    index: int = -1
    name: str = ""
    per_pair: bool = False
    pair: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"KEY {self.text!r}: kind {self.kind!r} has no entry in "
                             f"simrun.keys.KINDS ({', '.join(KINDS)})")

    @property
    def spec(self) -> Kind:
        return KINDS[self.kind]

    @property
    def term_param(self) -> str:
        """The parameter as an energy term's evaluators name it: ``epsilon``, or
        ``epsilon[A:B]`` for one species pair (ensemble/frames.py)."""
        return self.text.split(".params.", 1)[1] if self.per_pair else self.name


@dataclass(frozen=True)
class Kind:
    """What one kind of KEY means (simrun.keys' docstring); no column has a default."""

    forms: tuple[str, ...]  # as `grad --help` lists them
    match: Callable[[list[str]], tuple[int, str] | None]
    listed: bool
    offered: Callable[[Scene], list[str]]  # this kind's KEYs in a scene (listed ones)
    check: Callable[[Scene, Key], None]
    read: Callable[[Scene, Key], Any]
    write: Callable[[Scene, Key, Any], Scene]
    lives: str  # scene | x0 | v0 | fields
    role: str  # one of ROLES
    step_input: Callable[[Key], str] | None  # the step's scalar input it is (role step)
    gradient: Callable[[Key, Any, Scene], Any]
    tangents: Callable[[Key, Scene, Any, Any], list[tuple[str, dict, dict]]]
    direction: Callable[[Key, Scene, dict, dict], np.ndarray | None]
    collect: Callable[[list], Any]
    density: Callable[[Key, Any], np.ndarray] | None  # c per frame (None: no ensemble KEY)
    partial: Callable[[Key, Any], Any] | None  # a per frame


# ------------------------------------------------------------------ the pieces of the table
def _fixed(text: str) -> Callable[[list[str]], tuple[int, str] | None]:
    return lambda parts: (-1, "") if parts == text.split(".") else None


def _param_of(prefix: str) -> Callable[[list[str]], tuple[int, str] | None]:
    """<prefix>.params.<name> (step_kernels, objective)."""
    return lambda parts: (-1, parts[2]) if len(parts) == 3 and parts[0] == prefix and \
        parts[1] == "params" and parts[2] else None


def _match_energy(parts: list[str]) -> tuple[int, str] | None:
    """energy.<i>.params.<name>, or <name>[A:B] (one species pair: parse_key resolves it)."""
    name = parts[3].split("[", 1)[0] if len(parts) == 4 else ""
    if name and parts[0] == "energy" and parts[1].isdigit() and parts[2] == "params":
        return int(parts[1]), name
    return None


def _match_thermostat(parts: list[str]) -> tuple[int, str] | None:
    ok = len(parts) == 2 and parts[0] == "integrator" and parts[1] in THERMOSTAT_FLOATS
    return (-1, parts[1]) if ok else None


def _match_field(parts: list[str]) -> tuple[int, str] | None:
    return (-1, parts[1]) if len(parts) == 2 and parts[0] == "fields" and parts[1] else None


def _match_grid(parts: list[str]) -> tuple[int, str] | None:
    ok = len(parts) == 2 and parts[0] == "state" and parts[1] not in ("x0", "v0", "")
    return (-1, parts[1]) if ok else None


def _always(text: str) -> Callable[[Scene], list[str]]:
    return lambda scene: [text]


def _with_particles(text: str) -> Callable[[Scene], list[str]]:
    """A particle KEY, offered only where the scene has particles: in a grid scene without
    them (wave, smoke) it would be a key that changes nothing."""
    return lambda scene: [text] if scene.particles.count else []


def _no_check(scene: Scene, key: Key) -> None:
    return None


def _check_mass(scene: Scene, key: Key) -> None:
    if scene.initial.temperature > 0:
        raise SceneError("--wrt particles.mass: the thermal start velocities are drawn "
                         "with sqrt(T/m), a random draw simrun does not differentiate; set "
                         "initial.temperature: 0 or leave the mass out.")


def _check_field(scene: Scene, key: Key) -> None:
    if scene.step_kernels is None and scene.controller is None:
        raise SceneError(f"--wrt {shorten(key.text)}: fields are differentiated in scenes with "
                         "step_kernels or a controller only (their kernels carry the "
                         "fields from step to step); this scene has neither. Its keys: "
                         f"{', '.join(known_keys(scene))}.")


def _read_mass(scene: Scene, key: Key):
    masses = np.asarray(scene.particles.masses, float)
    return float(masses[0]) if len(set(scene.particles.masses)) == 1 else masses


def _read_energy(scene: Scene, key: Key) -> float:
    term = scene.energy[key.index]
    if key.pair is not None:
        return pair_value(term, key.name, key.pair)
    defaults = getattr(load_module(term.kernel.path), "DEFAULTS", {}).get(term.kernel.name, {})
    return float({**defaults, **term.params}[key.name])


def _read_field(scene: Scene, key: Key):
    raise SceneError(f"{key.text}: a field has no value in the scene file (its kernel "
                     "module allocates it when the scene starts), so --sweep does not "
                     "take fields; `simrun grad --wrt` and `simrun optimize` do.")


def _not_in_scene(scene: Scene, key: Key, value) -> Scene:
    raise ValueError(f"{key.text} is not a scene value")


def _write_mass(scene: Scene, key: Key, value) -> Scene:
    masses = np.broadcast_to(np.asarray(value, float), (scene.particles.count,))
    return replace(scene, particles=replace(scene.particles,
                                            masses=tuple(float(m) for m in masses)))


def _with_param(part, key: Key, value):
    """An energy term, the step kernels or the objective with one parameter replaced."""
    return replace(part, params={**part.params, key.name: float(value)})


def _write_energy(scene: Scene, key: Key, value) -> Scene:
    terms = list(scene.energy)
    terms[key.index] = _with_param(terms[key.index], key, value) if key.pair is None else \
        with_pair_value(terms[key.index], key.name, key.pair, value)
    return replace(scene, energy=tuple(terms))


def _zeros(scene: Scene) -> dict:
    """A tangent with nothing moving (forward mode's seeds add one part)."""
    n, dim = scene.particles.count, scene.particles.dim
    return {"x": np.zeros((n, dim)), "v": np.zeros((n, dim)), "mass": np.zeros(n)}


def _unit(rng, shape) -> np.ndarray:
    d = rng.normal(size=shape)
    return d / np.linalg.norm(d)


def _seed_start(part: str) -> Callable:
    """One forward sweep along a random unit direction of the start's x or v."""
    def seeds(key: Key, scene: Scene, rng, state0) -> list[tuple[str, dict, dict]]:
        shape = (scene.particles.count, scene.particles.dim)
        return [(key.text, {**_zeros(scene), part: _unit(rng, shape)}, {})]
    return seeds


def _seed_scalar(part: str) -> Callable:
    """One forward sweep whose tangent moves the scalar `part` (dt, damping) by 1."""
    return lambda key, scene, rng, state0: [(key.text, {**_zeros(scene), part: 1.0}, {})]


def _seed_param(key: Key, scene: Scene, rng, state0) -> list[tuple[str, dict, dict]]:
    return [(key.text, {**_zeros(scene), "params": {key.text: 1.0}}, {})]


def _seed_velocity(key: Key, scene: Scene, rng, state0) -> list[tuple[str, dict, dict]]:
    n, dim = scene.particles.count, scene.particles.dim
    return [(f"{key.text}.{c}", {**_zeros(scene), "v": np.eye(dim)[c][None].repeat(n, 0)}, {})
            for c in range(dim)]


def _seed_mass(key: Key, scene: Scene, rng, state0) -> list[tuple[str, dict, dict]]:
    """The stepper's masses are m * mvv2e (simrun.scene.units): a unit move of the scene's
    mass moves them by mvv2e."""
    n = scene.particles.count
    uniform = np.ndim(_read_mass(scene, key)) == 0
    direction = np.ones(n) if uniform else _unit(rng, n)
    return [(key.text, {**_zeros(scene), "mass": direction * scene.constants.mvv2e}, {})]


def _seed_field(key: Key, scene: Scene, rng, state0) -> list[tuple[str, dict, dict]]:
    d = rng.normal(size=np.shape(state0.fields[key.name]))
    return [(key.text, _zeros(scene), {key.name: d / np.linalg.norm(d)})]


def _no_direction(key: Key, scene: Scene, tangent: dict, fields: dict) -> None:
    return None


def _direction_of(part: str) -> Callable:
    return lambda key, scene, tangent, fields: tangent[part]


def _mass_direction(key: Key, scene: Scene, tangent: dict, fields: dict):
    return tangent["mass"] / scene.constants.mvv2e if np.ndim(_read_mass(scene, key)) else None


def _mass_gradient(key: Key, adj, scene: Scene):
    """dJ/dm of the scene's masses: the adjoint of the stepper's m * mvv2e, times mvv2e."""
    uniform = len(set(scene.particles.masses)) == 1
    grad = adj.mass * scene.constants.mvv2e
    return float(grad.sum()) if uniform else grad


def _param_gradient(key: Key, adj, scene: Scene):
    return adj.params.get(key.text, 0.0)


def _first(derivs: list):
    return derivs[0]


def _energy_density(key: Key, frames) -> np.ndarray:
    """c = dU/dtheta / kT: the canonical density's dependence on an energy parameter."""
    return frames.energy_derivative(key.text) / frames.kt


def _temperature_density(key: Key, frames) -> np.ndarray:
    """c = -k_B U / (k_B T)^2 (beta's dependence on T). Only the temperature: the ensemble
    method's parse (simrun.ensemble.keys) takes no friction or tau."""
    if key.name != "temperature":
        raise ValueError(f"{key.text}: not a KEY of the canonical density")
    return -frames.potential * frames.boltz / frames.kt ** 2  # per K outside lj units


def _no_density(key: Key, frames) -> np.ndarray:
    """c = 0: the density does not depend on the objective's parameters."""
    return np.zeros(frames.count)


def _param_partial(key: Key, observed) -> Any:
    """a = dO/dtheta, the observable's own derivative (0 where it has none)."""
    return observed.partial.get(key.text, 0.0)


def _temperature_partial(key: Key, observed) -> Any:
    return observed.partial_t


def _step_input_name(key: Key) -> str:
    return key.name


def _scene_value(read: Callable[[Scene], Any], write: Callable[[Scene, Any], Scene]) -> dict:
    return {"read": lambda scene, key: read(scene),
            "write": lambda scene, key, value: write(scene, value)}


_START = {"listed": True, "check": _no_check,
          "role": "start", "step_input": None, "density": None, "partial": None}
_PARAM = {"listed": True, "check": _no_check, "lives": "scene", "step_input": None,
          "gradient": _param_gradient, "tangents": _seed_param, "direction": _no_direction,
          "collect": _first}

KINDS: dict[str, Kind] = {
    "x0": Kind(**_START, match=_fixed("state.x0"), forms=("state.x0",),
               offered=_with_particles("state.x0"),
               read=lambda scene, key: initial_state(scene)[0], write=_not_in_scene, lives="x0",
               gradient=lambda key, adj, scene: adj.x, tangents=_seed_start("x"),
               direction=_direction_of("x"), collect=_first),
    "v0": Kind(**_START, match=_fixed("state.v0"), forms=("state.v0",),
               offered=_with_particles("state.v0"),
               read=lambda scene, key: initial_state(scene)[1], write=_not_in_scene, lives="v0",
               gradient=lambda key, adj, scene: adj.v, tangents=_seed_start("v"),
               direction=_direction_of("v"), collect=_first),
    "velocity": Kind(
        **_START, match=_fixed("initial.velocity"), forms=("initial.velocity",),
        offered=_with_particles("initial.velocity"),
        **_scene_value(lambda s: np.asarray(s.initial.velocity, float),
                       lambda s, v: replace(s, initial=replace(
                           s.initial, velocity=tuple(map(float, v))))),
        lives="scene", gradient=lambda key, adj, scene: adj.v.sum(axis=0),
        tangents=_seed_velocity, direction=_no_direction, collect=np.array),
    "dt": Kind(forms=("dt",), match=_fixed("dt"), listed=True, offered=_always("dt"),
               check=_no_check,
               **_scene_value(lambda s: s.dt, lambda s, v: replace(s, dt=float(v))),
               lives="scene", role="step", step_input=lambda key: "dt",
               gradient=lambda key, adj, scene: adj.dt, tangents=_seed_scalar("dt"),
               direction=_no_direction, collect=_first, density=None, partial=None),
    "damping": Kind(
        forms=("integrator.damping",), match=_fixed("integrator.damping"), listed=True,
        offered=damping_keys,
        check=_no_check,
        **_scene_value(lambda s: s.integrator.damping,
                       lambda s, v: replace(s, integrator=replace(s.integrator,
                                                                  damping=float(v)))),
        lives="scene", role="step", step_input=_step_input_name,
        gradient=lambda key, adj, scene: adj.damping, tangents=_seed_scalar("damping"),
        direction=_no_direction, collect=_first, density=None, partial=None),
    "mass": Kind(forms=("particles.mass",), match=_fixed("particles.mass"), listed=True,
                 offered=_with_particles("particles.mass"),
                 check=_check_mass, read=_read_mass, write=_write_mass, lives="scene",
                 role="mass", step_input=None, gradient=_mass_gradient, tangents=_seed_mass,
                 direction=_mass_direction, collect=_first, density=None, partial=None),
    "energy": Kind(**_PARAM, forms=("energy.<i>.params.<name>", "energy.<i>.params.<name>[A:B]"),
                   match=_match_energy,
                   offered=energy_keys,
                   read=_read_energy, write=_write_energy, role="energy",
                   density=_energy_density, partial=_param_partial),
    "step": Kind(**{**_PARAM, "step_input": _step_input_name},
                 forms=("step_kernels.params.<name>",), match=_param_of("step_kernels"),
                 offered=step_keys,
                 read=lambda scene, key: float(step_values(scene)[key.name]),
                 write=lambda scene, key, value: replace(
                     scene, step_kernels=_with_param(scene.step_kernels, key, value)),
                 role="step", density=None, partial=None),
    "thermostat": Kind(
        **{**_PARAM, "step_input": _step_input_name}, forms=THERMOSTAT_KEYS,
        offered=thermostat_keys,
        match=_match_thermostat,
        read=lambda scene, key: float(getattr(scene.integrator, key.name)),
        write=lambda scene, key, value: replace(
            scene, integrator=replace(scene.integrator, **{key.name: float(value)})),
        role="step", density=_temperature_density,
        partial=_temperature_partial),
    "objective": Kind(**_PARAM, forms=("objective.params.<name>",), match=_param_of("objective"),
                      offered=objective_keys,
                      read=lambda scene, key: float(scene.objective.params[key.name]),
                      write=lambda scene, key, value: replace(
                          scene, objective=_with_param(scene.objective, key, value)),
                      role="objective", density=_no_density, partial=_param_partial),
    FIELD: Kind(forms=("fields.<name>",), match=_match_field, listed=False,
                offered=lambda scene: [], check=_check_field,
                  read=_read_field, write=_not_in_scene, lives="fields", role="field",
                  step_input=None, gradient=lambda key, adj, scene: adj.fields[key.name],
                  tangents=_seed_field,
                  direction=lambda key, scene, tangent, fields: fields[key.name],
                  collect=_first, density=None, partial=None),
    GRID: Kind(forms=("state.<field>",), match=_match_grid, listed=True,
               offered=lambda scene: [f"state.{n}" for n in grid_field_names(scene.grids)],
               check=_check_field, read=_read_field, write=_not_in_scene, lives="fields",
               role="field", step_input=None,
               gradient=lambda key, adj, scene: adj.fields[key.name], tangents=_seed_field,
               direction=lambda key, scene, tangent, fields: fields[key.name],
               collect=_first, density=None, partial=None),
}


def known_keys(scene: Scene) -> list[str]:
    """The scene's KEYs, kind by kind in the table's order, fields.<name> aside (those
    exist once the kernel modules ran)."""
    return [text for spec in KINDS.values() for text in spec.offered(scene)]


_bad = [f"{kind}: role {k.role!r}" for kind, k in KINDS.items() if k.role not in ROLES]
if _bad or any(k.lives not in ("scene", "x0", "v0", "fields") for k in KINDS.values()):
    raise TypeError(f"simrun.keys.KINDS: unknown role or place in {_bad or KINDS}")
