"""The scene's kernel parameters checked against their kernels before anything is
allocated or compiled: by System, and by batch's planner before a job is submitted; and
again (``broken_limit``) wherever a job moves a parameter of a scene already running (a fit
reweighting its frames to new parameters), where no load would check them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simrun.scene.schema import KernelRef
from simrun.stepper.binding import (
    broken_condition,
    check_limits,
    check_param_types,
    check_params,
    check_precision,
    find_kernel,
    load_module,
    parameter_names,
)
from simrun.stepper.pairs import check_pair_params


def validate_params(scene: Any, float_widths: bool = True, fp: Any = None) -> None:
    """The scene's params name arguments of their kernels, meet the modules' LIMITS and fit
    the arguments' types: before anything is allocated or compiled (and before a batch
    submits a job). ``float_widths=False`` leaves out the check of a float argument's range,
    whose width (a ``float`` annotation) is known only after ``ti.init`` of the scene;
    ``fp`` (the scene's float type, once known) refuses narrower float annotations."""
    context = limit_context(scene)
    for term in scene.energy:
        module = load_module(term.kernel.path)
        kernel = find_kernel(term.kernel, module)
        check_params(term.kernel, [*term.params, *term.pairs], parameter_names(kernel),
                     term.where, term.param_where)
        defaults = getattr(module, "DEFAULTS", {}).get(term.kernel.name, {})
        check_limits(term.kernel, module, {**defaults, **term.params}, term.where,
                     term.param_where, context)
        check_pair_params(term, module, kernel, {**defaults, **term.params}, context,
                          scene.precision)
        check_param_types(term.kernel, kernel, term.params, term.where, term.param_where,
                          float_widths)
        if fp is not None:
            check_precision(term.kernel, kernel, fp)
    for kernels in (scene.step_kernels, scene.controller):
        if kernels is not None:
            _validate_kernel_list(kernels, context, float_widths, fp)
    objective = scene.objective
    if objective is not None and objective.kernel is not None:
        module = load_module(objective.kernel.path)
        kernel = find_kernel(objective.kernel, module)
        check_params(objective.kernel, objective.params, parameter_names(kernel),
                     objective.where)
        defaults = getattr(module, "DEFAULTS", {}).get(objective.kernel.name, {})
        check_limits(objective.kernel, module, {**defaults, **objective.params},
                     objective.where, {}, context)


def _validate_kernel_list(sk: Any, context: dict[str, int], float_widths: bool,
                          fp: Any) -> None:
    found = [(ref, load_module(ref.path)) for ref in sk.kernels]
    kernels = [find_kernel(ref, module) for ref, module in found]
    accepted = {name for k in kernels for name in parameter_names(k)}
    check_params(sk.kernels[0], sk.params, accepted, sk.kernels[0].where, sk.param_where)
    for (ref, module), k in zip(found, kernels):
        defaults = getattr(module, "DEFAULTS", {}).get(ref.name, {})
        own = {n: v for n, v in sk.params.items() if n in parameter_names(k)}
        check_limits(ref, module, {**defaults, **own}, ref.where, sk.param_where, context)
        check_param_types(ref, k, own, ref.where, sk.param_where, float_widths)
        if fp is not None:
            check_precision(ref, k, fp)


def limit_context(scene: Any) -> dict[str, Any]:
    """What LIMITS may name besides a kernel's parameters: n, dim and, with a neighbour list,
    list_cutoff (pair kernels may not reach past the list) and its cutoff (a pair kernel's
    default)."""
    context: dict[str, Any] = {"n": scene.particles.count, "dim": scene.particles.dim}
    if scene.neighbors is not None:
        context.update(list_cutoff=scene.neighbors.cutoff, cutoff=scene.neighbors.cutoff)
    return context


@dataclass(frozen=True)
class BrokenLimit:
    """A LIMITS condition the scene's values break: of the kernel ``ref``, whose parameters
    are KEYs ``<part>.params.<name>``, at the values it names (for one species pair of a
    species kernel: ``pair``, its types' names)."""

    ref: KernelRef
    part: str  # energy.<i> | step_kernels | objective
    condition: str
    values: dict[str, Any]
    pair: tuple[str, str] | None = None


def broken_limit(scene: Any) -> BrokenLimit | None:
    """The first LIMITS condition the scene's kernel parameters break (each species pair's
    too), or None: the conditions of `validate_params`, for a scene made by moving KEYs."""
    context = limit_context(scene)
    for index, term in enumerate(scene.energy):
        module = load_module(term.kernel.path)
        scalars = {**getattr(module, "DEFAULTS", {}).get(term.kernel.name, {}), **term.params}
        pairs = [(i, j) for i in range(len(term.types)) for j in range(i, len(term.types))]
        for pair in [None, *pairs]:
            values = scalars if pair is None else \
                {**scalars, **{n: m[pair[0]][pair[1]] for n, m in term.pairs.items()}}
            found = broken_condition(module, term.kernel.name, values, context)
            if found is not None:
                names = None if pair is None else (term.types[pair[0]], term.types[pair[1]])
                return BrokenLimit(term.kernel, f"energy.{index}", *found, names)
    objective = scene.objective
    parts = [("step_kernels", scene.step_kernels.kernels if scene.step_kernels else (),
              scene.step_kernels.params if scene.step_kernels else {}),
             ("objective", [objective.kernel] if objective and objective.kernel else (),
              objective.params if objective else {})]
    for part, refs, params in parts:
        for ref in refs:
            module = load_module(ref.path)
            own = parameter_names(find_kernel(ref, module))
            values = {**getattr(module, "DEFAULTS", {}).get(ref.name, {}),
                      **{n: v for n, v in params.items() if n in own}}
            found = broken_condition(module, ref.name, values, context)
            if found is not None:
                return BrokenLimit(ref, part, *found)
    return None
