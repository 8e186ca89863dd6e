"""``run.json``: versions, seed, scene, timings and exit status of one run."""

from __future__ import annotations

import errno
import json
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from simrun.outputs.atomic import atomic_write_text
from simrun.version import __version__


def versions() -> dict[str, str]:
    """Versions of what decides a run's numbers: simrun, Python, NumPy, llvmlite."""
    found = {"simrun": __version__, "python": platform.python_version()}
    for dist in ("numpy", "llvmlite"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "not installed"
    return found


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_info(scene_path: Path, seed: int, steps: int, argv: list[str] | None = None
                 ) -> dict[str, Any]:
    return {
        "status": "running",
        "versions": versions(),
        "platform": platform.platform(),
        "command": list(sys.argv if argv is None else argv),
        "scene": str(scene_path),
        "seed": seed,
        "steps_requested": steps,
        "steps_done": 0,
        "started": now(),
        "finished": None,
        "timings": {},
        "error": None,
        "pictures": "pending",  # drawn after the run: see simrun.render.record
    }


def write_run_info(path: Path, info: dict[str, Any]) -> None:
    """Replace run.json atomically; on a full disk, rewrite it in place instead.

    run.json is what says a run stopped because the disk is full, and a full disk has no
    room for the temporary copy an atomic write needs. In place, the blocks the old text
    frees take the new one (a few hundred bytes longer at most: it fits the same 4 KB)."""
    text = json.dumps(info, indent=2, default=str) + "\n"
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        if exc.errno != errno.ENOSPC or not Path(path).is_file():
            raise
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(text.encode("utf-8"))


def update_run_info(run_dir: Path, **changes: Any) -> dict[str, Any] | None:
    """Merge ``changes`` into ``run_dir/run.json`` (``timings`` merged key by key); None and
    nothing written when the run has no readable run.json."""
    path = Path(run_dir) / "run.json"
    try:
        info = read_run_info(path)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    timings = changes.pop("timings", None)
    info.update(changes)
    if timings:
        info.setdefault("timings", {}).update(timings)
    write_run_info(path, info)
    return info


def read_run_info(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())
