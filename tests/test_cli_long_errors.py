"""A kernel error too long for the terminal is cut there, and kept whole in a file it names."""

from __future__ import annotations

import re
from pathlib import Path

from cli_helpers import simrun

NAME = "very_" * 100 + "long"  # an undefined name of 504 characters: the message is cut
MODULE = f'''import simrun.lang as ti


@ti.kernel
def spring(x: ti.template(), U: ti.template()):
    for i in x:
        U[None] += x[i].norm_sqr() * {NAME}
'''
SCENE = """version: 2
name: long
particles: {count: 4, dim: 2, mass: 1.0}
initial: {type: random, low: [0, 0], high: [1, 1]}
energy:
  - {kernel: k.py:spring}
dt: 0.01
steps: 3
objective: {builtin: kinetic}
"""


def _kept(stderr: str, cwd: Path) -> Path:
    found = re.search(r"characters\)\. The whole message: (\S+)\. Fix the kernel module\.",
                      stderr)
    assert found, stderr
    return cwd / found.group(1)


def test_a_cut_compile_error_is_kept_whole_and_says_where(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(MODULE)
    (tmp_path / "s.yaml").write_text(SCENE)
    checked = simrun("check", "s.yaml", cwd=tmp_path)
    assert checked.returncode == 2 and NAME not in checked.stderr
    assert len(checked.stderr) < 1000 and "k.py:7:38: kernel 'spring'" in checked.stderr
    kept = _kept(checked.stderr, tmp_path)  # no job folder: a file of its own
    assert f"name '{NAME}'" in kept.read_text() and "k.py:7" in kept.read_text()
    kept.unlink()
    graded = simrun("grad", "s.yaml", "--wrt", "dt", "--out", "g", cwd=tmp_path)
    assert graded.returncode == 2 and NAME not in graded.stderr
    kept = _kept(graded.stderr, tmp_path)  # the job's folder exists: its error.log
    assert kept == tmp_path / "g" / "error.log" and f"name '{NAME}'" in kept.read_text()
