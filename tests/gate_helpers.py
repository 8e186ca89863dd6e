"""Holding a simrun job mid-way on any machine, instead of hoping it is still running.

A scene gets one more energy term, ``gate.py:gate``, that adds no energy and no force. From
its ``hold_after + 1``-th evaluation in a process on, it waits while the gate file exists,
after appending ``pid call`` to ``<gate>.held``. So a test that creates the gate, starts a
job and waits for ``<gate>.held`` knows the job is past ``hold_after`` energy evaluations
and cannot finish until the test removes the gate, however fast or slow the machine. A
signal (Ctrl-C) then interrupts the wait like any step. The term is a ``ti.ad.grad_replaced``
Python function, so the job steps launch by launch (the native chain cannot call Python).

Importing the module also holds the process's pictures: while ``<gate>.draw`` exists,
drawing them (``simrun.render.record.render_run``) waits after appending to
``<gate>.draw.held``, with run.json saying ``"pictures": "drawing"``.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

MODULE = '''"""Test gate: no energy, no force; waits while {gate!r} exists (tests/gate_helpers.py)."""
import os
import time

import simrun.lang as ti

GATE = {gate!r}
calls = [0]


@ti.ad.grad_replaced
def gate(x, U, hold_after):
    calls[0] += 1
    if calls[0] > hold_after and os.path.exists(GATE):
        _wait(GATE)


@ti.ad.grad_for(gate)
def gate_grad(x, U, hold_after):
    pass


def _wait(gate):
    with open(gate + ".held", "a") as held:
        held.write(f"{{os.getpid()}} 0\\n")
    while os.path.exists(gate):
        time.sleep(0.01)


def _hold_the_pictures():
    import simrun.render.record as record

    draw = record.render_run
    if getattr(draw, "gated", False):
        return

    def gated(run_dir):
        if os.path.exists(GATE + ".draw"):
            _wait(GATE + ".draw")
        return draw(run_dir)

    gated.gated = True
    record.render_run = gated


_hold_the_pictures()
'''


def write_gate(folder: Path, gate: Path) -> Path:
    """``folder/gate.py`` waiting on ``gate``, which is created (closed gate)."""
    module = folder / "gate.py"
    module.write_text(MODULE.format(gate=str(gate)))
    gate.touch()
    return module


def gated_scene(shipped: str, folder: Path, gate: Path, hold_after: int) -> Path:
    """``folder/<shipped>.yaml``: the shipped scene with its kernels named by their stable
    names (simrun.kernels.<module>) and the gate term added to its energy; the gate closed."""
    from simrun.scene.shipped import SCENES

    write_gate(folder, gate)
    text = (SCENES / f"{shipped}.yaml").read_text()
    text = re.sub(r"kernels/(\w+)\.py:", r"simrun.kernels.\1:", text)
    text, found = re.subn(r"\nenergy:\n", f"\nenergy:\n  - {term('gate.py', hold_after)}\n",
                          text)
    assert found == 1, "the scene's energy: is not a block list"
    path = folder / f"{shipped}.yaml"
    path.write_text(text)
    return path


def term(module: str, hold_after: int) -> str:
    """The energy term as a YAML flow mapping (``module``: the path the scene writes)."""
    return f"{{kernel: '{module}:gate', params: {{hold_after: {hold_after}}}}}"


def held(gate: Path) -> list[int]:
    """The pids of the processes waiting at the gate (each once)."""
    marker = Path(f"{gate}.held")
    if not marker.exists():
        return []
    pids = [int(line.split()[0]) for line in marker.read_text().splitlines() if line.strip()]
    return list(dict.fromkeys(pids))


def wait_until_held(gate: Path, proc: subprocess.Popen | None = None, limit: float = 300,
                    count: int = 1) -> None:
    """Until ``count`` processes wait at the gate (an error if ``proc`` ends first: it
    cannot pass a closed gate, so it failed). ``limit`` only bounds a broken test."""
    deadline = time.monotonic() + limit
    while len(held(gate)) < count:
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"exited {proc.returncode} before the gate: {err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no job reached the gate {gate} in {limit} s")
        time.sleep(0.02)


def open_gate(gate: Path) -> None:
    """Let every waiting job go on (and later ones pass)."""
    gate.unlink(missing_ok=True)
