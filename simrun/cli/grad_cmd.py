"""``simrun grad SCENE --wrt KEY``: sensitivities of a scene's objective over its trajectory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from simrun.cli import common
from simrun.cli.common import EXIT_FAILED, SceneArg, SetOpt, ThreadsOpt, err, exit_codes, out
from simrun.cli.progress import step_bar
from simrun.keys import KEY_KINDS
from simrun.lang.config import job_policy
from simrun.outputs.provenance import refuse_changed
from simrun.outputs.resumable import how_to_continue
from simrun.outputs.rundir import check_writable, new_run_dir
from simrun.scene import Scene, load_scene


def grad(
    scene_path: SceneArg,
    wrt: Annotated[list[str], typer.Option(
        "--wrt", metavar="KEY", help="Differentiate with respect to KEY (repeatable): "
        f"{', '.join(KEY_KINDS)} (scenes/README.md).")],
    mode: Annotated[str, typer.Option(
        "--mode", metavar="reverse|forward", help="reverse: all KEYs in one backward sweep "
        "(checkpointed); forward: one tangent sweep per scalar KEY (and per component of "
        "initial.velocity; arrays along a random direction), plus horizon.csv/png.")
    ] = "reverse",
    check: Annotated[bool, typer.Option(
        "--check", help="Also compare with central differences and a Taylor test; exit 1 "
        "if they disagree, or if J's rounding hides the gradient at every step tried "
        "('inconclusive', never 'ok').")] = False,
    checkpoints: Annotated[int | None, typer.Option(
        "--checkpoints", min=0, metavar="N", help="Store at most N states during the reverse "
        "sweep (binomial checkpointing; default: what --memory holds).")] = None,
    memory: Annotated[str | None, typer.Option(
        "--memory", metavar="SIZE", help="Memory for stored states, e.g. 256M (default: a "
        "quarter of the free memory).")] = None,
    steps: Annotated[int | None, typer.Option("--steps", min=1, metavar="N", help="Steps to "
                                              "take (default: the scene's).")] = None,
    method: Annotated[str, typer.Option(
        "--method", metavar="trajectory|ensemble", help="trajectory: the derivative of this "
        "trajectory (reverse or forward mode through every step); ensemble: of the canonical "
        "average of an 'at: mean' objective under a Langevin or Nose-Hoover thermostat, by the "
        "fluctuation formula over one run, with standard errors (no backpropagation in time: "
        "for chaotic systems).")] = "trajectory",
    equilibrate: Annotated[int | None, typer.Option(
        "--equilibrate", min=0, metavar="STEPS", help="ensemble: steps discarded before "
        "averaging (default: the first 20%).")] = None,
    sample_every: Annotated[int | None, typer.Option(
        "--sample-every", min=1, metavar="N", help="ensemble: a frame every N steps (default: "
        "about 2000 frames).")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR", help="Output folder (default: outputs/<scene>/grad-NNN).")] = None,
    sets: SetOpt = None, threads: ThreadsOpt = None, allow_outside: common.AllowOutsideOpt = False,
    quiet: common.QuietOpt = False, device: common.DeviceOpt = common.Device.cpu,
    debug: common.DebugOpt = False, reproducible: common.ReproducibleOpt = True,
) -> None:
    """Gradient of the scene's `objective:` with respect to each --wrt KEY, by reverse mode
    through the whole trajectory (the exact adjoint of the integrator's steps, Hessian-vector
    products from the engine, binomial checkpointing for bounded memory).

    Writes DIR/gradients.json (objective, gradients, schedule, timings), DIR/gradients.npz,
    DIR/scene.yaml and DIR/sensitivities.png (d ln J / d ln p for scalar keys); with
    state.x0, DIR/x0_gradient.png. Exit 0 ok, 1 the check failed or was inconclusive, the
    gradient is not finite, or (--method ensemble) the run did not sample its thermostat's
    canonical ensemble, 2 bad input (unknown KEY, no objective), 130 interrupted."""
    with common.on_device(device):
        grad_job(lambda: load_scene(scene_path, list(sets or []), allow_outside=allow_outside),
                 out_dir, {"wrt": list(wrt), "mode": mode, "check": check,
                           "checkpoints": checkpoints, "memory": memory, "steps": steps,
                           "threads": threads, "debug": debug, "method": method,
                           "equilibrate": equilibrate, "sample_every": sample_every,
                           "reproducible": reproducible, "device": device.value},
                 quiet=quiet)


def grad_job(load: Callable[[], Scene], out_dir: Path | None, options: dict[str, Any],
             recorded: list | None = None, allow_changed: bool = False,
             quiet: bool = False) -> None:
    """`simrun grad` and `simrun resume` of a grad folder: the library's `grad_job`, its
    progress bar and its report. ``recorded``: the sources a resumed folder recorded
    (edited since: refused unless ``allow_changed``)."""
    from simrun.adjoint.schedule import forward_steps  # start-up: loads the compiler
    from simrun.jobs.grad_folder import grad_job as gradient_job
    from simrun.jobs.grad_folder import grad_request

    state: dict[str, Path] = {}
    with exit_codes(lambda: _interrupted(state.get("dir")), folder=lambda: state.get("dir")), \
            job_policy(options):
        scene = load()
        keys = grad_request(scene, options)  # bad input fails before a folder is made
        target = _target(scene, out_dir, recorded, allow_changed)
        state["dir"] = target
        n = options.get("steps") or scene.steps
        # a controller before velocity Verlet's two force evaluations: no folding of the two
        hvps = "two Hessian-vector products" if scene.controller is not None and \
            scene.step_kernels is None and scene.integrator.type == "velocity_verlet" \
            else "one Hessian-vector product"

        def announce(snaps: int) -> None:
            if not quiet:
                err.print(f"reverse mode: {n} steps, {snaps} stored states; each step is "
                          f"advanced {(forward_steps(n, snaps) + 1) / n:.2f} times (the "
                          f"forward sweep included) and reversed once ({hvps})",
                          highlight=False)

        @contextmanager
        def progress() -> Iterator[Any]:
            with step_bar(f"grad {scene.name}", err.is_terminal and not quiet,
                          folder=lambda: target) as bar:
                yield (lambda phase, done, total: bar(done, total, phase)) if bar else None

        try:
            result = gradient_job(scene, target, options, keys, recorded=options,
                                  progress=progress, announce=announce)
        except FloatingPointError as exc:  # a gradient or average that is not finite
            raise typer.Exit(_failed(str(exc))) from None
        if result.mode == "ensemble":
            _print_ensemble(scene, result, target)
            return
    _print_result(scene, result, target)


def _target(scene: Scene, out_dir: Path | None, recorded: list | None, allow_changed: bool
            ) -> Path:
    """The job folder: --out (refusing changed sources on a resume) or a new grad-NNN."""
    if out_dir is not None:
        refuse_changed(out_dir, recorded, scene, allow_changed)
        if out_dir.is_dir():
            check_writable(out_dir)
    target = out_dir or new_run_dir(Path("outputs") / scene.name, "grad")
    target.mkdir(parents=True, exist_ok=True)
    return target


def _print_ensemble(scene: Scene, result: Any, target: Path) -> None:
    """`--method ensemble`: the canonical average and its derivatives, with their errors;
    exit 1 where the run did not sample the thermostat's ensemble."""
    from simrun.jobs.ensemble_record import unsampled_message  # start-up: loads the compiler

    s = result.samples
    out.print(f"<O> = {_value(result.objective)} +- {_value(result.objective_error)} "
              f"({_what(scene)}, canonical average at T = "
              f"{scene.integrator.temperature:g}) over {len(s.steps)} frames (every "
              f"{result.every} steps; the first {result.equilibrate} steps, {s.discarded} "
              "frames, discarded as equilibration)")
    for key, g in result.gradients.items():
        out.print(f"  d<O>/d{key} = {_value(g)} +- {_value(result.errors[key])}  (effective "
                  f"samples {result.effective[key]:g})")
    for line in result.warnings:
        err.print(f"warning: {line}", markup=False)
    out.print(f"  wrote {target}")
    if result.unsampled:
        raise typer.Exit(_failed(unsampled_message(result)))


