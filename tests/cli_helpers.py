"""Running the command line as a user does: a real subprocess of this Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def simrun(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """`simrun ARGS...` in `cwd` (pictures off-screen, a fixed terminal width)."""
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
