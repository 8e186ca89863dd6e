"""Without a terminal (nohup, cron, a batch scheduler) run, grad and optimize write their
progress to the job folder's progress.log, ending at the last step or iteration."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECTILE = str(REPO / "scenes" / "projectile.yaml")


def simrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _lines(folder: Path) -> list[str]:
    return (folder / "progress.log").read_text().splitlines()


def test_each_job_logs_its_progress_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    run = simrun("run", PROJECTILE, "--no-render", "--out", "r", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    steps = int(re.search(r"(\d+) steps", run.stdout).group(1))
    last = _lines(tmp_path / "r")[-1]
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d projectile: ", last), last
    assert f" {steps}/{steps} steps (100%)" in last, last

    grad = simrun("grad", PROJECTILE, "--wrt", "initial.velocity", "--out", "g", cwd=tmp_path)
    assert grad.returncode == 0, grad.stderr
    assert re.search(r"grad projectile: reverse (\d+)/\1 steps \(100%\)", _lines(tmp_path / "g")[-1])

    opt = simrun("optimize", PROJECTILE, "--iterations", "3", "--no-render", "--out", "o",
                 cwd=tmp_path)
    assert opt.returncode == 0, opt.stderr
    last = _lines(tmp_path / "o")[-1]
    assert re.search(r"optimize projectile: iteration 3/3, loss \S+, \|g\| \S+", last), last
