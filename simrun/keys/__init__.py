"""KEYs: the quantities `simrun grad --wrt`, `optimize.parameters` and the ensemble method
differentiate or tune (scene paths in the `--set` grammar, and the reserved `state.x0`,
`state.v0` and `fields.<name>`).

A KEY is parsed once per job into a `Key`; what its kind means is one entry of `KINDS`, the
only place that dispatches on a kind (as `lang/ir/ops.py` is for ops):

- grammar: `forms` (as `grad --help` lists them), `match` (the text's parts -> index, name),
  `listed` and `offered` (the KEYs of this kind a scene has, which `known_keys` lists in
  the table's order; fields are checked against the allocated fields later);
- read / write: the value in the scene, the scene with a new value (`lives`: where a new
  value goes: the scene, the start's x or v, or an allocated field; optimize's bounds and
  flat vector follow `read`'s shape);
- seed: `gradient` reads dJ/dKEY from the reverse sweep's adjoints; `role` says what the sweep
  must differentiate for it (an energy or objective parameter, a scalar input of the step,
  the masses, the start);
- tangent: `tangents` are forward mode's seeds (one per sweep), `direction` the array
  direction a forward result is along, `collect` the result from the sweeps' derivatives;
- ensemble: the per-frame series of the fluctuation formula, `density` (c: the canonical
  density's dependence) and `partial` (a: the observable's own derivative).

A new kind of KEY is one `Kind` in `KINDS` (every field is required: a missing one is a
TypeError at import) and, where it reads or writes a new part of the scene, its functions.
"""

from __future__ import annotations

import difflib
from dataclasses import replace

import numpy as np

from simrun.keys.kinds import FIELD, KINDS, ROLES, Key, Kind, known_keys
from simrun.keys.known import FIXED_KEYS, THERMOSTAT_FLOATS, THERMOSTAT_KEYS
from simrun.keys.limits import with_checked_values
from simrun.keys.pairs import normalise, pair_keys
from simrun.scene import Scene, SceneError
from simrun.scene.errors import MAX_SHOWN, shorten
from simrun.scene.load_terms import ENSEMBLE_BUILTINS
from simrun.stepper.thermostats import controller_conflict

__all__ = ["FIXED_KEYS", "KEY_KINDS", "KINDS", "ROLES", "THERMOSTAT_FLOATS", "THERMOSTAT_KEYS",
           "Key", "Kind", "check_field_keys", "energy_params", "field_key", "key_of", "known_keys",
           "normalise", "objective_params", "pair_keys", "pair_params", "parse_key", "parse_keys",
           "step_inputs", "value_of", "with_checked_values", "with_pair", "with_role",
           "with_value"]

FIELDS_HINT = "fields.<name> (a float field a kernel module's allocate hook makes)"
KEY_KINDS = tuple(form for kind in KINDS.values() for form in kind.forms)  # `grad --help`


def key_of(text: str) -> Key | None:
    """The Key a text's form makes (no check against a scene), or None: no kind matches."""
    parts = text.split(".")
    for kind, spec in KINDS.items():
        found = spec.match(parts)
        if found is not None:
            return Key(text, kind, *found)
    return None


def parse_key(scene: Scene, text: str) -> Key:
    """A --wrt KEY, or SceneError (exit 2) with the keys that would work. `fields.<name>`
    is checked against the allocated fields later (`check_field_keys`): they exist only
    once the kernel modules have run."""
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
    key = key_of(text)
    if key is not None and not key.spec.listed:
        key.spec.check(scene, key)
        return key
    known = known_keys(scene)
    if text not in known and normalise(scene, text) in known:
        raise SceneError(f"--wrt {shorten(text)}: write this KEY as {normalise(scene, text)} "
                         "(the pair in the scene's order of species, joined by ':', as "
                         "gradients.json and the CSV columns name it).")
    if key is None or text not in known:
        close = difflib.get_close_matches(text, known, n=3) if len(text) <= MAX_SHOWN else []
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        more = f", {FIELDS_HINT}" if scene.step_kernels is not None or \
            scene.controller is not None else ""
        raise SceneError(f"--wrt {shorten(text)}: not a differentiable key of this scene.{hint} Its "
                         f"keys: {', '.join(known)}{more}.")
    key.spec.check(scene, key)
    return with_pair(scene, key)


