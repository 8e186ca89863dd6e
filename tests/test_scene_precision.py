"""A scene's precision wins over its kernel module, through the real CLI: a module's
`ti.init(arch=ti.cpu)` (a line every Taichi program has) reset the default float to f32
under an f64 scene, so its `float` parameters ran rounded to f32 with no word; a `ti.f32`
annotation in an f64 scene is refused at its line, and a module's
`ti.init(default_fp=ti.f32)` is named, not obeyed."""

from __future__ import annotations

import re
from pathlib import Path

from test_cli import simrun
from test_cli_reliability import one_paragraph

# U = sum |x|^2 (shift - 2^24): with shift = 2^24 + 1, 1 x sum |x|^2 in f64, where f32
# rounds shift to 2^24 (24-bit significand) and U to 0. The 2 x 2 unit lattice: U = 4.
KERNEL = """import simrun.lang as ti

{init}


@ti.kernel
def trap(x: ti.template(), U: ti.template(), shift: {annotation}):
    for i in x:
        U[None] += x[i].dot(x[i]) * (shift - 16777216.0)
"""

SCENE = """version: 1
name: trap
precision: f64
particles: {count: 4, dim: 2}
initial: {type: lattice, shape: [2, 2], spacing: [1.0, 1.0]}
energy:
  - kernel: trap.py:trap
    params: {shift: 16777217.0}
integrator: velocity_verlet
dt: 0.001
steps: 10
"""


def _check(tmp_path: Path, init: str, annotation: str = "float"):
    (tmp_path / "trap.py").write_text(KERNEL.format(init=init, annotation=annotation))
    (tmp_path / "trap.yaml").write_text(SCENE)
    return simrun("check", "trap.yaml", cwd=tmp_path)


def _energy(done) -> float:
    assert done.returncode == 0, done.stderr
    found = re.search(r"potential energy at step 0 = (\S+)", done.stdout)
    assert found, done.stdout
    return float(found.group(1))


def test_a_modules_ti_init_leaves_the_scenes_f64_alone(tmp_path: Path) -> None:
    done = _check(tmp_path, "ti.init(arch=ti.cpu)")
    assert _energy(done) == 4.0  # exact: every term is an integer below 2^53
    assert done.stderr.strip() == ""  # nothing to say: the scene's settings simply hold


def test_a_modules_f32_default_is_named_and_the_scene_wins(tmp_path: Path) -> None:
    done = _check(tmp_path, "ti.init(arch=ti.cpu, default_fp=ti.f32)")
    assert _energy(done) == 4.0
    assert "trap.py:3: ti.init(default_fp=f32) is ignored" in done.stderr, done.stderr
    assert "precision (f64)" in done.stderr


def test_an_f32_argument_in_an_f64_scene_is_refused_at_its_annotation(tmp_path: Path) -> None:
    message = one_paragraph(_check(tmp_path, "", annotation="ti.f32"))
    assert "trap.py:7:" in message  # the line of `shift: ti.f32`
    assert "kernel 'trap' argument 'shift' is annotated f32" in message
    assert "computes in f64" in message and "Annotate it `float`" in message
