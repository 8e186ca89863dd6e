"""The run folder's bookkeeping: scene copy, topology, run.json, and resume checkpoints."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from shlex import quote
from typing import Any

import numpy as np
import yaml

from simrun.outputs import (
    OutputError,
    RunWriter,
    UnwritableError,
    WriterOptions,
    new_run_info,
    read_run_info,
    write_run_info,
    write_topology,
)
from simrun.outputs.atomic import UNWRITABLE
from simrun.outputs.provenance import (
    physics_changes,
    refuse_changed,
    scene_differences,
    write_job_scene,
)
from simrun.outputs.resumable import how_to_continue
from simrun.outputs.runinfo import now
from simrun.outputs.units import units_of
from simrun.outputs.xyz import cell_for, pbc_flags
from simrun.scene import Scene, SceneError
from simrun.scene.errors import shorten
from simrun.scene.initial import STATE_FILE_ERRORS
from simrun.stepper.grids import saved_grid_fields


def writer_options(scene: Scene) -> WriterOptions:
    """Output switches from the scene; the XYZ cell is the boundary box, or none at all
    without a boundary (as ``simrun.Run.atoms`` gives a zero cell)."""
    b = scene.boundary
    cell, origin = cell_for(np.asarray(b.low), np.asarray(b.high)) if b.type != "none" \
        else (None, None)
    o = scene.outputs
    return WriterOptions(positions=o.positions, velocities=o.velocities, forces=o.forces,
                         energies=o.energies, xyz=o.xyz, cell=cell, origin=origin,
                         pbc=pbc_flags(scene.particles.dim, b.type == "periodic"),
                         masses=np.asarray(scene.particles.masses, dtype=float),
                         species=list(scene.particles.species) or None,
                         digits=9 if scene.precision == "f32" else 17,
                         units=units_of(scene.units), dim=scene.particles.dim,
                         frame_fields=_frame_fields(scene))



def _frame_fields(scene: Scene) -> tuple[tuple[str, str], ...]:
    """The fields frames.npz keeps per frame, (name there, field): a rigid box's angle (its
    pictures), and the grid fields saved as frames."""
    angle = (("angle", "angle"),) if scene.bodies is not None else ()
    return angle + tuple((f"grid:{name}", name) for name in saved_grid_fields(scene))

def load_checkpoint(out_dir: Path, scene: Scene, allow_changed: bool = False
                    ) -> dict[str, np.ndarray] | None:
    """The saved state of an interrupted run, after checking it ran this same scene with the
    same kernel sources (SceneError naming what changed, unless ``allow_changed``); None
    for a run that stopped before saving its first frame (e.g. on a full disk): it starts
    again from step 0 in the same folder."""
    state_file, scene_file = out_dir / "state.npz", out_dir / "scene.yaml"
    if not scene_file.is_file():
        raise SceneError(f"{out_dir}: there is no run to resume here (no scene.yaml). Run "
                         "without --resume, or point --out at a run folder.")
    try:
        saved = yaml.safe_load(scene_file.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        saved = None
    if not isinstance(saved, dict):
        raise SceneError(f"{out_dir}: cannot resume: its scene.yaml is not one that simrun "
                         "wrote. Start a new run (without --resume).")
    diffs = scene_differences(saved, scene, ignore=("steps",))
    if diffs:
        raise SceneError(f"{out_dir}: cannot resume: the scene differs from the one this run "
                         f"used: {'; '.join(diffs[:3])}. Continue it with 'simrun resume "
                         f"{quote(str(out_dir))}' (its own scene and options; --steps N to extend it), "
                         "or start a new run.")
    refuse_changed(out_dir, _recorded_sources(out_dir), scene, allow_changed)
    if not state_file.is_file():
        return None
    try:
        with np.load(state_file) as data:
            checkpoint = {k: data[k] for k in data.files}
        int(checkpoint["step"]), checkpoint["x0"], checkpoint["x"], checkpoint["v"]
    except (*STATE_FILE_ERRORS, TypeError, AttributeError) as exc:
        raise SceneError(f"{out_dir}: cannot resume: its state.npz cannot be read "
                         f"({type(exc).__name__}: {shorten(str(exc))}). Start a new run "
                         "(without --resume).") from None
    if int(checkpoint["step"]) >= scene.steps:
        raise SceneError(f"{out_dir}: this run already reached step {int(checkpoint['step'])}"
                         f" of {scene.steps}. Give more steps (--steps N) to continue it.")
    return checkpoint


def _recorded_sources(out_dir: Path) -> list[dict[str, str]] | None:
    try:
        return read_run_info(out_dir / "run.json").get("sources")
    except (OSError, ValueError, AttributeError):
        return None


def reload_frames(writer: RunWriter, out_dir: Path, step: int, every: int) -> None:
    """Take back the frames an interrupted run saved up to ``step`` (SceneError if they
    cannot be read)."""
    try:
        writer.load_existing(step, every)
    except (*STATE_FILE_ERRORS, TypeError) as exc:
        raise SceneError(f"{out_dir}: cannot resume: its saved frames cannot be read "
                         f"({type(exc).__name__}: {shorten(str(exc))}). Start a new run "
                         "(without --resume).") from None


def start(out_dir: Path, scene: Scene, checkpoint: dict | None,
          options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the resolved scene (naming the folder's copies of its kernel modules, which are
    made here), topology and a 'running' run.json (with the sources' hashes and the
    command's ``options``, which 'simrun resume' reuses); return the run info."""
    out_dir.mkdir(parents=True, exist_ok=True)
    changed = physics_changes(out_dir, _recorded_sources(out_dir), scene) if checkpoint \
        is not None else []  # a resume that --allow-changed let through
    sources = write_job_scene(out_dir, scene)
    if scene.topology.arrays:
        write_topology(out_dir / "topology.npz", scene.topology.arrays)
    info = new_run_info(scene.source, scene.seed, scene.steps)
    info["sources"] = sources
    info["units"] = units_of(scene.units).as_dict(scene.particles.dim)
    if options:
        info["options"] = options
    if checkpoint is not None and (out_dir / "run.json").is_file():
        previous = read_run_info(out_dir / "run.json")
        info["started"] = previous.get("started", info["started"])
        resumed = {"at": now(), "from_step": int(checkpoint["step"])}
        if changed:
            resumed["changed"] = changed
        info["resumes"] = previous.get("resumes", []) + [resumed]
        info["resumed_from_step"] = int(checkpoint["step"])
    write_run_info(out_dir / "run.json", info)
    return info


