"""Energy parameters per species pair, as the fields a pair kernel binds by name.

A kernel that takes ``species`` (each particle's type index) reads its per-pair parameters
from (types x types) fields named after them (``epsilon[si, sj]``): a parameter the scene
gives per pair fills its field from the resolved matrix (scene/species.py: mixing already
applied), a single number (the scene's, the list's ``cutoff`` or the module's DEFAULTS)
fills every pair. Kernels without ``species`` are bound exactly as before, so single-species
scenes compile and run the same code.

A module's ``PAIR_CUTOFF`` (``{kernel: argument}``) names the field beyond whose value a
pair adds nothing (kernels/lj.py's ``cutoff``); ``list_cutoffs`` gives the neighbour list
those fields, so it holds each pair only within its own cutoff + skin.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from simrun.scene import SceneError
from simrun.scene.ranges import float_range
from simrun.scene.schema import EnergyTerm
from simrun.scene.species import type_order
from simrun.stepper.binding import check_limits, find_kernel, load_module, parameter_names

LIST_ARG = "neighbors"

SPECIES_ARG = "species"


def _arguments(kernel: Any) -> list[Any]:
    params = getattr(kernel, "params", None)
    return list(params()[0]) if callable(params) else []


def reads_pairs(kernel: Any) -> bool:
    """A pair kernel over species: it takes the ``species`` field."""
    return SPECIES_ARG in parameter_names(kernel)


def check_pair_params(term: EnergyTerm, module: ModuleType, kernel: Any,
                      scalars: Mapping[str, Any], context: Mapping[str, Any],
                      precision: str) -> None:
    """Per-pair parameters go to a species kernel's field arguments, fit the scene's float
    type, and meet the module's LIMITS for every pair (reported at that pair's value, or at
    ``mix:``)."""
    kinds = {arg.name: arg.kind for arg in _arguments(kernel)}
    for name in term.pairs:
        if not reads_pairs(kernel) or kinds.get(name) != "template":
            at = term.param_where.get(name, (term.where, term.where))[0]
            raise SceneError(f"{at}: parameter '{name}' is given per species pair, but kernel "
                             f"'{term.kernel.name}' ({term.kernel.path.name}) takes one number "
                             "for it. Use a kernel that reads parameters per pair (one that "
                             "takes 'species', e.g. kernels/lj.py:lj_species), or give one "
                             "number.")
    count = len(term.types)
    largest = float_range(precision)[1]
    for name, matrix in term.pairs.items():
        for (i, j), (_key, at) in term.pair_where[name].items():
            if abs(matrix[i][j]) > largest:
                raise SceneError(f"{at}: parameter '{name}' of the species pair "
                                 f"{term.types[i]},{term.types[j]} is {matrix[i][j]:g}, more "
                                 f"than a {precision} float holds ({largest:.3g}). Use a "
                                 "smaller value, or 'precision: f64'.")
    for i in range(count):
        for j in range(i, count):
            values = {**scalars, **{n: m[i][j] for n, m in term.pairs.items()}}
            places = {**term.param_where,
                      **{n: term.pair_where[n][(i, j)] for n in term.pairs}}
            try:
                check_limits(term.kernel, module, values, term.where, places, context)
            except SceneError as exc:
                raise SceneError(f"{exc} (This is the species pair {term.types[i]},"
                                 f"{term.types[j]}.)") from None


def pair_fields(system: Any, term: EnergyTerm) -> dict[str, Any]:
    """The (types x types) fields a species kernel's template arguments bind to."""
    module = load_module(term.kernel.path)
    kernel = find_kernel(term.kernel, module)
    if not reads_pairs(kernel):
        return {}
    defaults = getattr(module, "DEFAULTS", {}).get(term.kernel.name, {})
    count = max(1, len(type_order(system.scene.particles.species)))
    values = system.values()
    made: dict[str, Any] = {}
    for arg in _arguments(kernel):
        if arg.kind != "template" or arg.name == SPECIES_ARG:
            continue
        if arg.name in term.pairs:
            matrix = np.asarray(term.pairs[arg.name], dtype=float)
        else:
            value = term.params.get(arg.name, values.get(arg.name, defaults.get(arg.name)))
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue  # a field of the system (x, neighbors, ...) or the box flag
            matrix = np.full((count, count), float(value))
        field = system.ti.field(dtype=system.fp, shape=(count, count))
        field.from_numpy(np.ascontiguousarray(matrix, dtype=system.np_dtype))
        made[arg.name] = field
    return made


def list_cutoffs(system: Any) -> list[Any] | None:
    """The (types x types) fields that bound which pairs the neighbour list must hold: the
    ``PAIR_CUTOFF`` field of each energy term that reads the list. None (every pair to the
    list's cutoff + skin) for one type, for a term that reads the list without one, for any
    step, controller or objective kernel that reads the list, and where every pair's cutoff
    is the list's already."""
    scene = system.scene
    if len(type_order(scene.particles.species)) < 2:
        return None
    found = []
    for index, term in enumerate(scene.energy):
        module = load_module(term.kernel.path)
        if LIST_ARG not in parameter_names(find_kernel(term.kernel, module)):
            continue
        name = getattr(module, "PAIR_CUTOFF", {}).get(term.kernel.name)
        field = system.pair_fields(index).get(name)
        if field is None:
            return None
        found.append(field)
    others = [*(scene.step_kernels.kernels if scene.step_kernels else ()),
              *(scene.controller.kernels if scene.controller else ()),
              *([scene.objective.kernel] if scene.objective and scene.objective.kernel else [])]
    if not found or any(LIST_ARG in parameter_names(find_kernel(ref, load_module(ref.path)))
                        for ref in others):
        return None
    largest = np.maximum.reduce([f.to_numpy() for f in found])
    return None if (largest >= system.neighbor_list.cutoff).all() else found
