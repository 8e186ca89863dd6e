"""Ctrl-C and SIGTERM cut a long native chain call at a repetition's end under the CLI's
`exit_codes` (runtime/interrupt.py), and nowhere else.

Each case runs in its own interpreter: the signal is sent by a thread once the chain call is
in flight (the point is the program's, not a timer's), and the call asks for far more
repetitions than would finish within the subprocess's timeout, so without the watcher the
test fails by that timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.cpu_only("native chains post CPU tasks; a GPU runs launch by launch")

SETUP = r"""
import os, signal, sys, threading, time
import numpy as np
import simrun.lang as ti
from simrun.lang.api import runtime
from simrun.lang.runtime import interrupt
from simrun.lang.runtime.chain import Chain

ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
x, y = ti.field(ti.f64, shape=64), ti.field(ti.f64, shape=64)


@ti.kernel
def add(x: ti.template(), y: ti.template()):
    for i in x:
        y[i] = y[i] + x[i]


x.fill(1.0)
chain = Chain(runtime(), [add.prepare((x, y), "primal")[:2]])


def signal_when_in_flight(signum):
    def send():
        while not interrupt.in_flight:
            time.sleep(0.001)
        os.kill(os.getpid(), signum)
    threading.Thread(target=send, daemon=True).start()
"""

CUT = SETUP + r"""
from simrun.cli.common import exit_codes
signal_when_in_flight(getattr(signal, sys.argv[1]))
try:
    with exit_codes():
        chain.run(2**62)
except BaseException as exc:  # typer.Exit(130): the CLI's 'interrupted'
    values = y.to_numpy()
    # stopped at a repetition's end: every entry the same whole count of additions
    print("exit", getattr(exc, "exit_code", type(exc).__name__),
          "uniform", bool((values == values[0]).all() and values[0] == int(values[0])),
          "some", values[0] > 0)
"""

NOT_CUT = SETUP + r"""
signal.signal(signal.SIGINT, lambda *a: print("handled"))  # a handler that does not raise
signal_when_in_flight(signal.SIGINT)
done = chain.run(300_000)
print("done", done, "all", bool((y.to_numpy() == 300_000).all()))
"""


def _python(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "interrupted.py"  # a file: kernels need their source
    path.write_text(script)
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_cuts_a_long_chain_call_at_a_repetitions_end(signum: str,
                                                               tmp_path: Path) -> None:
    done = _python(tmp_path, CUT, signum)
    assert done.returncode == 0, done.stderr
    assert "exit 130 uniform True some True" in done.stdout, done.stdout + done.stderr


def test_outside_the_cli_a_signal_whose_handler_returns_leaves_the_call_whole(
        tmp_path: Path) -> None:
    done = _python(tmp_path, NOT_CUT)
    assert done.returncode == 0, done.stderr
    assert "handled" in done.stdout and "done 300000 all True" in done.stdout, done.stdout
