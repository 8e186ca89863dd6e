"""A kernel bound to grid fields of different shapes (wave's objective loops over a 32 x 32
target and reads a 24 x 24 height field at the same [i, j]): `simrun check` printed an
objective read from beside the field (9.5e29, exit 0), and grad and optimize failed with
exit 1 only because the reverse sweep's writes hit a guard zone. Now every job refuses it
before running (exit 2 at the kernel's line, naming the field and its shape), and check
bounds-checks what the compiler cannot decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import REPO, simrun

WAVE = REPO / "simrun" / "kernels" / "wave.py"
LOOP_LINE = next(n for n, text in enumerate(WAVE.read_text().splitlines(), 1)
                 if "for i, j in target:" in text)

SCENE = """version: 2
name: two_grids
precision: f64
grids:
  water:
    shape: [24, 24]
    spacing: 0.04
    fields:
      height: {}
      height_next: {}
  goal:
    shape: [32, 32]
    spacing: 0.04
    fields:
      target: {value: 0.5, frames: false}
step_kernels:
  kernels: [simrun.kernels.wave:leap, simrun.kernels.wave:swap]
  params: {c: 1.0}
dt: 0.01
steps: 3
outputs: {every: 1, xyz: false}
objective:
  kernel: OBJECTIVE
optimize:
  parameters: [state.height]
  optimizer: sgd
  lr: 1.0
  iterations: 2
"""

GUARDED = """import simrun.lang as ti


@ti.kernel
def match_where_set(height_next: ti.template(), target: ti.template(), L: ti.template(),
                    dx: float):
    for i, j in target:
        if target[i, j] > -1.0:  # always true, but only a run can tell
            L[None] += dx * dx * (target[i, j] - height_next[i, j]) ** 2
"""

COMMANDS = {"check": ["check", "s.yaml"],
            "grad": ["grad", "s.yaml", "--wrt", "state.height", "--out", "out", "-q"],
            "optimize": ["optimize", "s.yaml", "--out", "out", "-q", "--no-render"]}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_loop_over_a_larger_grid_reading_a_smaller_one_is_exit_2_at_its_line(
        tmp_path: Path, command: str) -> None:
    (tmp_path / "s.yaml").write_text(SCENE.replace("OBJECTIVE", "simrun.kernels.wave:"
                                                   "match_target"))
    done = simrun(*COMMANDS[command], cwd=tmp_path, timeout=600)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "Traceback" not in done.stderr
    first = next(t for t in done.stderr.splitlines() if t.startswith("error:"))
    assert first.startswith(f"error: {WAVE}:{LOOP_LINE + 1}:"), first
    assert "kernel 'match_target'" in first and f"loop at line {LOOP_LINE}" in first, first
    assert "field 'height_next' of shape (24, 24)" in first and "[31, 31]" in first, first
    assert "objective" not in done.stdout  # no number was printed
    if command != "check":  # the job's record says it failed, with no objective
        record = "gradients.json" if command == "grad" else "optimize.json"
        written = json.loads((tmp_path / "out" / record).read_text())
        assert written["status"] == "failed", written


def test_check_bounds_checks_what_the_compiler_cannot_decide(tmp_path: Path) -> None:
    # the same read under an `if`: the compiler lets it through, check's launches are
    # bounds-checked (with or without --debug), so no objective read from beside a field
    (tmp_path / "g.py").write_text(GUARDED)
    (tmp_path / "s.yaml").write_text(SCENE.replace("OBJECTIVE", "g.py:match_where_set"))
    done = simrun("check", "s.yaml", cwd=tmp_path, timeout=600)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "Traceback" not in done.stderr and "objective" not in done.stdout
    assert f"{tmp_path / 'g.py'}:9: in kernel 'match_where_set': index (0, 24) is out of " \
        "range for field 'height_next' of shape (24, 24)" in done.stderr, done.stderr


def test_the_same_scene_with_one_grid_shape_checks_and_runs(tmp_path: Path) -> None:
    # the rule refuses only the mismatch: both grids 32 x 32, the objective is J at step 0,
    # dx^2 * sum (0.5 - 0)^2 over the 32 x 32 cells (height starts at 0)
    (tmp_path / "s.yaml").write_text(SCENE.replace("[24, 24]", "[32, 32]").replace(
        "OBJECTIVE", "simrun.kernels.wave:match_target"))
    done = simrun("check", "s.yaml", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(t for t in done.stdout.splitlines() if t.strip().startswith("objective"))
    assert float(line.split()[1]) == pytest.approx(0.04 ** 2 * 32 * 32 * 0.25, rel=1e-12)