def with_pair(scene: Scene, key: Key) -> Key:
    """The Key with its species pair resolved where it is a species kernel's per-pair
    parameter (simrun/keys/pairs.py: which entries of the (types x types) field it is)."""
    found = pair_keys(scene).get(key.text)
    if found is None:
        return key
    index, name, pair = found
    return replace(key, index=index, name=name, per_pair=True, pair=pair)


def field_key(name: str) -> Key:
    """The KEY of an allocated field by its name (checked by `check_field_keys`)."""
    return Key(f"fields.{name}", FIELD, name=name)


def parse_keys(scene: Scene, keys: list[str | Key] | tuple) -> list[Key]:
    """Each KEY parsed (`parse_key`); a Key already parsed is kept, so a job parses once."""
    return [k if isinstance(k, Key) else parse_key(scene, k) for k in keys]


def check_field_keys(keys: list[Key], fields: dict) -> None:
    """Each fields.<name> KEY names a float field the kernel modules allocated."""
    names = sorted(n for n, f in fields.items() if f.dtype.is_float)
    for key in keys:
        if key.spec.lives == "fields" and key.name not in names:
            close = difflib.get_close_matches(key.name, names, n=3) \
                if len(key.name) <= MAX_SHOWN else []
            hint = f" Did you mean {' or '.join('fields.' + c for c in close)}?" if close else ""
            raise SceneError(f"--wrt {shorten(key.text)}: no kernel module of this scene allocates a "
                             f"float field '{shorten(key.name)}'.{hint} Its fields: "
                             f"{', '.join('fields.' + n for n in names) or 'none'}.")


# ------------------------------------------------------------------ the table, applied
def value_of(scene: Scene, key: Key) -> np.ndarray | float:
    """The KEY's value in the scene (SceneError for a field: the scene has none)."""
    return key.spec.read(scene, key)


def with_value(scene: Scene, key: Key, value) -> Scene:
    """The scene with one key's value replaced (state.x0/v0 and fields are not scene values)."""
    return key.spec.write(scene, key, value)


def with_role(keys: list[Key], *roles: str) -> list[Key]:
    """The KEYs whose sweep needs one of `roles` (ROLES: e.g. the energies' parameters)."""
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"no KEY role {sorted(unknown)}; roles: {', '.join(ROLES)}")
    return [k for k in keys if k.spec.role in roles]


def energy_params(keys: list[Key], pairs: bool = True) -> dict[str, tuple[int, str]]:
    """energy.<i>.params.<name> KEY -> (term index, parameter as the term's evaluators name
    it: `Key.term_param`, epsilon[A:B] for one species pair); `pairs=False` leaves the
    per-pair KEYs out (`pair_params` has them)."""
    return {k.text: (k.index, k.term_param) for k in with_role(keys, "energy")
            if pairs or not k.per_pair}


def pair_params(keys: list[Key]) -> dict[str, tuple[int, str, tuple[int, int] | None]]:
    """Per-pair KEY -> (term index, parameter, pair; None: the number filling every pair)."""
    return {k.text: (k.index, k.name, k.pair) for k in keys if k.per_pair}


def objective_params(keys: list[Key]) -> dict[str, str]:
    """objective.params.<name> KEY -> the parameter's name."""
    return {k.text: k.name for k in with_role(keys, "objective")}


def step_inputs(keys: list[Key]) -> dict[str, str]:
    """KEY -> the step's scalar input it is (dt, the damping, a thermostat's or a step
    kernel's parameter)."""
    return {k.text: k.spec.step_input(k) for k in keys if k.spec.step_input is not None}
