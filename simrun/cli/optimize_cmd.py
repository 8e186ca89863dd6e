"""``simrun optimize SCENE``: minimise the scene's objective over its `optimize:` parameters."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from shlex import quote
from typing import Annotated, Any

import typer
import yaml

from simrun.cli.common import (
    EXIT_FAILED,
    AllowChangedOpt,
    AllowOutsideOpt,
    DebugOpt,
    Device,
    DeviceOpt,
    QuietOpt,
    ReproducibleOpt,
    SceneArg,
    SetOpt,
    ThreadsOpt,
    err,
    exit_codes,
    on_device,
    out,
)
from simrun.cli.progress import iteration_bar
from simrun.jobs.options import memory_bytes
from simrun.lang.config import job_policy
from simrun.outputs.provenance import refuse_changed, scene_differences
from simrun.outputs.resumable import how_to_continue, resumable
from simrun.outputs.rundir import check_writable, new_run_dir, run_ids
from simrun.scene import Scene, SceneError, load_scene


def optimize(
    scene_path: SceneArg,
    iterations: Annotated[int | None, typer.Option(
        "--iterations", min=1, metavar="N", help="Optimiser iterations (default: the scene's "
        "optimize.iterations).")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR", help="Output folder (default: outputs/<scene>/opt-NNN).")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the training in DIR (default: the newest opt-NNN) from its "
        "last completed iteration; the numbers are those of a run never stopped.")] = False,
    no_render: Annotated[bool, typer.Option(
        "--no-render", help="Skip the optimised episode (DIR/episode: best.yaml run, with its "
        "pictures).")] = False,
    memory: Annotated[str | None, typer.Option(
        "--memory", metavar="SIZE", help="Memory for each gradient's stored states, e.g. "
        "256M, as in `simrun grad` (default: a quarter of the free memory); the losses do "
        "not depend on it.")] = None,
    sets: SetOpt = None, threads: ThreadsOpt = None, allow_outside: AllowOutsideOpt = False,
    allow_changed: AllowChangedOpt = False, quiet: QuietOpt = False,
    device: DeviceOpt = Device.cpu, debug: DebugOpt = False,
    reproducible: ReproducibleOpt = True,
) -> None:
    """Minimise the scene's `objective:` over the KEYs of its `optimize:` section (Adam, SGD
    with momentum, or L-BFGS-B), one exact trajectory gradient per evaluation.

    Writes DIR/loss.csv (iteration, loss, gradient norm, step, wall time), DIR/loss.png,
    DIR/params.npz (every iteration's parameters), DIR/best.yaml (the scene with the best
    parameters written in, which `simrun run` runs as it is; a tuned start goes to
    best_state.npz, the kernel modules are copied to DIR/kernels/), DIR/scene.yaml,
    DIR/state.npz (for --resume), DIR/optimize.json and DIR/episode/ (best.yaml run, with
    its animation and first/last frames, as `simrun run` writes them). An objective of
    ensemble `targets:` is fitted by reweighting one thermostatted run while N_eff/N >= 0.9
    (DiffTRe), then polished by Gauss-Newton steps from fresh runs: DIR/fit.csv, fit.json
    (the fitted parameters with their errors), fit.png, rdf.png, best.yaml and the runs in
    DIR/trajectory-NNN. Exit 0 ok, 1 a NaN loss or gradient
    (the best parameters so far are kept), 2 bad input, 130 interrupted (--resume goes on)."""
    with on_device(device):
        optimize_job(lambda: load_scene(scene_path, list(sets or []), allow_outside=allow_outside),
                     out_dir, resume=resume, allow_changed=allow_changed,
                     options={"iterations": iterations, "no_render": no_render,
                              "threads": threads, "memory": memory, "debug": debug,
                              "reproducible": reproducible, "device": device.value},
                     quiet=quiet)


def optimize_job(load: Callable[[], Scene], out_dir: Path | None, *, resume: bool,
                 options: dict[str, Any], allow_changed: bool = False,
                 quiet: bool = False) -> None:
    """`simrun optimize` and `simrun resume` of an optimize folder."""
    target: Path | None = None

    def interrupted() -> str:
        if target is None:
            return "nothing was written"
        if not resumable(target):
            return how_to_continue(target)
        if (target / "fit.json").is_file():
            return fit_interrupted(target)
        return f"{target} is valid up to its last iteration; {how_to_continue(target)}"

    with exit_codes(interrupted, folder=lambda: target), \
            job_policy(options):
        memory_bytes(options)  # a bad --memory: refused before anything is written
        scene = load()
        if scene.optimize is None:
            raise SceneError(f"{scene.source}: the scene has no 'optimize' section. Add e.g. "
                             "'optimize: {parameters: [initial.velocity], iterations: 100}' "
                             "(scenes/README.md).")
        if scene.objective.targets is not None:
            target = _target(scene, out_dir, False)  # what Ctrl-C then names
            fit_targets(scene, target, options, quiet)
            return
        target = _target(scene, out_dir, resume)
        # start-up: the compiler, once the input is read
        from simrun.jobs.optimize import OptimizeError
        from simrun.jobs.optimize import optimize_job as training_job

        try:
            result, episode_error = training_job(
                scene, target, iterations=options.get("iterations"), resume=resume,
                threads=options.get("threads"), options=options, allow_changed=allow_changed,
                episode=not options.get("no_render"),
                progress=lambda: iteration_bar(f"optimize {scene.name}",
                                               err.is_terminal and not quiet, folder=target))
        except OptimizeError as exc:
            err.print(f"optimize failed: {exc}", markup=False)
            raise typer.Exit(EXIT_FAILED) from None
        if episode_error:
            err.print(f"warning: the episode's pictures failed: {episode_error}",
                      markup=False)
    out.print(f"{result.status}: {result.iterations} iterations "
              f"({result.evaluations} gradient evaluations"
              + (f", {result.replayed} replayed from the record" if result.replayed else "")
              + f", {result.seconds:.1f} s)")
    out.print(f"  loss {result.losses[0]:.6g} -> {result.losses[-1]:.6g}; best "
              f"{result.best_loss:.6g} at iteration {result.best_iteration}")
    for key, value in result.best.items():
        shown = f"{value:.10g}" if isinstance(value, float) else (
            " ".join(f"{v:.8g}" for v in value.ravel()) if value.size <= 6 else
            f"array {value.shape}")
        out.print(f"  {key} = {shown}", markup=False)
    out.print(f"  wrote {target} (best.yaml: simrun run {target / 'best.yaml'})", markup=False)


def resume_fit(load: Callable[[], Scene], folder: Path, record: dict[str, Any],
               options: dict[str, Any], allow_changed: bool, quiet: bool) -> None:
    """'simrun resume' of a fit folder (fit.json): a fit that did not finish starts again in
    its folder from its own scene.yaml and options (its runs are seeded: the same numbers
    as one never stopped)."""
    if record.get("status") == "done" and options.get("iterations") is None:
        out.print(f"{folder}: the fit is complete (fit.json); nothing to resume. "
                  f"'simrun render {quote(str(folder))}' redraws its pictures.")
        return

    def interrupted() -> str:
        return fit_interrupted(folder)

    with exit_codes(interrupted, folder=lambda: folder), job_policy(options):
        check_writable(folder, "")
        scene = load()
        refuse_changed(folder, record.get("sources"), scene, allow_changed)
        fit_targets(scene, folder, options, quiet)


def fit_interrupted(folder: Path) -> str:
    """What Ctrl-C says of a fit folder: what it keeps, and that a resume starts again."""
    return (f"{folder} keeps fit.csv, fit.json (status interrupted) and the runs so far; "
            f"'simrun resume {quote(str(folder))}' starts the fit again there (its runs are "
            "seeded: the same numbers)")


def fit_targets(scene: Scene, target: Path, options: dict[str, Any], quiet: bool) -> None:
    """Targets (ensemble averages): DiffTRe's reweighting loop into ``target`` (a new
    folder, or a fit folder started again by 'simrun resume'), its pictures and a summary."""
    from simrun.jobs.fit import AVERAGED, fit_job  # start-up: loads the compiler

    fit = fit_job(scene, target, options, progress=lambda: iteration_bar(
        f"optimize {scene.name}", err.is_terminal and not quiet, folder=target))
    rows, names = fit.rows, list(scene.optimize.parameters)
    adam = [row for row in rows if row.stage == "adam"]
    fresh = len({row.trajectory for row in adam})
    out.print(f"done: {len(adam)} Adam iterations from {fresh} trajectories (reweighted "
              f"while N_eff/N >= 0.9); loss {rows[0].loss:.4g} -> {adam[-1].loss:.4g}")
    if fit.steps:
        state = (f"converged: the last {fit.pool.runs} runs agree within their errors, their "
                 "landing points averaged") if fit.converged else \
            "NOT converged: the last step is larger than its errors; run more iterations"
        out.print(f"  polished by Gauss-Newton over {len(fit.steps)} fresh runs ({state}, "
                  f"chi^2 {fit.chi2s[-1]:.2f}, loss {rows[-1].loss:.4g}); fitted, +- the "
                  "fit's own standard error (best.yaml):")
    else:
        out.print(f"  fitted (mean of the last {AVERAGED:.0%} of the iterations; best.yaml):")
    errors = fit.errors if fit.errors is not None else [None] * len(names)
    for name, value, error in zip(names, fit.params, errors):
        out.print(f"  {name} = {value:.6g}" + ("" if error is None else f" +- {error:.2g}"))
    out.print(f"  wrote {target} (fit.csv, fit.json, fit.png, best.yaml)", markup=False)


def _target(scene: Scene, out_dir: Path | None, resume: bool) -> Path:
    """The folder: --out, a new opt-NNN, or with --resume the newest opt-NNN; a resumed
    folder must hold the same scene (apart from the iteration count)."""
    base = Path("outputs") / scene.name
    if not resume:
        return out_dir or new_run_dir(base, "opt")
    if out_dir is None:
        found = [p for _n, p in run_ids(base, "opt") if (p / "state.npz").is_file()]
        if not found:
            raise SceneError(f"{base}: there is no earlier optimize run of this scene to resume. "
                             "Run it without --resume first, or give the folder with --out.")
        out_dir = found[-1]
    check_writable(out_dir, "")
    saved = out_dir / "scene.yaml"
    if saved.is_file():
        before = yaml.safe_load(saved.read_text(encoding="utf-8"))
        diffs = scene_differences(before if isinstance(before, dict) else {}, scene,
                                  ignore=("optimize.iterations",))
        if diffs:
            raise SceneError(f"{out_dir}: --resume continues the same training, but the scene "
                             f"differs from the one recorded there (scene.yaml): "
                             f"{'; '.join(diffs[:3])}. Continue it with 'simrun resume "
                             f"{quote(str(out_dir))}', or start a new folder without --resume.")
    return out_dir
