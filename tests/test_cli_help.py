"""The help the CLI prints agrees with the code: every option explained, the lists in it
generated from what the code accepts (scenes on disk, the KEYs grad parses)."""

from __future__ import annotations

import click
import pytest
import typer
from cli_helpers import REPO, simrun
from typer.testing import CliRunner

from simrun.cli.app import app
from simrun.keys import FIXED_KEYS, KEY_KINDS, THERMOSTAT_KEYS, parse_key
from simrun.scene import load_scene
from simrun.scene.schema import SCHEMA_VERSION

COMMAND = typer.main.get_command(app)
COMMANDS = sorted(COMMAND.commands.items())


@pytest.mark.parametrize("name, command", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_option_and_argument_has_help(name: str, command: click.Command) -> None:
    for param in command.params:
        text = getattr(param, "help", None)
        assert text and len(text) > 10, f"simrun {name} {param.opts}: no help"
    shown = CliRunner().invoke(app, [name, "--help"], terminal_width=100).output
    # a metavar click makes up (`<int range>`, `INTEGER RANGE`) says nothing to a user
    assert "range>" not in shown and "RANGE" not in shown, shown
    if any(p.name == "scene_path" for p in command.params):
        assert f"schema version {SCHEMA_VERSION}" in " ".join(shown.split())


def test_the_job_commands_all_take_quiet() -> None:
    for name in ("run", "grad", "optimize", "resume", "batch"):
        opts = {o for p in COMMAND.commands[name].params for o in p.opts}
        assert {"--quiet", "-q"} <= opts, name


def test_top_level_help_lists_every_shipped_scene() -> None:
    shown = " ".join(CliRunner().invoke(app, ["--help"], terminal_width=100).output.split())
    names = sorted(p.stem for p in (REPO / "scenes").glob("*.yaml"))
    assert len(names) >= 11
    listed = shown.split("says what each shows): ", 1)[1].split(".", 1)[0]
    assert listed.split(", ") == names


def test_grad_help_lists_every_kind_of_key_and_each_parses() -> None:
    """Every KEY kind in `grad --help` is one parse_key takes, on a scene that has it."""
    shown = " ".join(CliRunner().invoke(app, ["grad", "--help"], terminal_width=100)
                     .output.split())
    for kind in KEY_KINDS:
        assert kind in shown, kind
    scene = load_scene(REPO / "scenes" / "mpm.yaml", [
        "objective={kernel: kernels/targets.py:miss, params: {tx: 0.3, ty: 0.2}}"])
    examples = {"energy.<i>.params.<name>": "energy.1.params.g",
                "step_kernels.params.<name>": "step_kernels.params.gravity",
                "objective.params.<name>": "objective.params.tx", "fields.<name>": "fields.C"}
    per_pair = {"energy.<i>.params.<name>[A:B]": "energy.0.params.epsilon[A:B]"}
    on_grids = {"state.<field>": "state.height"}
    assert set(KEY_KINDS) == set(FIXED_KEYS) | set(examples) | set(THERMOSTAT_KEYS) | \
        set(per_pair) | set(on_grids)
    for kind, key in examples.items():
        assert parse_key(scene, key).text == key, kind
    mixture = load_scene(REPO / "scenes" / "kob_andersen.yaml", ["objective={builtin: total}"])
    for kind, key in per_pair.items():
        assert parse_key(mixture, key).text == key, kind
    wave = load_scene(REPO / "scenes" / "wave.yaml")
    for kind, key in on_grids.items():
        assert parse_key(wave, key).text == key, kind
    gravity = load_scene(REPO / "scenes" / "gravity.yaml", ["objective={builtin: total}"])
    for key in FIXED_KEYS:
        assert parse_key(gravity, key).text == key
    for integrator in ("{type: langevin, temperature: 1.0, friction: 1.0}",
                       "{type: nose_hoover, temperature: 1.0, tau: 0.5}"):
        nvt = load_scene(REPO / "scenes" / "gravity.yaml", [
            "objective={builtin: total}", f"integrator={integrator}"])
        settable = [k for k in THERMOSTAT_KEYS
                    if getattr(nvt.integrator, k.split(".")[1]) is not None]
        assert len(settable) == 2
        for key in settable:
            assert parse_key(nvt, key).text == key


def test_run_summary_says_every_step(tmp_path) -> None:
    done = simrun("run", str(REPO / "scenes" / "gravity.yaml"), "--steps", "2", "--set",
                  "outputs.every=1", "--no-render", "--out", "r", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "frames    every step, to step 2" in done.stdout and "every 1 steps" not in done.stdout
