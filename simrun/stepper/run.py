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

from simrun.lang import guards
from simrun.outputs import Frame, RunWriter
from simrun.scene import Scene, SceneError, initial_state
from simrun.stepper import files, thermo
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.integrators import State, kinetic_energy
from simrun.stepper.pressure import measurable, pressure
from simrun.stepper.system import System
from simrun.stepper.thermostats import chain_energy, controller_conflict

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
    drift_check: thermo.DriftCheck | None = None  # from thermo.csv; None: not conservative
    neighbor_builds: int | None = None  # list builds while stepping (None: no list)

    @property
    def drift(self) -> float | None:
        """Relative total-energy change from the first to the last saved frame (None when
        the first total is zero: no scale to be relative to)."""
        if self.energy_first is None or self.energy_last is None or self.energy_first == 0:
            return None
        return (self.energy_last - self.energy_first) / abs(self.energy_first)


def dissipation(scene: Scene) -> str | None:
    """What makes the scene's total energy change on purpose: its own ``step kernels`` (e.g.
    MPM's grid damping) or ``damping``; None when the dynamics should conserve it."""
    if scene.step_kernels is not None:
        return "step kernels"
    if scene.controller is not None:
        return "a controller"
    if scene.integrator.thermostat:
        return f"{scene.integrator.type} thermostat"
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


@dataclass
class Stepping:
    """What advances the state, and what the thermo rows and frames need from it.

    ``advance(state, n, look)`` makes up to n steps and returns the steps made; it raises
    SimulationError at the first step whose state is not finite. ``state.step`` always
    follows; its x, v, f and potential only when ``look`` (the loop reads them: a frame, a
    thermo row, the end). A chunk that ends only to keep progress and Ctrl-C responsive
    skips the energies' forward launch (U) and the copies: with a step of ~0.1-0.3 s
    (10^5-10^6 LJ atoms) every chunk is one step, and these cost a third as much again."""

    advance: Callable[[State, int, bool], int]
    dof: thermo.Dof
    conserved: Callable[[float, float], float] | None = None  # Nosé-Hoover's, from K and U
    last_pressure: dict[str, float] | None = None  # the thermo row and run.json share it

    def pressure(self, system: System, state: State) -> dict[str, float] | None:
        """``{"step", "pressure"}`` at the state (taken once per step); None without a
        periodic box and an energy."""
        if not measurable(system):
            return None
        if self.last_pressure is None or self.last_pressure["step"] != state.step:
            self.last_pressure = {"step": state.step, "pressure": pressure(system, state.v)}
        return dict(self.last_pressure)

    @property
    def extra_columns(self) -> tuple[str, ...]:
        return ("conserved",) if self.conserved is not None else ()

    def saved(self) -> dict[str, np.ndarray]:
        return {"thermo_dof": np.int64(self.dof.count)}


def make_stepping(scene: Scene, system: System, state: State, checkpoint: dict | None
                  ) -> Stepping:
    """The steps (the field stepper's native chunks, integrators and thermostats alike) and the
    temperature's degrees of freedom: decided at step 0 and saved with each frame, so a
    resumed run keeps them."""
    if checkpoint is not None and "thermo_dof" in checkpoint:
        dof = thermo.Dof(int(checkpoint["thermo_dof"]), "as decided at step 0")
    else:
        dof = thermo.degrees_of_freedom(scene, state.f, state.x, state.potential,
                                        lambda shift: system.forces_moved(state.x, shift))
    conserved = None
    if scene.integrator.thermostat and scene.step_kernels is None:
        if controller_conflict(scene):
            raise SceneError(controller_conflict(scene))
        system.extra["nvt_dof"][None] = dof.count
        if checkpoint is None or "field:nvt_clock" not in checkpoint:  # else as saved
            system.extra["nvt_clock"][None] = state.step  # the step the noise is drawn at
        for name in ("xi", "vxi"):  # a chain saved before it was a field (older runs)
            if checkpoint is not None and f"thermostat:{name}" in checkpoint \
                    and f"field:nvt_{name}" not in checkpoint:
                system.extra[f"nvt_{name}"].from_numpy(np.asarray(
                    checkpoint[f"thermostat:{name}"], dtype=np.float64))
        if scene.integrator.type == "nose_hoover":
            def conserved(kinetic: float, potential: float) -> float:
                return kinetic + potential + chain_energy(scene, system.extra)
    return Stepping(_field_steps(FieldStepper(scene, system), scene), dof, conserved)


def _field_steps(stepper: FieldStepper, scene: Scene) -> Callable[[State, int], int]:
    def advance(state: State, count: int, look: bool = True) -> int:
        stepper.step_index = state.step
        done = stepper.advance(count, potential=look)
        state.step += done
        if look or stepper.not_finite():
            stepper.store(state)
        if stepper.not_finite():
            check_finite(state, scene)
        return done

    return advance


