"""The step loop: output cadence, NaN watch, progress callbacks, flushing, resume.

``run_scene`` never prints; it reports progress through a callback and raises
``SimulationError`` (NaN/Inf, naming the step), ``SceneError`` (bad input), ``OutputError``
(the outputs cannot be written, e.g. a full disk) or ``KeyboardInterrupt``. Whatever happens,
the files written so far are flushed and valid, and ``run.json`` records the exit status.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simrun.outputs import Frame, OutputError, RunWriter
from simrun.scene import Scene, initial_state
from simrun.stepper import files
from simrun.stepper.integrators import State, kinetic_energy, make_step
from simrun.stepper.pressure import pressure_record
from simrun.stepper.system import System

ProgressFn = Callable[[int, int], None]
_sum = np.add.reduce  # each step: the method lookup of ndarray.sum costs more than the sum


class SimulationError(Exception):
    """The simulation itself failed (e.g. NaN); ``step`` is the first bad step."""

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step


@dataclass
class RunResult:
    out_dir: Path
    status: str
    start_step: int
    steps_done: int
    steps_total: int
    wall_s: float
    energy_first: float | None
    energy_last: float | None
    setup_s: float = 0.0  # building fields and compiling kernels, part of wall_s
    dissipation: str | None = None  # what changes the total energy on purpose (None: kept)

    @property
    def drift(self) -> float | None:
        """Relative total-energy change from the first to the last saved frame."""
        if self.energy_first is None or self.energy_last is None:
            return None
        return (self.energy_last - self.energy_first) / max(abs(self.energy_first), 1e-300)


def dissipation(scene: Scene) -> str | None:
    """What makes the scene's total energy change on purpose: its own ``step kernels`` (e.g.
    MPM's grid damping) or ``damping``; None when the dynamics should conserve it."""
    if scene.step_kernels is not None:
        return "step kernels"
    return "damping" if scene.integrator.damping != 0 else None


def check_finite(state: State, scene: Scene) -> None:
    """Raise SimulationError naming the step if positions, velocities or U are not finite."""
    total = float(_sum(state.x, None)) + float(_sum(state.v, None))
    if math.isfinite(total + float(_sum(state.f, None)) + state.potential):
        return  # fast path (an f32 sum may overflow: then the code below finds nothing wrong)
    if state.step == 0:
        fix = ("The initial state is already bad: check the energy terms' params (e.g. a "
               "softening that is not positive) and the initial positions (e.g. two particles "
               "at the same place).")
    else:
        fix = (f"The simulation is unstable: try a smaller dt (now {scene.dt:g}) or softer "
               "energy parameters.")
    where = f"step {state.step} (t = {state.step * scene.dt:.6g})"
    for what, arr in (("positions", state.x), ("velocities", state.v), ("forces", state.f)):
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            first = int(np.argmax(bad))
            raise SimulationError(
                f"{where}: {what} became NaN or infinite (first at particle {first}, "
                f"{int(bad.sum())} particles in all). {fix}", state.step)
    if math.isfinite(state.potential):
        return  # only the check's sums overflowed
    raise SimulationError(f"{where}: the potential energy became {state.potential}. {fix}",
                          state.step)


def make_frame(state: State, system: System, scene: Scene) -> Frame:
    return Frame(step=state.step, time=state.step * scene.dt, x=state.x, v=state.v,
                 f=state.f if scene.outputs.forces else None,
                 kinetic=kinetic_energy(state.v, system.masses), potential=state.potential,
                 state={"x0": system.x0_np, **system.extra_state()})


def prepare(scene: Scene, checkpoint: dict | None, threads: int | None) -> tuple[System, State]:
    """Build the system and the state at step 0 or at the checkpoint; compiles the kernels.

    Raises SceneError or a CompileError for bad kernels and SimulationError when the first
    forces are not finite; nothing is written."""
    if checkpoint is None:
        x0, v0 = initial_state(scene)
        system = System(scene, x0, threads)
        step, x, v = 0, x0, v0
    else:
        system = System(scene, checkpoint["x0"], threads)
        step, x, v = int(checkpoint["step"]), checkpoint["x"], checkpoint["v"]
        system.load_extra_state(checkpoint)
    system.set_state(x, v)
    system.compile_step_kernels()  # a bad step kernel fails here, before anything is written
    x, v = system.get_state()
    potential, f = system.forces()
    state = State(step, x, v, f, potential)
    check_finite(state, scene)
    return system, state


