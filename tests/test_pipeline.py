"""The pass pipeline (simrun/lang/pipeline.py) and the IR verifier it runs in tests."""

import pytest

import simrun.lang as ti
from simrun.lang import pipeline
from simrun.lang.ir import builder
from simrun.lang.ir.nodes import Assign, OpExpr, Var
from simrun.lang.ir.ops import Op
from simrun.lang.ir.verify import IRError, verify


@pytest.fixture(autouse=True)
def _init():
    ti.init(default_fp=ti.f32)


def _kernel():
    x = ti.field(ti.f32, shape=8, needs_grad=True)
    s = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def total():
        for i in x:
            for j in range(4):
                s[None] += x[i] * j

    return total


def test_passes_run_in_order_and_are_checked_after_each(monkeypatch):
    seen = []
    monkeypatch.setattr(pipeline, "checks", pipeline.checks + [lambda kir, name: seen.append(name)])
    kir, _ = _kernel().lower(())
    pipeline.run(kir, "reverse", "total")
    assert seen == ["frontend", "autodiff (reverse)", "dead_code", "hoist_atomics"]


def test_verify_accepts_what_the_pipeline_makes_and_names_what_breaks():
    kir, _ = _kernel().lower(())
    kir = pipeline.run(kir, "reverse", "total")
    verify(kir)
    body = kir.tasks[0].body
    v = Var("bad", ti.f32)
    body.append(Assign(v, OpExpr(Op.ADD, (builder.const(1, ti.i32), builder.const(2, ti.i32)),
                                 ti.f32)))
    with pytest.raises(IRError, match="after dead_code: Assign: add typed f32, its operands give i32"):
        verify(kir, after="dead_code")
    body[-1] = Assign(v, builder.const(1, ti.i32))
    with pytest.raises(IRError, match="i32 value assigned to f32 local"):
        verify(kir)
