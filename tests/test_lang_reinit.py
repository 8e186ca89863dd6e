"""ti.init with another default_fp: a `float` parameter takes the new precision (it kept the
first init's f32 and rounded f64 arguments to it: an f32 scene then an f64 scene in one
process, as pytest and batch workers run them, gave f64 scenes f32 parameters)."""

from __future__ import annotations

import simrun.lang as ti


@ti.kernel
def store(out: ti.template(), a: float):
    out[None] = a


def test_float_parameter_follows_the_current_default_fp():
    ti.init(arch=ti.cpu, default_fp=ti.f32)
    out32 = ti.field(ti.f32, shape=())
    store(out32, 0.1)
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    out64 = ti.field(ti.f64, shape=())
    store(out64, 0.1)
    assert out64[None] == 0.1  # not float32(0.1) = 0.10000000149011612
