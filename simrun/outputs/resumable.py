"""What a job folder can still do after a write failed: be resumed, or be started again.

Every job (run, grad, optimize, batch) writes its files atomically, so a full disk leaves
each file either old or new; whether ``simrun resume`` can continue depends only on whether
the folder got as far as its json record (and scene.yaml, which the record's job reloads).
The advice a full disk prints is built here, once, so it is never one that then fails.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from shlex import quote

from simrun.outputs.atomic import atomic_write_text

JOB_RECORDS = {"run.json": "run", "gradients.json": "grad", "optimize.json": "optimize",
               "fit.json": "fit", "batch.json": "batch"}  # fit: optimize of ensemble targets
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # the disk (or the user's quota) is full


def is_no_room(exc: BaseException) -> bool:
    """An OSError that says the disk or quota is full (any writer, pictures included)."""
    return isinstance(exc, OSError) and exc.errno in NO_ROOM


class UnreadableRecord(ValueError):
    """A folder's json record exists but cannot be read: what `simrun resume` says."""

    def __init__(self, path: Path, exc: Exception) -> None:
        super().__init__(f"{path}: cannot resume: the record cannot be read "
                         f"({type(exc).__name__}: {exc}). Start the job again.")


def job_record(folder: Path) -> tuple[str, dict] | None:
    """The job a folder holds and its json record (the first of JOB_RECORDS the folder has
    that holds an object); None when it has none, UnreadableRecord when that file is there
    but cannot be read."""
    for name, job in JOB_RECORDS.items():
        path = folder / name
        if not path.is_file():
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UnreadableRecord(path, exc) from None
        if isinstance(record, dict):
            return job, record
    return None


def mark_failed(record_path: Path, message: str) -> None:
    """A job record (gradients.json) says 'failed' and why: an error found after the folder
    was made must not leave it claiming 'running' (Ctrl-C alone does: it is resumed)."""
    path = Path(record_path)
    record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    record.update(status="failed", error=message)
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")


def resumable(folder: Path) -> bool:
    """Whether ``simrun resume folder`` has what it needs: a readable record, and the
    scene.yaml a run, grad or optimize reloads (a batch's record names its scene itself)."""
    try:
        found = job_record(folder)
    except UnreadableRecord:
        return False
    return found is not None and (found[0] == "batch" or (folder / "scene.yaml").is_file())


def how_to_continue(folder: Path | None) -> str:
    """``continue with 'simrun resume DIR'`` where that works, else how to start again."""
    if folder is None:
        return "run the same command again"
    if resumable(folder):
        return f"continue with 'simrun resume {quote(str(folder))}'"
    if folder.exists():
        return (f"delete {quote(str(folder))} (it holds no job that can be resumed) and run "
                "the same command again")
    return "run the same command again"


def no_room_message(exc: OSError, folder: Path | None) -> str:
    """One paragraph for a write that found the disk full: which file, why, what next."""
    name = Path(exc.filename).name if exc.filename else "an output file"
    where = f"{folder}: " if folder is not None else ""
    return (f"{where}cannot write {name} ({exc.strerror or exc}). The files already written "
            f"are valid. Free some space, then {how_to_continue(folder)}.")
