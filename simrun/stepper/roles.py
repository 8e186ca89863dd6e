"""Each kernel does its role's job, read from its IR: an energy kernel adds to U, an objective
kernel to L, a step kernel writes the state, a controller writes what another kernel reads.

A kernel that does not runs without complaint and gives a silently wrong answer (an energy
of 0, particles flying free, a J of 0 with zero gradients), so each is refused at its own
source line, before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from simrun.lang.autodiff.analysis import kernel_access
from simrun.scene import SceneError
from simrun.stepper.binding import BoundKernel, parameter_names


def _access(bound: BoundKernel) -> Any | None:
    """The fields the kernel reads and writes (None for one that brings its own gradient,
    or a Taichi kernel: no IR to read)."""
    lower = getattr(bound.kernel, "lower", None)
    return None if lower is None else kernel_access(lower(bound.args)[0])


def _line(bound: BoundKernel) -> str:
    """file:line of the kernel's ``def`` (its IR's span)."""
    span = bound.kernel.lower(bound.args)[0].span
    return f"{span.file}:{span.line}" if span is not None else str(bound.ref.path)


def require_accumulator(bound: BoundKernel, target: Any, role: str, name: str,
                        consequence: str) -> None:
    """An energy (``U``) or objective (``L``) kernel must write its 0-D target field."""
    access = _access(bound)
    if access is None or target in access.writes:
        return
    taken = name in parameter_names(bound.kernel)
    how = (f"It takes {name} but never writes it" if taken else
           f"It takes no argument '{name}': add '{name}: ti.template()'")
    raise SceneError(f"{_line(bound)}: {role} kernel '{bound.ref.name}' never adds to {name}, "
                     f"so {consequence}. {how}, and accumulate into it with "
                     f"'{name}[None] += ...' (the scene names this kernel at "
                     f"{bound.ref.where}).")


def check_roles(system: Any, objective_args: Iterable[str] = ()) -> None:
    """Energy terms add to U, step kernels write the state, controller kernels write a field
    another kernel reads (``objective_args``: the objective kernel's argument names)."""
    for bound in system.energy:
        require_accumulator(bound, system.U, "energy", "U",
                            "it adds no energy and no force: the particles move as if it "
                            "were not there")
    names = {id(f): n for n, f in system.values().items()}
    state = {id(system.x), id(system.v), *(id(f) for f in system.extra.values())}
    for bound in system.step_kernels:
        access = _access(bound)
        if access is None or state & {id(f) for f in access.writes}:
            continue
        written = sorted(names.get(id(f), "a local field") for f in access.writes)
        raise SceneError(f"{_line(bound)}: step kernel '{bound.ref.name}' writes "
                         f"{'only ' + ', '.join(written) if written else 'nothing'}: none of "
                         f"the state (x, v, or a field its module allocates), so it changes "
                         f"nothing a step sees. Write x, v or a module field in it, or "
                         f"remove it from the scene's step_kernels ({bound.ref.where}).")
    _check_controllers(system, names, set(objective_args))


def _check_controllers(system: Any, names: dict[int, str], objective_args: set[str]) -> None:
    """Each controller kernel writes x, v or a field another kernel (or the objective) reads."""
    accesses = {id(b): _access(b) for b in system.energy + system.step_kernels
                + system.controller}
    for bound in system.controller:
        access = accesses[id(bound)]
        if access is None:
            continue
        read = {id(system.x), id(system.v)} | {
            id(f) for other, acc in accesses.items() if other != id(bound) and acc is not None
            for f in acc.reads}
        written = {id(f) for f in access.writes}
        if written & read or {names.get(i) for i in written} & objective_args:
            continue
        shown = ", ".join(sorted(names.get(i, "a local field") for i in written)) or "nothing"
        raise SceneError(f"{_line(bound)}: controller kernel '{bound.ref.name}' writes "
                         f"{shown}, which no energy term, step kernel, other controller "
                         f"kernel or the objective reads, so it steers nothing. Read its "
                         f"output in the kernel it should drive, or remove it from the "
                         f"scene's controller ({bound.ref.where}).")
