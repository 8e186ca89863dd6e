"""Drawing a run's pictures with their state in run.json, apart from the run's own status.

``run.json`` says ``"pictures": "pending"`` from the start of a run, ``"drawing"`` while they
are drawn, then ``"done"`` (and ``timings.render_s``) or ``"failed"`` (and ``render_error``).
A run killed while drawing keeps ``"drawing"``: its status is still the simulation's ("ok"),
and ``simrun render`` finishes the pictures.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from simrun.outputs.runinfo import update_run_info
from simrun.render import render_run


@dataclass
class Pictures:
    paths: list[Path]
    seconds: float


def remove_stale_temporaries(run_dir: Path) -> None:
    """Remove the temporary pictures (``.first.<pid>.tmp.png``) of a render that was killed;
    those of a render still running (its process is alive) stay."""
    for tmp in run_dir.glob(".*.*.tmp.*"):
        pid = tmp.name.split(".")[2]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid() or os.name != "posix":  # elsewhere os.kill(pid, 0) is no probe
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def draw_pictures(run_dir: str | os.PathLike[str]) -> Pictures:
    """Render ``run_dir``'s pictures (see ``render_run``) and record their state in its
    run.json (when it has one). Errors are recorded as ``"failed"`` and raised."""
    run_dir = Path(run_dir)
    remove_stale_temporaries(run_dir)
    update_run_info(run_dir, pictures="drawing")
    started = time.perf_counter()
    try:
        paths = render_run(run_dir)
    except Exception as exc:
        update_run_info(run_dir, pictures="failed", render_error=f"{type(exc).__name__}: {exc}",
                        timings={"render_s": round(time.perf_counter() - started, 4)})
        raise
    seconds = time.perf_counter() - started
    update_run_info(run_dir, pictures="done", render_error=None,
                    timings={"render_s": round(seconds, 4)})
    return Pictures(paths, seconds)