def _what(scene: Scene) -> str:
    obj = scene.objective
    return obj.builtin or ("the targets' loss" if obj.targets is not None else "kernel")


def _value(v: Any) -> str:
    return f"{float(v):.6g}" if not hasattr(v, "shape") or v.size == 1 else \
        "[" + ", ".join(f"{float(x):.4g}" for x in v) + "]"


def _interrupted(target: Path | None) -> str:
    if target is None:
        return "nothing was written"
    return how_to_continue(target)


def _print_result(scene: Scene, result: Any, target: Path) -> None:
    out.print(f"J = {result.objective:.12g} ({scene.objective.builtin or 'kernel'}, "
              f"at {scene.objective.at}) after {result.steps} steps")
    for key, g in result.gradients.items():
        text = f"{float(g):.10g}" if not hasattr(g, "shape") or g.shape == () else \
            f"array {tuple(g.shape)}, |g| = {float((g ** 2).sum() ** 0.5):.6g}"
        out.print(f"  dJ/d{key} = {text}")
    if result.mode == "reverse":
        out.print(f"  schedule: {result.snapshots} stored states, {result.advances} steps "
                  f"recomputed")
        _print_adjoint_growth(scene, result)
    else:
        out.print("  forward mode: arrays along a random unit direction (gradients.npz)")
        _print_growth(scene, result)
    out.print(f"  wrote {target}")
    if result.check is not None:
        _print_check(result.check)
        if result.check.get("verdict", "ok" if result.check["ok"] else "failed") != "ok":
            raise typer.Exit(EXIT_FAILED)


