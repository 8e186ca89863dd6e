"""Where a run's files go: ``outputs/<scene>/run-NNN`` by default, or a folder given by the user."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from simrun.scene import SceneError
from simrun.scene.errors import shorten

OUTPUT_FILES = ("frames.npz", "trajectory.xyz", "energy.csv", "state.npz", "run.json",
                "scene.yaml", "topology.npz", "first.png", "last.png", "energy.png",
                "animation.gif")
COPY_FOLDERS = ("kernels", "inputs")  # the copies of the sources (simrun.outputs.provenance)


@dataclass(frozen=True)
class Wording:
    """How the caller spells the choices an error suggests: the CLI's options, or the Python
    API's arguments (``simrun.run_scene``), so each message names what its reader can type."""

    out: str = "--out"
    overwrite: str = "Add --overwrite"
    resume: str = "'simrun resume'"  # continue a run
    resume_flag: str = "--resume"  # the option that asked for it


CLI_WORDING = Wording()
API_WORDING = Wording(out="out_dir", overwrite="Pass overwrite=True", resume="resume=True",
                      resume_flag="resume=True")


def check_writable(folder: Path, option: str = "--out") -> None:
    """SceneError when the existing ``folder`` refuses a new file (its permissions, a file
    system mounted read-only), found before anything is compiled or written."""
    try:
        fd, name = tempfile.mkstemp(prefix=".simrun-probe-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        other = f", or choose another {option}" if option else ""
        raise SceneError(f"{shorten(str(folder))}: cannot write in this folder "
                         f"({exc.strerror or type(exc).__name__}). Make it writable (check "
                         f"its permissions, and whether its file system is mounted "
                         f"read-only){other}.") from None
def run_ids(base: Path, prefix: str = "run") -> list[tuple[int, Path]]:
    if not base.is_dir():
        return []
    pattern = re.compile(rf"^{prefix}-(\d+)$")
    found = [(int(m.group(1)), p) for p in base.iterdir()
             if p.is_dir() and (m := pattern.match(p.name))]
    return sorted(found)


def new_run_dir(base: Path, prefix: str = "run") -> Path:
    """Create and return ``base/<prefix>-NNN`` (run-001, grad-001) with the next free number."""
    base.mkdir(parents=True, exist_ok=True)
    number = run_ids(base, prefix)[-1][0] + 1 if run_ids(base, prefix) else 1
    while True:
        path = base / f"{prefix}-{number:03d}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            number += 1


def latest_run_dir(base: Path, wording: Wording = CLI_WORDING) -> Path:
    """The newest ``run-NNN`` under ``base`` that has a resume state."""
    for _number, path in reversed(run_ids(base)):
        if (path / "state.npz").is_file():
            return path
    raise SceneError(f"{base}: there is no earlier run of this scene to resume. Run it without "
                     f"{wording.resume_flag} first, or give the run folder with {wording.out}.")


def clear_outputs(path: Path) -> None:
    """Remove the files a run writes (and stray temporaries), nothing else."""
    for name in OUTPUT_FILES:
        (path / name).unlink(missing_ok=True)
    for name in COPY_FOLDERS:
        shutil.rmtree(path / name, ignore_errors=True)
    for tmp in path.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


@contextmanager
def _usable(folder: Path, wording: Wording = CLI_WORDING) -> Iterator[None]:
    """Turn an OSError about ``folder`` (permissions, a name too long, no space) into a
    SceneError that says so."""
    try:
        yield
    except OSError as exc:
        raise SceneError(f"{shorten(str(folder))}: cannot use this folder for a run "
                         f"({exc.strerror or type(exc).__name__}). Choose another {wording.out}, or "
                         "check its permissions and the free space.") from None


def check_out_dir(out: Path, *, overwrite: bool, wording: Wording = CLI_WORDING) -> bool:
    """Whether ``out`` can take a new run (SceneError if not); True when a run there must be
    cleared first. Changes nothing, so the CLI can ask before compiling anything."""
    with _usable(out, wording):
        return _check_out_dir(out, overwrite, wording)


def _check_out_dir(out: Path, overwrite: bool, wording: Wording) -> bool:
    if out.exists() and not out.is_dir():
        raise SceneError(f"{out}: is a file, not a folder. Give {wording.out} a folder for "
                         "the run.")
    if out.is_dir() and any(out.iterdir()):
        ours = [n for n in OUTPUT_FILES if (out / n).exists()]
        if not ours:
            raise SceneError(f"{out}: the folder is not empty and holds no simrun run. Choose "
                             f"an empty or new folder for {wording.out}.")
        if not overwrite:
            raise SceneError(f"{out}: the folder already holds a run. {wording.overwrite} to "
                             f"replace it, {wording.resume} to continue it, or choose another "
                             f"{wording.out}.")
        check_writable(out, wording.out)
        return True
    if out.is_dir():
        check_writable(out, wording.out)
    return False


def choose_run_dir(scene_name: str, out: Path | None, *, resume: bool, overwrite: bool,
                   root: Path = Path("outputs"), wording: Wording = CLI_WORDING) -> Path:
    """Pick (and prepare) the folder for a run, following --out/--resume/--overwrite.

    With ``resume`` nothing is created or changed."""
    with _usable(root / scene_name if out is None else out, wording):
        if out is None:
            base = root / scene_name
            if resume:
                found = latest_run_dir(base, wording)
                check_writable(found, "")
                return found
            return new_run_dir(base)
        if resume:
            if out.is_dir():
                check_writable(out, "")
            return out
        if check_out_dir(out, overwrite=overwrite, wording=wording):
            clear_outputs(out)
        out.mkdir(parents=True, exist_ok=True)
        return out
