"""The Typer application: the root command (help, --version) and its subcommands."""

from __future__ import annotations

from typing import Annotated

import typer

from simrun import __version__
from simrun.cli.batch_cmd import batch
from simrun.cli.check_cmd import check
from simrun.cli.common import EXIT_BAD_INPUT, fail
from simrun.cli.examples_cmd import examples
from simrun.cli.grad_cmd import grad
from simrun.cli.optimize_cmd import optimize
from simrun.cli.render_cmd import render
from simrun.cli.resume_cmd import resume
from simrun.cli.run_cmd import run
from simrun.lang.errors import SettingsError
from simrun.lang.settings import Settings
from simrun.scene.shipped import scene_names

HELP = """Differentiable physical simulation from the command line.

A scene is a YAML file (keys in scenes/README.md), or the name of a scene shipped with
simrun (simrun run gravity, from any folder): particles, energy terms written in simrun.lang (forces are F = -dU/dx by autodiff, never by
hand), an integrator, dt, steps and what to save.

\b
  simrun run scenes/gravity.yaml          simulate; outputs go to outputs/gravity/run-NNN
  simrun check scenes/gravity.yaml        validate and compile without running
  simrun grad SCENE --wrt dt --check      gradient of the scene's objective, checked
  simrun optimize scenes/projectile.yaml  tune the scene's optimize: parameters
  simrun render outputs/gravity/run-001   redraw the pictures of a run
  simrun resume outputs/gravity/run-001   continue a stopped run (grad, optimize, batch)
  simrun batch SCENE --sweep dt=1e-5,2e-5 a parameter sweep on Dask (one folder per job)
  simrun examples [DIR]                   copy the shipped scenes and kernels to edit
  simrun run --help                       all options, and what a run folder holds

Shipped scenes, runnable by name from any folder (scenes/README.md says what each shows):
{scenes}. A scene anywhere may use the shipped kernels as simrun.kernels.<module>:<kernel>
(e.g. simrun.kernels.lj:lj_shifted).

Scenes are code: a scene runs the Python of its kernel modules (as a Python config file
would), and so do 'run', 'check', 'grad' and
'optimize'. Treat a scene from others like a script from them.
Modules outside the scene's folder, the kernels/ folder beside it and simrun's own
kernel library are refused unless --allow-outside.

A job folder keeps copies of its kernel modules (kernels/) that its scene.yaml names, and
their hashes in its json record: it resumes and re-renders wherever it is moved.

Exit status: 0 ok, 1 the run failed (e.g. NaN, disk full), 2 bad input (an unwritable
output folder included), 130 interrupted.
"""



def shipped_scenes() -> str:
    """The scenes inside the package, by name (read when the help is built)."""
    return ", ".join(scene_names()) or "none found in this installation (see the repository)"


app = typer.Typer(help=HELP.format(scenes=shipped_scenes()), no_args_is_help=True, pretty_exceptions_enable=False,
                  add_completion=False, rich_markup_mode=None)
app.command(no_args_is_help=True)(run)
app.command(no_args_is_help=True)(check)
app.command(no_args_is_help=True)(grad)
app.command(no_args_is_help=True)(optimize)
app.command(no_args_is_help=True)(render)
app.command(no_args_is_help=True)(resume)
app.command(no_args_is_help=True)(batch)
app.command()(examples)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"simrun {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Show the version and exit.")] = False
          ) -> None:
    """Differentiable physical simulation from the command line."""
    try:  # the environment's settings, refused before any command starts work
        Settings.from_environ()
    except SettingsError as exc:
        raise fail(f"error: {exc}", EXIT_BAD_INPUT) from None
