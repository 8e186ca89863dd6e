"""The run job: a scene stepped into its run folder (`stepper.run_scene`: frames, energies,
run.json, whose "ok" the step loop writes only after the guard zones' check, as `finish`
does for the other jobs), then its pictures. `simrun run`, `simrun resume`, batch's run
task and optimize's episode all run it."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from simrun.scene import Scene
from simrun.stepper import RunResult, run_scene
from simrun.stepper.run import ProgressFn

# a context around the stepping (the CLI's progress bar) that yields its progress callback
ProgressScope = Callable[[], AbstractContextManager[ProgressFn | None]]


@dataclass
class RunOutcome:
    result: RunResult
    render_s: float | None = None  # seconds the pictures took (None: not drawn)
    render_error: str | None = None  # why they were not drawn


def render_pictures(run_dir: Path) -> tuple[float | None, str | None]:
    """Draw the pictures (their state goes to run.json); a rendering problem is reported,
    not fatal to the run. Returns the seconds it took, or the error."""
    from simrun.render.record import draw_pictures  # start-up: matplotlib

    try:
        return draw_pictures(run_dir).seconds, None
    except Exception as exc:  # noqa: BLE001 - the simulation's outputs are still good
        return None, f"{type(exc).__name__}: {exc}"


def run_job(scene: Scene, out_dir: str | os.PathLike[str] | Callable[[], Path], *,
            resume: bool = False, render: bool = True, progress: ProgressScope | None = None,
            threads: int | None = None, debug: bool = False, allow_changed: bool = False,
            options: dict | None = None, drift_tolerance: float | None = None,
            stepped: Callable[[], None] | None = None) -> RunOutcome:
    """Run (or with ``resume`` continue) ``scene`` into ``out_dir`` (a folder, or a function
    that makes it once the kernels compiled: see `run_scene`), then draw its pictures
    unless ``render`` is False. ``progress()`` is entered around the stepping;
    ``stepped()`` hears that the run's outputs are complete, before the pictures (what
    Ctrl-C during them then says)."""
    with (progress or (lambda: nullcontext(None)))() as report:
        result = run_scene(scene, out_dir, resume=resume, progress=report, threads=threads,
                           debug=debug, allow_changed=allow_changed, options=options,
                           drift_tolerance=drift_tolerance)
    if stepped is not None:
        stepped()
    if not render:
        return RunOutcome(result)
    render_s, render_error = render_pictures(result.out_dir)
    return RunOutcome(result, render_s, render_error)
