"""The Typer application: the root command (help, --version) and its subcommands.

A subcommand's module is imported only when that command is called (or its help shown): a
`simrun` process pays for what its command needs, not for the compiler, the adjoint or Dask
of the others. `simrun --help` lists them all, and so imports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from simrun import __version__
from simrun.cli.common import EXIT_BAD_INPUT, fail
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


def _run() -> Callable[..., None]:
    from simrun.cli.run_cmd import run  # start-up: each command loads when it is called

    return run


def _check() -> Callable[..., None]:
    from simrun.cli.check_cmd import check  # start-up: each command loads when it is called

    return check


def _grad() -> Callable[..., None]:
    from simrun.cli.grad_cmd import grad  # start-up: the KEY table loads the compiler

    return grad


def _optimize() -> Callable[..., None]:
    from simrun.cli.optimize_cmd import optimize  # start-up: each command loads when called

    return optimize


def _render() -> Callable[..., None]:
    from simrun.cli.render_cmd import render  # start-up: each command loads when it is called

    return render


def _resume() -> Callable[..., None]:
    from simrun.cli.resume_cmd import resume  # start-up: each command loads when it is called

    return resume


def _batch() -> Callable[..., None]:
    from simrun.cli.batch_cmd import batch  # start-up: each command loads when it is called

    return batch


def _examples() -> Callable[..., None]:
    from simrun.cli.examples_cmd import examples  # start-up: each command loads when called

    return examples


# name -> (the loader of its function, no_args_is_help), in the order `--help` lists them
COMMANDS: dict[str, tuple[Callable[[], Callable[..., None]], bool]] = {
    "run": (_run, True), "check": (_check, True), "grad": (_grad, True),
    "optimize": (_optimize, True), "render": (_render, True), "resume": (_resume, True),
    "batch": (_batch, True), "examples": (_examples, False)}


def _click_command(function: Callable[..., None], no_args_is_help: bool) -> Any:
    """The click command Typer makes of one command function, as `app.command()` would."""
    single = typer.Typer(add_completion=False, rich_markup_mode=None,
                         pretty_exceptions_enable=False)
    single.command(no_args_is_help=no_args_is_help)(function)
    return typer.main.get_command(single)


class LazyCommands(MutableMapping):
    """The group's commands by name: those of COMMANDS made from their modules on first use
    (listing the names loads nothing), and any added as click commands."""

    def __init__(self, loaders: dict[str, tuple[Callable[[], Callable[..., None]], bool]]):
        self.loaders, self.made = dict(loaders), {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.made:
            load, no_args_is_help = self.loaders[name]  # KeyError: no such command
            self.made[name] = _click_command(load(), no_args_is_help)
        return self.made[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.made[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self.loaders.pop(name, None)
        self.made.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self.loaders, *self.made]))

    def __len__(self) -> int:
        return len(self.loaders.keys() | self.made.keys())

    def __contains__(self, name: object) -> bool:
        return name in self.loaders or name in self.made


class LazyGroup(TyperGroup):
    """simrun's root command: its subcommands from COMMANDS, loaded on first use."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(COMMANDS)


app = typer.Typer(help=HELP.format(scenes=shipped_scenes()), no_args_is_help=True, pretty_exceptions_enable=False,
                  add_completion=False, rich_markup_mode=None, cls=LazyGroup)


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