def make_frame(state: State, system: System, scene: Scene, stepping: Stepping) -> Frame:
    return Frame(step=state.step, time=state.step * scene.dt, x=state.x, v=state.v,
                 f=state.f if scene.outputs.forces else None,
                 kinetic=kinetic_energy(state.v, system.masses), potential=state.potential,
                 state={"x0": system.x0_np, **system.extra_state(), **stepping.saved()})


def record_thermo(writer: RunWriter, state: State, system: System, scene: Scene,
                  stepping: Stepping) -> None:
    """One thermo.csv row: energies, kinetic temperature, a thermostat's own columns, and
    the pressure of a periodic scene (by autodiff; it leaves the fields as they were)."""
    if writer.thermo is None:  # no energy outputs: nothing to compute
        return
    kinetic = kinetic_energy(state.v, system.masses)
    extra = (stepping.conserved(kinetic, state.potential),) \
        if stepping.conserved is not None else ()
    record = stepping.pressure(system, state)
    if record is not None:
        extra = (*extra, record["pressure"])
    writer.add_thermo(state.step, state.step * scene.dt, kinetic, state.potential,
                      thermo.temperature(kinetic, stepping.dof.count, scene.constants.boltz),
                      *extra)


def prepare(scene: Scene, checkpoint: dict | None, threads: int | None, debug: bool = False
            ) -> tuple[System, State]:
    """Build the system and the state at step 0 or at the checkpoint; compiles the kernels.

    Raises SceneError or a CompileError for bad kernels and SimulationError when the first
    forces are not finite; nothing is written."""
    if checkpoint is None:
        x0, v0 = initial_state(scene)
        system = System(scene, x0, threads, debug=debug)
        step, x, v = 0, x0, v0
    else:
        system = System(scene, checkpoint["x0"], threads, debug=debug)
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


