"""``simrun examples [DIR]``: copy the shipped scenes and kernel library into a folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from simrun.cli.common import exit_codes, out
from simrun.scene.shipped import copy_examples


def examples(dest: Annotated[Path, typer.Argument(
        metavar="DIR", help="Folder to copy into (created when missing).")]
        = Path("simrun-examples")) -> None:
    """Copy the shipped scenes (with their data files) and the kernel library into DIR.

    DIR gets scenes/ and kernels/ laid out as in the simrun repository, so every scene runs
    there as it is and the README's commands work in DIR as written (cd DIR; simrun run
    scenes/gravity.yaml). Edit the copies freely: nothing already in DIR is overwritten (a
    file that exists is an error, exit 2, and nothing is copied). To run a shipped scene
    unchanged, no copy is needed: 'simrun run gravity' from any folder."""
    with exit_codes():
        written = copy_examples(dest)
    scenes = sorted(p.stem for p in written if p.parent.name == "scenes" and p.suffix == ".yaml")
    out.print(f"copied {len(scenes)} scenes and their kernels into {dest}/ (scenes/, kernels/);"
              f" e.g. cd {dest} && simrun run scenes/gravity.yaml", markup=False)
