"""The gradients of `simrun grad`: a scene's objective differentiated with respect to its
KEYs by reverse mode through the whole trajectory (binomial checkpoints) or by forward mode
(tangents, with each KEY's sensitivity horizon); J alone for finite differences
(`objective_value`, grad_check.py). The job that writes a folder is grad_folder.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simrun.adjoint.kernel_state import Tangent
from simrun.adjoint.model import DiffModel
from simrun.adjoint.tangent import kernel_tangent_sweep
from simrun.adjoint.trajectory import Trajectory
from simrun.jobs.reuse import TrajectoryCache
from simrun.keys import (
    Key,
    check_field_keys,
    energy_params,
    field_key,
    objective_params,
    pair_params,
    parse_keys,
    step_inputs,
    with_role,
)
from simrun.lang.api import runtime
from simrun.scene import Scene, SceneError, initial_state

Progress = Callable[[str, int, int], None]


@dataclass
class GradResult:
    objective: float
    gradients: dict[str, Any]  # KEY -> float or ndarray
    steps: int
    snapshots: int
    advances: int
    recompute_factor: float
    stored_bytes: int
    threads: int | None
    seconds: dict[str, float] = field(default_factory=dict)
    check: dict[str, Any] | None = None
    mode: str = "reverse"
    directions: dict[str, np.ndarray] = field(default_factory=dict)  # forward: array KEYs
    horizon: dict[str, list] = field(default_factory=dict)  # forward: (step, J(t), dJ(t))
    adjoint_horizon: list = field(default_factory=list)  # reverse, at: mean (trajectory.py)
    field_values: dict[str, np.ndarray] = field(default_factory=dict)  # fields.<name> at start
    deterministic: bool = True  # float scatters in one fixed order (ti.init(deterministic))
    keys: list[Key] = field(default_factory=list)  # the KEYs as parsed, in `gradients`' order


STATE_OVERHEAD = 1024  # a stored state's Python objects: the State, three array headers, its
#                        entry on the schedule's stack (~800 bytes measured, bench/README.md)


def _state_bytes(scene: Scene, state=None, carried=None) -> int:
    """Bytes of one stored state: x, v, F, and the allocated fields of step-kernel scenes
    (those of `carried` where given: the fields a step writes, less the scratch ones)."""
    p = scene.particles
    fields = sum(a.nbytes for n, a in getattr(state, "fields", {}).items()
                 if carried is None or n in carried)
    return 3 * p.count * p.dim * (4 if scene.precision == "f32" else 8) + fields


def snapshots_for(scene: Scene, steps: int, checkpoints: int | None, memory: int | None,
                  state=None, carried=None) -> int:
    """Stored states: --checkpoints, or as many as --memory (default: a quarter of the free
    memory) holds, a state counting its allocated fields where `state` (the first) shows
    them (only those named in `carried`, where given); never more than the steps need."""
    if checkpoints is None:
        if memory is None:
            memory = _available_memory() // 4
        checkpoints = max(memory // (_state_bytes(scene, state, carried) + STATE_OVERHEAD), 0)
    return int(min(checkpoints, max(steps - 1, 0)))


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 30


def _trajectory(scene: Scene, keys: list[Key], threads: int | None, rest: np.ndarray,
                progress: Progress | None = None) -> Trajectory:
    """The DiffModel and the sweep for this scene: the engine's derivative of `run`'s step
    (its controller, its step kernels or the integrator's updates, the walls)."""
    model = DiffModel(scene, rest, energy_params(keys, pairs=False), objective_params(keys),
                      threads, mass_gradient=bool(with_role(keys, "mass")),
                      pair_keys=pair_params(keys))
    check_field_keys(keys, model.system.extra)
    return Trajectory(model, step_inputs(keys), progress)


def _start(scene: Scene, shifts: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The scene's start, moved by `shifts` of state.x0 / state.v0 (added, so that they
    compose with a changed initial.velocity)."""
    x0, v0 = initial_state(scene)
    return x0 + shifts.get("state.x0", 0.0), v0 + shifts.get("state.v0", 0.0)


def _begin(traj: Trajectory, x0: np.ndarray, v0: np.ndarray,
           shifts: dict[str, np.ndarray], fields: dict[str, np.ndarray] | None = None):
    """The first state; `fields` ({name: array}) replace the allocated fields' start values
    and `fields.<name>` shifts move them."""
    unknown = sorted(set(fields or {}) - set(traj.system.extra))
    if unknown:
        check_field_keys([field_key(unknown[0])], traj.system.extra)
    return traj.start(x0, v0, {k.split(".", 1)[1]: d for k, d in shifts.items()
                               if k.startswith("fields.") or (k.startswith("state.") and k
                                                              not in ("state.x0", "state.v0"))},
                      fields)


def objective_value(scene: Scene, steps: int, threads: int | None = None,
                    shifts: dict[str, np.ndarray] | None = None,
                    fields: dict[str, np.ndarray] | None = None) -> float:
    """J of the scene's trajectory (the forward sweep only), e.g. for finite differences;
    `fields` start the allocated fields from these values (e.g. trained ones)."""
    shifts = shifts or {}
    x0, v0 = _start(scene, shifts)
    rest = initial_state(scene)[0]  # state.x0 moves the start, not the meshes' rest shape
    traj = _trajectory(scene, [], threads, rest)
    return traj.objective(_begin(traj, x0, v0, shifts, fields), steps)


def check_objective(scene: Scene, wrt: list[str | Key], threads: int | None = None) -> float:
    """`simrun check`: the KEYs parse, the objective (and its kernel) compiles, and its value
    at step 0 is finite; returns that value."""
    keys = parse_keys(scene, wrt)
    x0, v0 = _start(scene, {})
    traj = _trajectory(scene, keys, threads, x0)
    state = traj.start(x0, v0)
    value = traj.model.objective.value(state.x, state.v, state.potential)
    if not np.isfinite(value):
        raise SceneError(f"{scene.objective.where}: the objective is {value} at step 0; check "
                         "its kernel and the scene's start")
    return value


def scene_gradient(scene: Scene, wrt: list[str | Key], *, steps: int | None = None,
                   checkpoints: int | None = None, memory: int | None = None,
                   threads: int | None = None, progress: Progress | None = None,
                   start: tuple[np.ndarray, np.ndarray] | None = None,
                   fields: dict[str, np.ndarray] | None = None,
                   cache: TrajectoryCache | None = None,
                   announce: Callable[[int], None] | None = None) -> GradResult:
    """dJ/dKEY for each KEY of `wrt`, texts or Keys already parsed (SceneError for an
    unknown or non-differentiable KEY).

    `start` = (x0, v0) replaces the scene's start (state.x0 / state.v0 are not scene values:
    `simrun optimize` moves them); meshes keep the scene's rest shape. `fields` ({name:
    array}) start allocated fields from other values (fields.<name> are not scene values
    either). `cache` keeps the trajectory for the next gradient of the same scene object.
    The stored states are sized here, where the allocated fields' bytes are known
    (`snapshots_for`); `announce(snapshots)` hears the count before the sweeps start."""
    keys = parse_keys(scene, wrt)
    steps = scene.steps if steps is None else steps
    t0 = time.perf_counter()
    x0, v0 = _start(scene, {})
    if cache is None:
        traj = _trajectory(scene, keys, threads, x0, progress)
    else:
        traj = cache.get(scene, (tuple(k.text for k in keys), threads),
                         lambda: _trajectory(scene, keys, threads, x0))
        traj.progress = progress or (lambda *_: None)
    state0 = _begin(traj, *(start if start is not None else (x0, v0)), {}, fields)
    traj.check_scratch_values(state0)
    snapshots = snapshots_for(scene, steps, checkpoints, memory, state0, traj.moving)
    if announce is not None:
        announce(snapshots)
    traj.need_energy_grads = bool(with_role(keys, "mass", "energy"))
    t1 = time.perf_counter()
    value, adj, sched = traj.gradient(state0, steps, snapshots)
    t2 = time.perf_counter()
    grads = {k.text: k.spec.gradient(k, adj, scene) for k in keys}
    if any(not np.all(np.isfinite(g)) for g in grads.values()):
        bad = [k for k, g in grads.items() if not np.all(np.isfinite(g))]
        raise FloatingPointError(f"the gradient with respect to {', '.join(bad)} is not finite "
                                 "(NaN or Inf in the reverse sweep): shorten the horizon "
                                 "(--steps) or check the objective")
    return GradResult(value, grads, steps, snapshots, sched.advances, sched.recompute_factor,
                      sched.peak_stored * _state_bytes(scene, state0, traj.moving),
                      _threads(threads), {"setup": t1 - t0, "sweeps": t2 - t1},
                      field_values=_field_values(keys, state0),
                      adjoint_horizon=list(traj.adjoint_horizon), keys=keys)


def field_start_values(scene: Scene, names: list[str], threads: int | None = None
                       ) -> dict[str, np.ndarray]:
    """The start values of allocated fields (a module's seeded draw, or the scene's
    `fields:` files), as `simrun optimize` starts from them."""
    x0, _v0 = _start(scene, {})
    keys = parse_keys(scene, [f"fields.{n}" for n in names])
    system = _trajectory(scene, keys, threads, x0).model.system
    return {n: np.asarray(system.extra[n].to_numpy(), float) for n in names}


def _threads(threads: int | None) -> int:
    """The thread count the engine ran with (ti.init's default when none was given)."""
    return runtime().num_threads if threads is None else threads


def _field_values(keys: list[Key], state0) -> dict[str, np.ndarray]:
    return {k.text: np.asarray(state0.fields[k.name], float)
            for k in with_role(keys, "field")}


def forward_gradient(scene: Scene, wrt: list[str | Key], *, steps: int | None = None,
                     threads: int | None = None, progress: Progress | None = None,
                     seed: int = 0, start: tuple[np.ndarray, np.ndarray] | None = None,
                     fields: dict[str, np.ndarray] | None = None) -> GradResult:
    """Forward mode (tangents): one sweep per scalar KEY (per component of initial.velocity),
    one along a random unit direction for arrays; also each KEY's sensitivity horizon
    dJ(t)/dp at the scene's frame cadence."""
    keys = parse_keys(scene, wrt)
    steps = scene.steps if steps is None else steps
    t0 = time.perf_counter()
    x0, v0 = _start(scene, {})
    traj = _trajectory(scene, keys, threads, x0, progress)
    state0 = _begin(traj, *(start if start is not None else (x0, v0)), {}, fields)
    rng = np.random.default_rng(seed)
    grads, directions, horizon, value = {}, {}, {}, 0.0
    every = max(1, min(scene.outputs.every, steps))
    for key in keys:
        seeds = key.spec.tangents(key, scene, rng, state0)
        derivs = []
        for name, tan, fields_dot in seeds:
            value, dj, series = kernel_tangent_sweep(traj, state0, steps, Tangent(**tan),
                                                     fields_dot, every)
            derivs.append(dj)
            horizon[name] = series
        direction = key.spec.direction(key, scene, *seeds[0][1:])
        if direction is not None:
            directions[key.text] = direction
        grads[key.text] = key.spec.collect(derivs)
    return GradResult(value, grads, steps, 0, 0, 1.0, 0, _threads(threads),
                      {"forward": time.perf_counter() - t0}, mode="forward",
                      directions=directions, horizon=horizon,
                      field_values=_field_values(keys, state0), keys=keys)
