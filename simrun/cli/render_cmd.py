"""``simrun render RUN_DIR``: (re)draw a run's pictures from its saved frames."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
import yaml

from simrun.cli.common import EXIT_BAD_INPUT, exit_codes, fail, out
from simrun.outputs.rundir import check_writable
from simrun.scene import load_scene


def render(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run folder holding frames.npz, "
                                                     "e.g. outputs/gravity/run-001.",
                                                show_default=False)]) -> None:
    """Redraw the pictures of a run from its saved frames (or of a grad folder: its
    sensitivities.png, horizon.png and x0_gradient.png; or of an optimize folder: its
    loss.png, and the pictures of its episode/; or of a fit to ensemble targets: its fit.png
    and rdf.png).

    Writes first.png, last.png, energy.png and animation.gif into RUN_DIR from its
    frames.npz, energy.csv, topology.npz, scene.yaml and run.json (a run saved without
    positions gets only energy.png), and records "pictures": "done" in run.json. Use it to
    finish the pictures of a run stopped while drawing them ("pictures": "drawing")."""
    if not run_dir.is_dir():
        raise fail(f"error: {run_dir}: not found{' (it is a file)' * run_dir.exists()}. Give "
                   "the folder of a run, grad or optimize (e.g. outputs/gravity/run-001).",
                   EXIT_BAD_INPUT)
    if (run_dir / "loss.csv").is_file() and not (run_dir / "frames.npz").is_file():
        return _render_optimize(run_dir)
    if (run_dir / "fit.csv").is_file():
        from simrun.render.fit import draw_fit_pictures  # start-up: matplotlib

        return _draw(run_dir, "fit folder", "'simrun optimize'",
                     lambda: draw_fit_pictures(run_dir), "no iteration was recorded")
    if (run_dir / "gradients.json").is_file():
        return _render_grad(run_dir)
    if not (run_dir / "frames.npz").is_file():
        raise fail(f"error: {run_dir}: no frames.npz, gradients.json, loss.csv or fit.csv here, "
                   "so there is nothing to render. Give the folder of a run, grad or "
                   "optimize (e.g. outputs/gravity/run-001).", EXIT_BAD_INPUT)
    from simrun.render.record import draw_pictures  # start-up: matplotlib

    _draw(run_dir, "run", "the scene", lambda: draw_pictures(run_dir).paths,
          "no positions or energies were saved")


def _draw(folder: Path, kind: str, again: str, draw: Callable[[], list[Path]],
          empty: str) -> None:
    """Call ``draw`` and print what it wrote; a folder that cannot take the pictures or
    whose files are not what simrun writes is one clear error (exit 2)."""
    with exit_codes():
        check_writable(folder, "")  # the real cause, before any file is read
        try:
            written = draw()
        except OSError as exc:
            raise fail(f"error: {folder}: cannot render this {kind}: {exc.strerror or exc} "
                       f"({exc.filename or type(exc).__name__}). Check that the folder is "
                       "writable and has free space, then try again.", EXIT_BAD_INPUT) from None
        except (ValueError, KeyError, IndexError, TypeError, zipfile.BadZipFile) as exc:
            raise fail(f"error: {folder}: cannot render this {kind}: its saved files are not "
                       f"what simrun writes ({type(exc).__name__}: {exc}). Run {again} "
                       "again to get fresh outputs.", EXIT_BAD_INPUT) from None
    if not written:
        out.print(f"{folder}: nothing to draw ({empty})")
    for path in written:
        out.print(str(path))


def _render_optimize(opt_dir: Path) -> None:
    """loss.png from loss.csv, and the episode's pictures when it was run."""
    from simrun.render.loss import render_loss  # start-up: matplotlib

    with exit_codes():
        try:
            name = yaml.safe_load((opt_dir / "scene.yaml").read_text(encoding="utf-8"))["name"]
        except (OSError, KeyError, TypeError, yaml.YAMLError):
            name = opt_dir.parent.name
        out.print(str(render_loss(opt_dir / "loss.csv", opt_dir / "loss.png", title=name)))
    if (opt_dir / "episode" / "frames.npz").is_file():
        render(opt_dir / "episode")


def _render_grad(grad_dir: Path) -> None:
    """sensitivities.png, horizon.png and x0_gradient.png from a grad folder's files and
    its own resolved scene (for the KEYs' values and the start positions)."""
    from simrun.jobs.grad_folder import picture_inputs  # start-up: the compiler and matplotlib
    from simrun.render.sensitivity import draw_gradient_pictures

    def draw() -> list[Path]:
        record = json.loads((grad_dir / "gradients.json").read_text(encoding="utf-8"))
        scene = load_scene(grad_dir / "scene.yaml", allow_outside=True)
        if record.get("method") == "ensemble":  # its KEYs and objective are the ensemble's
            return _ensemble_pictures(grad_dir, scene, record)
        return draw_gradient_pictures(grad_dir, *picture_inputs(scene, record["gradients"]))

    _draw(grad_dir, "grad folder", "'simrun grad'", draw, "no scalar KEY, horizon or state.x0")


def _ensemble_pictures(grad_dir: Path, scene, record: dict) -> list[Path]:
    """sensitivities.png of a `grad --method ensemble` folder, with its error bars (none for
    a vector objective such as g(r), as the job itself draws none)."""
    # start-up: the compiler and matplotlib
    from simrun.ensemble.keys import parse_ensemble_key
    from simrun.keys import value_of
    from simrun.render.sensitivity import draw_gradient_pictures

    if isinstance(record["objective"]["value"], list):
        return []
    values = {k: float(value_of(scene, parse_ensemble_key(scene, k)))
              for k, g in record["gradients"].items() if not isinstance(g, list)}
    return draw_gradient_pictures(grad_dir, values, None)
