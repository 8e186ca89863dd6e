"""ti.init again with another default_fp: a kernel's `x: float` arguments take the new
precision (the annotations were read once per process, so a module compiled under f64 went on
passing f64 scalars under f32: a silently different rounding, seen as an f32 robot's loss that
changed after an f64 run in the same process)."""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.lang.fields import grad_of
from simrun.stepper.binding import load_module

KEEP = """import simrun.lang as ti


@ti.kernel
def keep(a: float, out: ti.template()):
    out[None] = a
"""


def test_float_arguments_follow_the_current_default_fp(tmp_path):
    path = tmp_path / "keep.py"
    path.write_text(KEEP)
    keep = load_module(path).keep
    seen = {}
    for fp in (ti.f64, ti.f32, ti.f64):
        ti.init(default_fp=fp)
        out = ti.field(ti.f64, shape=())  # f64 storage shows what the argument held
        keep(0.1, out)
        seen.setdefault(fp, []).append(out[None])
    assert seen[ti.f32] == [float(np.float32(0.1))]
    assert seen[ti.f64] == [0.1, 0.1]


def test_lazy_grad_gives_gradients_only_to_the_current_programs_fields():
    """Taichi's lazy_grad places gradients in the current program; simrun's walked every
    field still alive in the process, so an earlier program's fields (a test module's, a
    previous scene's) each got a gradient array: memory nobody asked for."""
    ti.init()
    earlier = ti.field(ti.f32, shape=1000)
    ti.init()
    declared_before_placed = ti.field(ti.f32)  # placed below: part of this program
    current = ti.Vector.field(2, ti.f32, shape=8)
    ti.root.dense(ti.i, 4).place(declared_before_placed)
    ti.root.lazy_grad()
    assert grad_of(earlier) is None
    assert current.grad.shape == (8,) and declared_before_placed.grad.shape == (4,)