def next_event(step: int, total: int, cadences: tuple[int, ...]) -> int:
    """The first step after `step` where the loop must look at the state: a multiple of any
    cadence (frames, thermo rows), or the last step."""
    return min([total] + [(step // c + 1) * c for c in cadences if c > 0])


class _ChunkSize:
    """Steps per native call: up to the next event, and short enough (~50 ms) that progress,
    flushing and Ctrl-C stay responsive whatever a step costs."""

    def __init__(self) -> None:
        self.limit = 16

    def __call__(self, until_event: int) -> int:
        return max(1, min(until_event, self.limit))

    def took(self, steps: int, seconds: float) -> None:
        if steps >= self.limit and seconds < 0.02:
            self.limit *= 2
        elif seconds > 0.1 and self.limit > 1:
            self.limit //= 2


def check_guards(step: int, generation: int | None = None) -> None:
    """A kernel that wrote outside a field (of ``generation``; None: any live one) without
    --debug fails the job, which would otherwise record success (lang/guards.py)."""
    hit = guards.damaged(generation)
    if hit:
        raise SimulationError(
            f"a kernel wrote outside field {', '.join(repr(n) for n in hit)} (an index out of "
            f"range; the bytes next to it changed by step {step}), so the results "
            "cannot be trusted. Rerun with --debug: it stops at the first out-of-range index, "
            "naming the kernel, the field and the line.", step)


def loop(scene: Scene, system: System, state: State, writer: RunWriter, stepping: Stepping,
         progress: ProgressFn | None, flush_interval: float) -> None:
    """Advance to `scene.steps` in chunks that end at every event step (a frame, a thermo
    row, the end); a chunk stops after its first non-finite step, which check_finite names."""
    every, total, thermo_every = scene.outputs.every, scene.steps, scene.thermo_every
    clock, chunk = _Clock(flush_interval), _ChunkSize()
    try:
        while state.step < total:
            event = next_event(state.step, total, (every, thermo_every))
            wanted = chunk(event - state.step)
            started = time.perf_counter()
            done = stepping.advance(state, wanted, state.step + wanted == event)
            chunk.took(done, time.perf_counter() - started)
            if thermo.thermo_due(state.step, thermo_every, total):
                record_thermo(writer, state, system, scene, stepping)
            if state.step % every == 0 or state.step == total:
                writer.add(make_frame(state, system, scene, stepping))
                if clock.flush_due():
                    started = time.perf_counter()
                    writer.flush()
                    clock.flushed(time.perf_counter() - started)
            if progress is not None and (state.step == total or clock.progress_due()):
                progress(state.step, total)
    finally:
        if progress is not None and state.step < total:  # stopped early: show where
            progress(state.step, total)


def _open(target: Path, scene: Scene, system: System, step: int, checkpoint: dict | None,
          options: dict | None, stepping: Stepping) -> tuple[RunWriter, dict]:
    """The run's writer (holding a resumed run's frames) and its run.json info, once the
    resolved scene and a 'running' run.json are written."""
    writing = files.writer_options(scene)
    writing.thermo_every = scene.thermo_every
    writing.thermo_columns = stepping.extra_columns
    if measurable(system):
        writing.thermo_columns = (*writing.thermo_columns, "pressure")
    writer = RunWriter(target, writing)
    if checkpoint is not None:
        files.reload_frames(writer, target, step, scene.outputs.every)
    try:
        return writer, files.start(target, scene, checkpoint, options)
    except OSError as exc:
        raise files.output_error(exc, files.write_failure(exc, step, None), target, False
                                 ) from None


def finish_drift(scene: Scene, writer: RunWriter, info: dict, tolerance: float | None
                 ) -> thermo.DriftCheck | None:
    """Check the thermo rows' energy drift (conservative and Nosé-Hoover runs) and record
    the verdict in run.json's info as ``energy_drift``."""
    if writer.thermo is None or not writer.thermo.rows:
        return None
    rows = np.asarray(writer.thermo.rows, dtype=np.float64)
    columns = {name: rows[:, j] for j, name in enumerate(writer.thermo.columns)}
    checked = thermo.check_drift(
        scene, columns, thermo.DRIFT_TOLERANCE if tolerance is None else tolerance)
    if checked is not None:
        info["energy_drift"] = checked.as_dict()
    return checked


def run_scene(scene: Scene, out_dir: str | os.PathLike[str] | Callable[[], Path], *,
              resume: bool = False, progress: ProgressFn | None = None,
              threads: int | None = None, flush_interval: float = 1.0,
              debug: bool = False, allow_changed: bool = False,
              options: dict | None = None, drift_tolerance: float | None = None) -> RunResult:
    """Run ``scene`` into ``out_dir`` (created); with ``resume``, continue the run there.

    ``debug`` bounds-checks every field access in the kernels (IndexError naming kernel,
    field, index and line); a resume refuses edited kernel sources unless ``allow_changed``;
    ``options`` (the command's own, e.g. ``no_render``) go to run.json for 'simrun resume'.
    ``drift_tolerance``: the relative energy drift beyond which ``result.drift_check`` says
    exceeded (default ``thermo.DRIFT_TOLERANCE``); the caller decides what that means.

    ``out_dir`` may be a function that creates and returns the folder: it is called only
    once the kernels have compiled and the first forces are finite, so a scene with a bad
    kernel writes nothing (with ``resume`` the folder is needed first, to read the state).
    """
    started = time.perf_counter()
    where = out_dir if callable(out_dir) else (lambda: Path(out_dir))
    target = Path(where()) if resume else None
    checkpoint = files.load_checkpoint(target, scene, allow_changed) if target is not None \
        else None
    system, state = prepare(scene, checkpoint, threads, debug)
    stepping = make_stepping(scene, system, state, checkpoint)
    pressure_start = stepping.pressure(system, state)
    setup_s = round(time.perf_counter() - started, 4)
    shapes = system.render_shapes()
    target = target if target is not None else Path(where())
    writer, info = _open(target, scene, system, state.step, checkpoint, options, stepping)
    info["timings"]["setup_s"] = setup_s
    info["threads"] = system.threads  # chosen from the work unless --threads said (threads.py)
    info["thermo"] = {"every": scene.thermo_every, "dof": stepping.dof.count,
                      "dof_why": stepping.dof.why}
    drift_check = None
    if shapes:
        info["shapes"] = shapes  # what the pictures draw behind the particles
    status, wrote = "error", True
    lists = system.neighbor_list
    builds_before = lists.rebuilds if lists is not None else 0
    try:
        if checkpoint is None:
            record_thermo(writer, state, system, scene, stepping)
            writer.add(make_frame(state, system, scene, stepping))
        writer.flush()
        loop(scene, system, state, writer, stepping, progress, flush_interval)
        check_guards(state.step, system.x.generation)
        writer.flush()
        drift_check = finish_drift(scene, writer, info, drift_tolerance)
        if pressure_start is not None:  # by autodiff of U in the box scale (pressure.py)
            info["pressure"] = [pressure_start, stepping.pressure(system, state)]
        status = "ok"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except SimulationError as exc:
        status, info["error"] = "failed", str(exc)
        finish_drift(scene, writer, info, drift_tolerance)  # how the energy got there
        raise
    except OSError as exc:  # writing the outputs: the disk is full, the folder went away
        wrote, info["error"] = False, files.write_failure(exc, state.step, writer.saved_step)
        raise files.output_error(exc, info["error"], target) from None
    except Exception as exc:  # e.g. a kernel that compiles only when first launched
        status, info["error"] = "error", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if lists is not None:  # as LAMMPS's "Neighbor list builds" (the one at set-up excluded)
            info["neighbors"] = {"builds": lists.rebuilds - builds_before,
                                 "cutoff": lists.cutoff, "skin": lists.skin,
                                 "capacity": lists.capacity}
        files.finish(target, info, status, writer, state, started, flush=wrote)
    energies = writer.energies
    return RunResult(target, status, info.get("resumed_from_step", 0), state.step, scene.steps,
                     time.perf_counter() - started,
                     energies[0][2] + energies[0][3] if energies else None,
                     energies[-1][2] + energies[-1][3] if energies else None, setup_s,
                     dissipation(scene), drift_check,
                     info["neighbors"]["builds"] if lists is not None else None)
