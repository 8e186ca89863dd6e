"""``simrun check SCENE``: validate a scene and compile its kernels; run nothing."""

from __future__ import annotations

from typing import Annotated

import typer

from simrun.cli.common import (
    AllowOutsideOpt,
    DebugOpt,
    SceneArg,
    SetOpt,
    ThreadsOpt,
    exit_codes,
    out,
)
from simrun.scene import load_scene, scene_modules
from simrun.scene.load_grids import grid_field_names


def check(scene_path: SceneArg, sets: SetOpt = None, threads: ThreadsOpt = None,
          wrt: Annotated[list[str] | None, typer.Option(
              "--wrt", metavar="KEY", help="Also check that `simrun grad` can differentiate "
              "with respect to KEY (repeatable).")] = None,
          allow_outside: AllowOutsideOpt = False, debug: DebugOpt = False) -> None:
    """Validate SCENE and compile its kernels; write nothing.

    Every kernel the scene names (energy terms, step kernels, the objective) is compiled and
    the potential energy at step 0 is evaluated, every field access bounds-checked (as
    --debug does elsewhere; here always); with --wrt, the KEYs are checked too, and so
    are the parameters and bounds of an `optimize:` section. Exit 0
    when the scene is ready to run, 2 with file:line:column when it is not. Like run, check
    imports the scene's kernel modules, which runs their Python: a module outside the
    scene's folder and the kernels/ folder beside it is refused unless --allow-outside."""
    with exit_codes():
        scene = load_scene(scene_path, list(sets or []), allow_outside=allow_outside)
        from simrun.jobs.check import check_job  # start-up: the compiler, once input is read

        checked = check_job(scene, list(wrt or []), threads, debug)
    report, ensemble, objective = checked.report, checked.ensemble, checked.objective
    p = scene.particles
    out.print(f"[bold green]ok[/] {scene_path}: scene '{scene.name}', {p.count} particles in "
              f"{p.dim}-D, {scene.precision}, {scene.steps} steps of dt = {scene.dt:g}")
    modules, outside = scene_modules(scene)
    shown = [f"{m} (outside the scene's folder)" if m in outside else str(m) for m in modules]
    out.print(f"  kernel code   {', '.join(shown)}")
    out.print(f"  energy terms  {', '.join(report.energy_kernels) or '-'}")
    if report.controller:
        out.print(f"  controller    {', '.join(report.controller)}")
    if report.step_kernels:
        out.print(f"  step kernels  {', '.join(report.step_kernels)}")
    on_grids = set(grid_field_names(scene.grids))
    for grid in scene.grids:
        out.print(f"  grid {grid.name:<8} {' x '.join(map(str, grid.shape))} cells of "
                  f"{' x '.join(f'{s:g}' for s in grid.spacing)}: "
                  f"{', '.join(f.name for f in grid.fields)}")
    if set(report.extra_fields) - on_grids:
        out.print(f"  module fields "
                  f"{', '.join(f for f in report.extra_fields if f not in on_grids)}")
    acted = report.potential_controlled
    out.print(f"  compiled in {report.compile_s:.2f} s; potential energy at step 0 = "
              f"{report.potential:.9g}" + ("" if acted is None else
                                          " (energy.csv's first row: before the controller "
                                          "acts; after its step-0 action, which the first "
                                          f"step's forces use: {acted:.9g})"))
    if ensemble:
        out.print("  objective     an ensemble average (simrun grad --method ensemble, "
                  "simrun optimize by reweighting)")
    if objective is not None:
        out.print(f"  objective     {objective:.9g} at step 0"
                  + (f"; differentiable in {', '.join(wrt)}" if wrt else ""))
    if scene.optimize is not None:
        opt = scene.optimize
        out.print(f"  optimize      {', '.join(opt.parameters)} ({opt.optimizer}, "
                  f"{opt.iterations} iterations)")
