"""Shared check of the adjoint's two execution policies (tests of integrated and NVT scenes),
and the reverse step's replay as a forward step."""

from __future__ import annotations

import numpy as np

from simrun.adjoint.policy import execution
from simrun.jobs.grad import scene_gradient


def assert_chained_equals_one_by_one(scene, keys: list[str], checkpoints: int) -> None:
    """The reverse steps as native chains (and the schedule as native programs) and the
    interpreted policy's same launches one by one from Python: the same bits."""
    native = scene_gradient(scene, keys, threads=1, checkpoints=checkpoints)
    with execution(native=False):
        one_by_one = scene_gradient(scene, keys, threads=1, checkpoints=checkpoints)
    assert native.objective == one_by_one.objective
    for key in keys:
        np.testing.assert_array_equal(native.gradients[key], one_by_one.gradients[key],
                                      err_msg=key)


def advance_by_replay(traj, state, k: int):
    """Step k by the launches the reverse step replays (the update kernels' twins reading
    their gradient slot from fields of their own), from Python, by a walk over the
    trajectory's step program: a check that they are `run`'s step."""
    from simrun.stepper.program import CONTROLLER, FORCES, NEIGHBORS
    from simrun.stepper.state import State

    system = traj.system
    traj._load(state)  # the state's -F in the first slot: its carried forces
    for node in traj.program:
        if node.kind == CONTROLLER:
            system.control(k)
        elif node.kind == NEIGHBORS:
            system.refresh_neighbors()
        elif node.kind == FORCES and not node.carried:
            potential, f = system.forces()
            traj.slots[node.slot].from_numpy(np.negative(f))  # the bits x.grad holds
        for bound in traj.made.get(id(node), ()):
            with traj.compiled_as_run(bound):
                bound()
    x, v = system.get_state()  # the last forces are at x_(k+1): the state's
    return State(k + 1, x, v, f, potential, traj._fields())


def reverse_step_chains(traj) -> bool:
    """Whether every launch of the trajectory's reverse step chains natively (no silent
    fallback to Python calls)."""
    from simrun.adjoint.reverse_step import ReverseStep
    from simrun.stepper.launches import chains

    return all(map(chains, ReverseStep(traj).backward))
