"""``simrun run SCENE``: simulate a scene, write its outputs, render pictures, summarise."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from shlex import quote
from typing import TYPE_CHECKING, Annotated, Any

import typer

from simrun.cli.common import (
    EXIT_FAILED,
    AllowChangedOpt,
    AllowOutsideOpt,
    DebugOpt,
    Device,
    DeviceOpt,
    ReproducibleOpt,
    SceneArg,
    SetOpt,
    ThreadsOpt,
    err,
    exit_codes,
    fail,
    on_device,
    out,
)
from simrun.cli.progress import step_bar
from simrun.lang.config import job_policy
from simrun.outputs.rundir import check_out_dir, choose_run_dir
from simrun.outputs.thermo import DRIFT_TOLERANCE
from simrun.scene import Scene, load_scene

if TYPE_CHECKING:  # the stepper loads the compiler: a scene refused early needs neither
    from simrun.stepper import RunResult


def overrides(sets: list[str] | None, steps: int | None, seed: int | None,
              thermo: int | None = None) -> list[str]:
    extra = [f"steps={steps}"] if steps is not None else []
    extra += [f"seed={seed}"] if seed is not None else []
    extra += [f"thermo={thermo}"] if thermo is not None else []
    return list(sets or []) + extra


def summary(scene: Scene, result: RunResult, render_error: str | None,
            render_s: float | None) -> None:
    steps = result.steps_done - result.start_step
    stepping = result.wall_s - result.setup_s
    rate = f"{steps / stepping:,.0f} steps/s" if stepping > 0 else "-"
    rate += " overall: from the first step to the last file written"
    resumed = f", resumed at step {result.start_step}" if result.start_step else ""
    out.print(f"[bold green]done[/] {scene.name}: {steps} steps in {result.wall_s:.2f} s "
              f"(setup and compile {result.setup_s:.2f} s, then {rate}{resumed})")
    if result.energy_first is not None and result.energy_last is not None:
        note = (f"; not expected to be conserved: {result.dissipation}"
                if result.dissipation else "")
        change = (f"relative drift {result.drift:+.3e}" if result.drift is not None else
                  f"change {result.energy_last - result.energy_first:+.3e} from zero")
        out.print(f"  energy    total {result.energy_first:.9g} -> {result.energy_last:.9g} "
                  f"({change}{note})")
    first_t, last_t = 0.0, result.steps_done * scene.dt
    every = "every step" if scene.outputs.every == 1 else f"one every {scene.outputs.every} steps"
    out.print(f"  frames    {every}, to step {result.steps_done} "
              f"(t = {first_t:g} to {last_t:.6g})")
    if result.neighbor_builds is not None and steps > 0:
        out.print(f"  lists     {result.neighbor_builds} neighbour-list builds in {steps} steps "
                  f"(rebuilt when a particle has moved half the skin)")
    if render_s is not None and not render_error:
        out.print(f"  pictures  drawn in {render_s:.2f} s")
    files = sorted(p.name for p in result.out_dir.iterdir() if not p.name.startswith("."))
    out.print(f"  outputs   {result.out_dir}{os.sep}")
    out.print(f"            {' '.join(files)}", soft_wrap=True)
    warn_render(result.out_dir, render_error)


def check_drift(result: RunResult, scene: Scene, max_drift: float | None) -> None:
    """Warn (one line) when the energy drifted beyond its tolerance; exit 1 past --max-drift."""
    check = result.drift_check
    if check is None or not check.exceeded:
        return
    err.print(check.warning(scene.dt, hint=max_drift is None), markup=False, soft_wrap=True)
    if max_drift is not None:
        raise fail(f"error: the energy drift {check.drift.worst:+.3g} exceeds --max-drift "
                   f"{max_drift:g} (run.json records it as energy_drift; the outputs in "
                   f"{result.out_dir} are complete).", EXIT_FAILED)


def warn_render(run_dir: Path, render_error: str | None) -> None:
    if render_error:
        err.print(f"warning: pictures were not rendered ({render_error}); try "
                  f"'simrun render {run_dir}'", markup=False)


def run(
    scene_path: SceneArg,
    steps: Annotated[int | None, typer.Option("--steps", min=1, metavar="N", help="Total "
                                              "steps (overrides the scene's 'steps').")] = None,
    sets: SetOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", metavar="DIR", help="Output folder (default: "
                       "outputs/<scene name>/run-NNN under the current folder).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", min=0, metavar="S", help="Random seed (overrides "
                                             "the scene's 'seed').")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted run from its "
                      "last saved frame, bit for bit (the newest run, or --out).")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the run already in "
                         "--out.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary; "
                     "print only the output folder.")] = False,
    no_render: Annotated[bool, typer.Option("--no-render", help="Skip the PNG/GIF pictures.")
                         ] = False,
    threads: ThreadsOpt = None,
    device: DeviceOpt = Device.cpu,
    allow_outside: AllowOutsideOpt = False,
    debug: DebugOpt = False,
    reproducible: ReproducibleOpt = True,
    allow_changed: AllowChangedOpt = False,
    thermo: Annotated[int | None, typer.Option("--thermo", min=1, metavar="N", help="Write "
                      "energies and temperature to thermo.csv every N steps (overrides the "
                      "scene's 'thermo'; default: at each frame).")] = None,
    max_drift: Annotated[float | None, typer.Option("--max-drift", min=0.0, metavar="X",
                         help="Exit 1 when the relative energy drift of a conservative run "
                         "(or the extended energy of a Nose-Hoover one) exceeds X; without "
                         f"it, a drift beyond {DRIFT_TOLERANCE:g} only warns.")] = None,
) -> None:
    """Simulate SCENE; save frames, energies, pictures.

    The run folder (outputs/<scene name>/run-NNN, or --out DIR) gets the resolved
    scene.yaml, frames.npz, trajectory.xyz (extended XYZ for OVITO/ASE), energy.csv
    (step,time,kinetic,potential,total), thermo.csv (the same and temperature, every
    --thermo N steps), run.json (versions, seed, timings, exit status, energy drift),
    first.png, last.png, energy.png and animation.gif, and kernels/ (a copy of each kernel
    module, hashed in run.json; scene.yaml names the copies, so the folder runs anywhere).
    Files are replaced atomically, so a stopped run leaves readable files; 'simrun resume
    DIR' (or --resume) continues it, refusing edited kernels unless --allow-changed.

    A scene is code: it runs the Python of its kernel modules. Modules outside the scene's
    folder and the kernels/ folder beside it are refused unless --allow-outside.

    \b
    Examples:
      simrun run scenes/gravity.yaml
      simrun run scenes/molecule.yaml --steps 2000 --set dt=1e-3 --out /tmp/mol
      simrun resume outputs/gravity/run-001            (after Ctrl-C)
      simrun run scenes/gravity.yaml --resume          (the newest run of the scene)
    """
    with on_device(device):
        run_command(lambda: load_scene(scene_path, overrides(sets, steps, seed, thermo),
                                   allow_outside=allow_outside),
                out_dir, resume=resume, overwrite=overwrite, quiet=quiet, no_render=no_render,
                threads=threads, debug=debug, allow_changed=allow_changed, max_drift=max_drift,
                reproducible=reproducible, device=device.value)


def run_command(load: Callable[[], Scene], out_dir: Path | None, *, resume: bool = False,
            overwrite: bool = False, quiet: bool = False, no_render: bool = False,
            threads: int | None = None, debug: bool = False, allow_changed: bool = False,
            max_drift: float | None = None, reproducible: bool = True,
            device: str = "cpu") -> None:
    """`simrun run` and `simrun resume` of a run folder: load the scene, run (or continue)
    it, draw the pictures, summarise; Ctrl-C prints the command that continues it."""
    state: dict[str, Any] = {}

    def interrupted() -> str:
        where = state.get("dir")
        if state.get("finished"):
            return (f"the run finished (outputs in {where}) but drawing its pictures was "
                    f"stopped; draw them with 'simrun render {quote(str(where))}'")
        if where is None or not (where / "state.npz").is_file():
            return "no frame was saved, so there is nothing to resume; run it again"
        return (f"outputs so far are in {where}; continue with 'simrun resume "
                f"{quote(str(where))}'")

    def new_dir() -> Path:  # called by the stepper once the kernels compiled
        state["dir"] = choose_run_dir(scene.name, out_dir, resume=False, overwrite=overwrite)
        return state["dir"]

    options = {"no_render": no_render, "threads": threads, "debug": debug,
               "max_drift": max_drift, "reproducible": reproducible, "device": device}
    with exit_codes(interrupted, folder=lambda: state.get("dir")), job_policy(options):
        scene = load()
        if resume:
            state["dir"] = choose_run_dir(scene.name, out_dir, resume=True, overwrite=False)
        elif out_dir is not None:
            check_out_dir(out_dir, overwrite=overwrite)  # fail before compiling anything
        from simrun.jobs.run import run_job  # start-up: the compiler, once the input is read

        done = run_job(scene, state["dir"] if resume else new_dir, resume=resume,
                       render=not no_render, threads=threads, debug=debug,
                       allow_changed=allow_changed, options=options, drift_tolerance=max_drift,
                       progress=lambda: step_bar(scene.name, enabled=not quiet,
                                                 folder=lambda: state.get("dir")),
                       stepped=lambda: state.update(finished=True))
        result, render_error, render_s = done.result, done.render_error, done.render_s
    if quiet:
        out.print(str(result.out_dir))
        warn_render(result.out_dir, render_error)
    else:
        summary(scene, result, render_error, render_s)
    check_drift(result, scene, max_drift)
