"""Shared by the batch tests: a private copy of the gravity scene, the summary, waiting."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scene_copy(tmp: Path, steps: int = 2000, every: int = 100) -> Path:
    """scenes/gravity.yaml and kernels/gravity.py copied under ``tmp`` (so a test may edit
    the kernel), with ``steps`` steps, a frame every ``every`` and no pictures to draw."""
    (tmp / "scenes").mkdir(parents=True, exist_ok=True)
    (tmp / "kernels").mkdir(exist_ok=True)
    shutil.copy(ROOT / "kernels" / "gravity.py", tmp / "kernels" / "gravity.py")
    text = (ROOT / "scenes" / "gravity.yaml").read_text().replace(
        "steps: 20000", f"steps: {steps}").replace("every: 100", f"every: {every}")
    path = tmp / "scenes" / "gravity.yaml"
    path.write_text(text)
    return path


def gated_scene_copy(tmp: Path, steps: int = 2000, every: int = 100,
                     hold_after: int = 1_000_000_000) -> Path:
    """``scene_copy`` with the energy term ``energy.1`` of tests/gate_helpers.py: a job
    waits at ``tmp/gate`` (created, closed) from its energy evaluation ``hold_after + 1``."""
    from tests.gate_helpers import term, write_gate

    path = scene_copy(tmp, steps, every)
    write_gate(tmp / "kernels", tmp / "gate")
    text = path.read_text().replace(
        "    params: {softening: 1e-3, strength: 1.0}\n",
        "    params: {softening: 1e-3, strength: 1.0}\n"
        f"  - {term('kernels/gate.py', hold_after)}\n")
    assert "gate.py" in text
    path.write_text(text)
    return path


def summary(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv", newline="") as f:
        return list(csv.DictReader(f))


def count(out: Path, status: str) -> int:
    try:
        return sum(r["status"] == status for r in summary(out))
    except (OSError, KeyError):
        return 0


def wait_for(what: Callable[[], bool], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(0.1)


def simrun(*args: str, cwd: Path | None = None, **kw) -> subprocess.Popen:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.Popen([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def run_ok(out: Path) -> None:
    """Every row done, and every job folder a finished run."""
    import json

    rows = summary(out)
    assert rows and all(r["status"] == "done" for r in rows), rows
    for r in rows:
        info = json.loads((out / r["folder"] / "run.json").read_text())
        assert info["status"] == "ok", (r["folder"], info["status"])
