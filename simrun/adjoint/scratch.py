"""The contract of scratch fields (KernelContext.scratch, kernels/__init__.py): each step
writes them before reading them, so a gradient's stored states leave them out
(Trajectory.moving). Broken, the reverse sweep would restore a state without them and give a
silently wrong gradient, so it is checked twice before one is taken: by the kernels' reads
and writes (which launch reads a scratch field first), and by value (which elements)."""

from __future__ import annotations

import numpy as np

from simrun.lang.autodiff.tape import access_of
from simrun.scene import SceneError
from simrun.stepper.binding import argument_line
from simrun.stepper.state import State


def _access(traj, bound):
    """The kernel's reads and writes as `run` compiles it, or None where not known."""
    if getattr(bound.kernel, "prepare", None) is None:
        return None
    with traj.compiled_as_run(bound):
        return access_of(bound.kernel.prepare(bound.args, "primal")[0])


def check_order(traj) -> None:
    """A scratch field is written in each step (controller, then step kernels) before any
    launch reads it, and never read by an energy (forces at a stored state) or the objective
    (which the reverse sweep evaluates on stored states)."""
    system = traj.system
    scratch = {id(system.extra[n]): n for n in system.scratch}
    if not scratch:
        return
    objective = traj.model.objective.kernel
    never = [(b, "energy") for b in system.energy] + \
        [(b, "objective") for b in [objective] if b is not None]
    in_order = [(b, "controller") for b in system.controller] + \
        [(b, "step") for b in traj.twins]
    written: set = set()
    for bound, role in never + in_order:
        acc = _access(traj, bound)
        if acc is None:
            continue
        read = [scratch[id(f)] for f in acc.reads
                if id(f) in scratch and (role in ("energy", "objective")
                                         or id(f) not in written)]
        if read:
            ref, at = bound.ref, argument_line(bound.kernel, read[0])
            raise SceneError(
                f"{ref.where if ref else 'a step launch'}: {role} kernel "
                f"'{ref.name if ref else '?'}'{f' ({at})' if at else ''} reads field "
                f"'{read[0]}', which its module's allocate() marks scratch "
                "(ctx.scratch: each step writes it before reading it), but no earlier "
                "launch of the step has written it: a gradient, which stores no scratch "
                "field, would be wrong. Drop ctx.scratch(...) for this field, or clear it "
                "in a step kernel before it is read.")
        if role in ("controller", "step"):
            written |= {id(f) for f in acc.writes}


def check_values(traj, state: State) -> None:
    """Two steps: one from `state` gives the same bits with its float scratch fields NaN as
    with what the last step left in them, else some element is read before the step writes
    it. The system is then loaded back to `state`, where the sweeps start."""
    system = traj.system
    names = sorted(n for n in system.scratch if system.extra[n].dtype.is_float)
    if not names:
        return
    moving = traj.moving
    kept = traj.advance(state, state.step)
    for n in names:
        shape = system.extra[n].to_numpy().shape
        system.extra[n].from_numpy(np.full(shape, np.nan, system.np_dtype))
    try:
        poisoned = traj.advance(state, state.step)
        same = all(np.array_equal(a, b) for a, b in
                   [(kept.x, poisoned.x), (kept.v, poisoned.v)] +
                   [(kept.fields[n], poisoned.fields[n]) for n in moving])
    except FloatingPointError:  # the NaN reached x or v, which the sweep's watch refuses
        same = False
    traj._load(state)
    if not same:
        raise SceneError(
            f"{traj.scene.source}: the fields marked scratch ({', '.join(names)}: "
            "ctx.scratch in their module's allocate()) change a step's result when they "
            "start as NaN: a step kernel reads some of their elements before writing "
            "them, so they are state, and a gradient that does not store them would be "
            "wrong. Clear the whole field in a step kernel first, or drop ctx.scratch.")