class _Clock:
    """Time-based throttles for flushing (adaptive) and progress reports."""

    def __init__(self, flush_interval: float) -> None:
        self.flush_interval = flush_interval
        self.next_flush = time.perf_counter() + flush_interval
        self.next_progress = 0.0

    def flush_due(self) -> bool:
        return time.perf_counter() >= self.next_flush

    def flushed(self, took: float) -> None:
        self.next_flush = time.perf_counter() + max(self.flush_interval, 10 * took)

    def progress_due(self) -> bool:
        now = time.perf_counter()
        if now >= self.next_progress:
            self.next_progress = now + 0.1
            return True
        return False


def loop(scene: Scene, system: System, state: State, writer: RunWriter,
         progress: ProgressFn | None, flush_interval: float) -> None:
    step_fn, every, total = make_step(scene, system), scene.outputs.every, scene.steps
    clock = _Clock(flush_interval)
    try:
        while state.step < total:
            step_fn(state)
            state.step += 1
            check_finite(state, scene)
            if state.step % every == 0 or state.step == total:
                writer.add(make_frame(state, system, scene))
                if clock.flush_due():
                    started = time.perf_counter()
                    writer.flush()
                    clock.flushed(time.perf_counter() - started)
            if progress is not None and (state.step == total or clock.progress_due()):
                progress(state.step, total)
    finally:
        if progress is not None and state.step < total:  # stopped early: show where
            progress(state.step, total)


def _open(target: Path, scene: Scene, system: System, step: int, checkpoint: dict | None
          ) -> tuple[RunWriter, dict]:
    """The run's writer (holding a resumed run's frames) and its run.json info, once the
    resolved scene and a 'running' run.json are written."""
    writer = RunWriter(target, files.writer_options(scene, system.x0_np))
    if checkpoint is not None:
        files.reload_frames(writer, target, step, scene.outputs.every)
    try:
        return writer, files.start(target, scene, checkpoint)
    except OSError as exc:
        problem = files.write_failure(exc, step, None)
        raise OutputError(files.write_failure_advice(problem, scene, target, False)) from None


def run_scene(scene: Scene, out_dir: str | os.PathLike[str] | Callable[[], Path], *,
              resume: bool = False, progress: ProgressFn | None = None,
              threads: int | None = None, flush_interval: float = 1.0) -> RunResult:
    """Run ``scene`` into ``out_dir`` (created); with ``resume``, continue the run there.

    ``out_dir`` may be a function that creates and returns the folder: it is called only
    once the kernels have compiled and the first forces are finite, so a scene with a bad
    kernel writes nothing (with ``resume`` the folder is needed first, to read the state).
    """
    started = time.perf_counter()
    where = out_dir if callable(out_dir) else (lambda: Path(out_dir))
    target = Path(where()) if resume else None
    checkpoint = files.load_checkpoint(target, scene) if target is not None else None
    system, state = prepare(scene, checkpoint, threads)
    pressure_start = pressure_record(system, state.step, state.v)
    setup_s = round(time.perf_counter() - started, 4)
    shapes = system.render_shapes()
    target = target if target is not None else Path(where())
    writer, info = _open(target, scene, system, state.step, checkpoint)
    info["timings"]["setup_s"] = setup_s
    if shapes:
        info["shapes"] = shapes  # what the pictures draw behind the particles
    status, wrote = "error", True
    try:
        if checkpoint is None:
            writer.add(make_frame(state, system, scene))
        writer.flush()
        loop(scene, system, state, writer, progress, flush_interval)
        writer.flush()
        if pressure_start is not None:  # by autodiff of U in the box scale (pressure.py)
            info["pressure"] = [pressure_start, pressure_record(system, state.step, state.v)]
        status = "ok"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except SimulationError as exc:
        status, info["error"] = "failed", str(exc)
        raise
    except OSError as exc:  # writing the outputs: the disk is full, the folder went away
        wrote, info["error"] = False, files.write_failure(exc, state.step, writer.saved_step)
        raise OutputError(files.write_failure_advice(info["error"], scene, target)) from None
    except Exception as exc:  # e.g. a kernel that compiles only when first launched
        status, info["error"] = "error", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        files.finish(target, info, status, writer, state, started, flush=wrote)
    energies = writer.energies
    return RunResult(target, status, info.get("resumed_from_step", 0), state.step, scene.steps,
                     time.perf_counter() - started,
                     energies[0][2] + energies[0][3] if energies else None,
                     energies[-1][2] + energies[-1][3] if energies else None, setup_s,
                     dissipation(scene))
