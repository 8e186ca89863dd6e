"""``simrun resume DIR``: continue a run, grad, optimize or batch folder from its own record.

One rule for every job: the folder's json record (run.json, gradients.json, optimize.json,
batch.json) says what ran and with which options, and its scene.yaml (naming the folder's
copies of the kernel modules) is the resolved scene, --steps and --set included. So the
folder alone is enough, wherever it was moved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from simrun.cli.common import (
    EXIT_BAD_INPUT,
    AllowChangedOpt,
    AllowOutsideOpt,
    Device,
    ThreadsOpt,
    fail,
    on_device,
    out,
)
from simrun.outputs.resumable import UnreadableRecord, job_record
from simrun.scene import Scene, SceneError, load_scene

BATCH_ARGUMENTS = ("scene", "sweeps", "sweep_file", "samples", "sample_seed", "job", "sets",
                   "options", "retries", "fail_fast", "allow_outside")


def job_of(folder: Path) -> tuple[str, dict[str, Any]]:
    """The job a folder holds and its json record (typer.Exit 2 when it holds none)."""
    try:
        found = job_record(folder)
    except UnreadableRecord as exc:
        raise fail(f"error: {exc}", EXIT_BAD_INPUT) from None
    if found is not None:
        return found
    what = "does not exist" if not folder.exists() else "holds no job record (run.json, " \
        "gradients.json, optimize.json, fit.json or batch.json)"
    raise fail(f"error: {folder}: {what}, so there is nothing to resume. Give the folder of a "
               "run, grad, optimize or batch job (e.g. outputs/gravity/run-001).",
               EXIT_BAD_INPUT)


def resume(
    folder: Annotated[Path, typer.Argument(metavar="DIR", show_default=False, help="A job "
                      "folder: outputs/<scene>/run-NNN, grad-NNN, opt-NNN or a batch folder.")],
    steps: Annotated[int | None, typer.Option("--steps", min=1, metavar="N", help="run: a new "
                     "total number of steps (to extend a finished run); grad: steps to take."
                     )] = None,
    iterations: Annotated[int | None, typer.Option("--iterations", min=1, metavar="N",
                          help="optimize: a new total number of iterations.")] = None,
    threads: ThreadsOpt = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, metavar="N", help="batch: "
                       "local worker processes (default: the usable CPUs).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar (run: no summary either, only the folder).")
                     ] = False,
    allow_changed: AllowChangedOpt = False,
    allow_outside: AllowOutsideOpt = False,
    device: Annotated[Device | None, typer.Option(
        "--device", help="Where the kernels run (default: where the job ran, as its record "
        "says). A job moved to another device goes on with the same results to rounding, "
        "not the same bits.")] = None,
) -> None:
    """Continue the job in DIR from the folder's own record: the job (run, grad, optimize,
    batch), its resolved scene (DIR/scene.yaml, with --steps and --set as they were, and
    the folder's copies of the kernel modules) and its options. Nothing else is needed:
    this is the command Ctrl-C prints.

    A run continues bit for bit from its last saved frame; an optimisation replays its
    recorded evaluations and goes on; a gradient that did not finish is computed again; a
    batch runs the jobs not yet done. Kernel modules edited since (the folder's copies,
    checked against the hashes in its record) are refused unless --allow-changed.

    \b
    Examples:
      simrun resume outputs/gravity/run-001
      simrun resume outputs/gravity/run-001 --steps 40000   (extend a finished run)
      simrun resume outputs/projectile/opt-001
    """
    job, record = job_of(folder)
    options = dict(record.get("options") or {})
    if threads is not None:
        options["threads"] = threads
    if job == "batch":
        return _resume_batch(folder, record, threads, workers, quiet)
    if device is not None:
        options["device"] = device.value
    if options.get("device", "cpu") not in {d.value for d in Device}:
        raise fail(f"error: {folder}: its record names the device {options['device']!r}, "
                   "which simrun does not know; give --device cpu or --device cuda.",
                   EXIT_BAD_INPUT)
    with on_device(Device(options.get("device", "cpu"))):
        return _resume_job(folder, job, record, options, steps, iterations, quiet,
                           allow_changed, allow_outside)


def _resume_job(folder: Path, job: str, record: dict[str, Any], options: dict[str, Any],
                steps: int | None, iterations: int | None, quiet: bool, allow_changed: bool,
                allow_outside: bool) -> None:
    """A run, grad or optimize folder's job again, on the device its options name."""
    scene_file = folder / "scene.yaml"

    def load(extra: list[str] = ()) -> Scene:
        if not scene_file.is_file():
            raise SceneError(f"{folder}: cannot resume: its scene.yaml is missing. Start the "
                             "job again.")
        return load_scene(scene_file, list(extra), allow_outside=allow_outside)

    if job == "run":
        from simrun.cli.run_cmd import run_command  # start-up: only the job's own command

        run_command(lambda: load([f"steps={steps}"] if steps else []), folder, resume=True,
                quiet=quiet, no_render=bool(options.get("no_render")),
                threads=options.get("threads"), debug=bool(options.get("debug")),
                allow_changed=allow_changed, max_drift=options.get("max_drift"),
                reproducible=options.get("reproducible", True),
                device=options.get("device", "cpu"))
    elif job == "grad":
        if record.get("status") == "done" and steps is None:
            out.print(f"{folder}: the gradient is complete (gradients.json); nothing to "
                      "resume")
            return None
        if not options.get("wrt"):
            raise fail(f"error: {folder}: cannot resume: gradients.json records no options "
                       "(written by an older simrun). Run 'simrun grad' again.",
                       EXIT_BAD_INPUT)
        options.setdefault("mode", "reverse")
        if steps is not None:
            options["steps"] = steps
        from simrun.cli.grad_cmd import grad_job  # start-up: the KEY table loads the compiler

        grad_job(load, folder, options, record.get("sources"), allow_changed, quiet=quiet)
    elif job == "fit":
        if iterations is not None:
            options["iterations"] = iterations
        from simrun.cli.optimize_cmd import resume_fit  # start-up: only the job's own command

        resume_fit(load, folder, record, options, allow_changed, quiet)
    else:
        if iterations is not None:
            options["iterations"] = iterations
        from simrun.cli.optimize_cmd import optimize_job  # start-up: only the job's command

        optimize_job(load, folder, resume=True, options=options, allow_changed=allow_changed,
                     quiet=quiet)
    return None


def _resume_batch(folder: Path, record: dict[str, Any], threads: int | None,
                  workers: int | None, quiet: bool) -> None:
    """The batch again from batch.json's arguments, on a local cluster of ``workers``."""
    from simrun.batch import Engine  # start-up: dask
    from simrun.cli.batch_cmd import batch_job  # start-up: only the job's own command

    arguments = {k: record[k] for k in BATCH_ARGUMENTS if k in record}
    if "scene" not in arguments or "job" not in arguments:
        raise fail(f"error: {folder}/batch.json: cannot resume: it does not record the batch's "
                   "scene and job. Run the 'simrun batch' command again.", EXIT_BAD_INPUT)
    if threads is not None:
        arguments["options"] = {**arguments.get("options", {}), "threads": threads}
    batch_job({**arguments, "out_dir": folder}, lambda: Engine(workers=workers), quiet)
