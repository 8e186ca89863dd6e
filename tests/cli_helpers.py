"""Running the command line as a user does: a real subprocess of this Python."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def simrun(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """`simrun ARGS...` in `cwd` (pictures off-screen, a fixed terminal width)."""
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def simrun_measured(*args: str, cwd: Path, timeout: float = 120,
                    env: dict[str, str] | None = None
                    ) -> tuple[subprocess.CompletedProcess, int]:
    """`simrun ARGS...` as `simrun` runs it, and the child's peak resident memory in bytes:
    its own (os.wait4), not the largest of every child this process has waited for, as
    RUSAGE_CHILDREN's is. ``env`` adds to the environment. A child still running after
    ``timeout`` seconds is killed (its exit status then says so)."""
    command = [sys.executable, "-m", "simrun.cli", *args]
    full = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "100", **(env or {})}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, cwd=cwd, env=full, stdout=out, stderr=err,
                                 text=True)
        killer = threading.Timer(timeout, child.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            killer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(command, child.returncode, out.read(), err.read())
    return done, usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
