"""The run folder's bookkeeping: scene copy, topology, run.json, and resume checkpoints."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simrun.outputs import (
    OutputError,
    RunWriter,
    WriterOptions,
    new_run_info,
    read_run_info,
    write_run_info,
    write_scene,
    write_topology,
)
from simrun.outputs.runinfo import now
from simrun.outputs.xyz import cell_for, pbc_flags
from simrun.scene import Scene, SceneError, initial_state
from simrun.scene.errors import shorten
from simrun.scene.initial import STATE_FILE_ERRORS


def writer_options(scene: Scene, x0: np.ndarray | None) -> WriterOptions:
    """Output switches from the scene; the XYZ cell is the boundary box or the start's extent."""
    b = scene.boundary
    if b.type != "none":
        low, high = np.asarray(b.low), np.asarray(b.high)
    else:
        x0 = initial_state(scene)[0] if x0 is None else x0
        x0 = np.asarray(x0, dtype=np.float32 if scene.precision == "f32" else np.float64)
        x0 = x0.astype(np.float64)  # the same cell whether fresh or resumed
        lo, hi = x0.min(axis=0), x0.max(axis=0)
        pad = 0.1 * np.maximum(hi - lo, 1e-9)
        low, high = lo - pad, hi + pad
    cell, origin = cell_for(low, high)
    o = scene.outputs
    return WriterOptions(positions=o.positions, velocities=o.velocities, forces=o.forces,
                         energies=o.energies, xyz=o.xyz, cell=cell, origin=origin,
                         pbc=pbc_flags(scene.particles.dim, b.type == "periodic"),
                         masses=np.asarray(scene.particles.masses, dtype=float),
                         species=list(scene.particles.species) or None,
                         digits=9 if scene.precision == "f32" else 17)


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [f"{prefix.rstrip('.')} ({old!r} there, {new!r} here)"]


def load_checkpoint(out_dir: Path, scene: Scene) -> dict[str, np.ndarray] | None:
    """The saved state of an interrupted run, after checking it ran this same scene; None
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
    current = scene.to_dict()
    saved.pop("steps", None)
    current.pop("steps", None)
    diffs = _differences(saved, current)
    if diffs:
        raise SceneError(f"{out_dir}: cannot resume: the scene differs from the one this run "
                         f"used: {'; '.join(diffs[:3])}. Resume with the same scene and --set "
                         "options (only the number of steps may change), or start a new run.")
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


def reload_frames(writer: RunWriter, out_dir: Path, step: int, every: int) -> None:
    """Take back the frames an interrupted run saved up to ``step`` (SceneError if they
    cannot be read)."""
    try:
        writer.load_existing(step, every)
    except (*STATE_FILE_ERRORS, TypeError) as exc:
        raise SceneError(f"{out_dir}: cannot resume: its saved frames cannot be read "
                         f"({type(exc).__name__}: {shorten(str(exc))}). Start a new run "
                         "(without --resume).") from None


def start(out_dir: Path, scene: Scene, checkpoint: dict | None) -> dict[str, Any]:
    """Write the resolved scene, topology and a 'running' run.json; return the run info."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_scene(out_dir / "scene.yaml", scene.to_dict())
    if scene.topology.arrays:
        write_topology(out_dir / "topology.npz", scene.topology.arrays)
    info = new_run_info(scene.source, scene.seed, scene.steps)
    if checkpoint is not None and (out_dir / "run.json").is_file():
        previous = read_run_info(out_dir / "run.json")
        info["started"] = previous.get("started", info["started"])
        info["resumes"] = previous.get("resumes", []) + [
            {"at": now(), "from_step": int(checkpoint["step"])}]
        info["resumed_from_step"] = int(checkpoint["step"])
    write_run_info(out_dir / "run.json", info)
    return info


def write_failure(exc: OSError, step: int, saved_step: int | None) -> str:
    """run.json's account of a write that failed: which file, why, what is still valid."""
    name = Path(exc.filename).name if exc.filename else "the outputs"
    saved = (f"the files are valid up to step {saved_step}" if saved_step is not None
             else "no frame was saved")
    return f"cannot write {name} at step {step} ({exc.strerror or exc}); {saved}"


def write_failure_advice(problem: str, scene: Scene, out_dir: Path, recorded: bool = True
                         ) -> str:
    """The user's paragraph for a failed write: what happened (``recorded`` in run.json, once
    the run has one) and how to go on."""
    if (out_dir / "scene.yaml").is_file():
        how = (f"Free some space, then continue with 'simrun run {scene.source} --resume "
               f"--out {out_dir}' (with the same --set options)")
    else:
        how = "Free some space, then run the scene again"
    return f"{out_dir}: {problem}.{' run.json records this.' if recorded else ''} {how}."


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