def _print_adjoint_growth(scene: Scene, result: Any) -> None:
    """Reverse mode's word on chaos (from the adjoint's growth), as forward mode's."""
    # start-up: numpy
    from simrun.jobs.horizon import ENSEMBLE_ADVICE, adjoint_growth, chaos_reason

    growth = adjoint_growth(result.adjoint_horizon, scene.dt)
    if growth is not None:
        err.print(f"  {chaos_reason(growth)}: dJ/dKEY above describes this one trajectory "
                  f"only. {ENSEMBLE_ADVICE}", markup=False)


def _print_growth(scene: Scene, result: Any) -> None:
    """Say so when a sensitivity grows exponentially with the horizon (chaos), and name the
    method whose derivatives of averages do not."""
    from simrun.jobs.horizon import (  # start-up: numpy
        ENSEMBLE_ADVICE,
        growth_report,
    )

    for key, g in growth_report(result.horizon, scene.dt).items():
        err.print(f"  dJ/d{key} grows exponentially with the horizon (rate {g['rate']:.3g} per "
                  f"unit time; x{g['factor']:.3g} from the second quarter to the last): the "
                  f"trajectory's derivative is dominated by chaos here. {ENSEMBLE_ADVICE}",
                  markup=False)


def _failed(message: str) -> int:
    err.print(f"gradient failed: {message}", markup=False)
    return EXIT_FAILED


def _print_check(check: dict) -> None:
    out.print(f"  check (central differences; relative tolerance {check['tolerance']:g}, or "
              "within 3x FD's own error, its change from step h to 2h):")
    out.print(f"    {'KEY':32s} {'AD':>18s} {'FD':>18s} {'rel. error':>10s} {'FD error':>9s}"
              f" {'step':>8s}")
    marks = {"ok": "", "failed": "  <- disagrees", "inconclusive": "  <- inconclusive"}
    for row in check["rows"]:
        out.print(f"    {row['key']:32s} {row['ad']:18.10g} {row['fd']:18.10g} "
                  f"{row['rel_error']:10.2e} {row['fd_error']:9.1e} {row['step']:8.1e}"
                  f"{marks[row['verdict']]}", markup=False)
    t = check["taylor"]
    out.print(f"    Taylor remainders at h = {t['h']:g}, /2, /4, /8: "
              f"{', '.join(f'{r:.3g}' for r in t['residuals'])}; orders "
              f"{', '.join(f'{o:.2f}' for o in t['orders'])} (2 expected; inf: below J's "
              f"rounding, {t.get('rounding', 0.0):.1g})"
              + (f"; {t['note']}" if "note" in t else ""), markup=False)
    whys = [f"{row['key']}: {row['why']}" for row in check["rows"] if "why" in row]
    whys += [f"Taylor test: {t['why']}"] if "why" in t else []
    if check["verdict"] == "ok":
        out.print("  check: [bold green]ok[/]")
    elif check["verdict"] == "failed":
        what = ("the gradient disagrees with finite differences"
                if any(row["verdict"] == "failed" for row in check["rows"]) else
                "the Taylor remainders do not fall as h^2")
        out.print(f"  check: [bold red]FAILED[/]: {what}")
    else:
        out.print("  check: [bold yellow]inconclusive[/]: finite differences cannot test "
                  "this gradient (not a pass):")
        for why in whys:
            out.print(f"    {why}.", markup=False)
    if "chaos" in check:
        from simrun.jobs.horizon import (  # start-up: numpy
            ENSEMBLE_ADVICE,
            chaos_reason,
        )

        out.print(f"    {chaos_reason(check['chaos'])}. {ENSEMBLE_ADVICE}", markup=False)
