"""``run.json``: versions, seed, scene, timings and exit status of one run."""

from __future__ import annotations

import json
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from simrun.outputs.atomic import atomic_write_text


def versions() -> dict[str, str]:
    """Versions of what decides a run's numbers: simrun, Python, NumPy, llvmlite."""
    import simrun

    found = {"simrun": simrun.__version__, "python": platform.python_version()}
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
    }


def write_run_info(path: Path, info: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(info, indent=2, default=str) + "\n")


def read_run_info(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())
