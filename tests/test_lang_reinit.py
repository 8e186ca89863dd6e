"""ti.init again with another default_fp: a kernel's `x: float` arguments take the new
precision (the annotations were read once per process, so a module compiled under f64 went on
passing f64 scalars under f32: a silently different rounding, seen as an f32 robot's loss that
changed after an f64 run in the same process)."""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
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