def write_failure(exc: OSError, step: int, saved_step: int | None) -> str:
    """run.json's account of a write that failed: which file, why, what is still valid."""
    name = Path(exc.filename).name if exc.filename else "the outputs"
    saved = (f"the files are valid up to step {saved_step}" if saved_step is not None
             else "no frame was saved")
    return f"cannot write {name} at step {step} ({exc.strerror or exc}); {saved}"


def output_error(exc: OSError, problem: str, out_dir: Path, recorded: bool = True
                 ) -> OutputError:
    """The user's paragraph for a failed write: what happened (``recorded`` in run.json, once
    the run has one) and how to go on. A folder that cannot be written at all (permissions,
    a read-only file system) is bad input (UnwritableError); anything else, e.g. a full
    disk, a failed run."""
    again = how_to_continue(out_dir)
    note = " run.json records this." if recorded else ""
    if exc.errno in UNWRITABLE:
        return UnwritableError(f"{out_dir}: {problem}.{note} The folder is not writable: "
                               f"make it writable (its permissions, or a file system mounted "
                               f"read-only), then {again}; or write elsewhere with --out.")
    return OutputError(f"{out_dir}: {problem}.{note} Free some space, then {again}.")


def finish(out_dir: Path, info: dict[str, Any], status: str, writer: RunWriter, state: Any,
           started: float, flush: bool = True) -> None:
    """Flush the frames not yet on disk (``flush``: unless writing is what failed) and record
    the exit status, steps done and timings in run.json.

    A run that stops on an error keeps that error: a failure to write here is then left
    unreported (the files on disk stay valid). A run that succeeded raises OutputError."""
    if flush and status != "ok":
        with contextlib.suppress(OSError):
            writer.flush()
    info["status"] = status
    info["finished"] = now()
    info["steps_done"] = int(state.step) if state is not None else info.get("resumed_from_step", 0)
    saved = writer.saved_step if writer.saved_step is not None else -1
    info["frames"] = len(writer.steps) if flush else sum(s <= saved for s in writer.steps)
    info["timings"]["wall_s"] = round(time.perf_counter() - started, 4)
    if writer.energies:
        first, last = writer.energies[0], writer.energies[-1]
        info["energy"] = {"first_total": first[2] + first[3], "last_total": last[2] + last[3]}
    info["saved_step"] = writer.saved_step
    try:
        write_run_info(out_dir / "run.json", info)
    except OSError as exc:
        if status == "ok":
            raise OutputError(f"{out_dir}: the run finished and its frames are saved, but "
                              f"run.json cannot be written ({exc.strerror or exc}). Free some "
                              "space; the other files are complete.") from None
