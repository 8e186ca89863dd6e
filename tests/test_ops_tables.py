"""The op registry (ir/ops.py) is complete and consistent, and its consumers read it.

Every op has one registration: a cost, a derivative rule (or NOT_DIFFERENTIABLE), and exactly
one lowering: an emitter in codegen/llvm_ops.py or a registered MathFn (float pow has both,
its integer case being code). Nothing is prefilled: a registration that forgets a field does
not construct, and dropping an op's lowering is caught (the tests below show both)."""

import dataclasses
import math

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.autodiff.rules import partials
from simrun.lang.codegen.libm import libm_symbols
from simrun.lang.codegen.llvm_ops import EMITTERS
from simrun.lang.ir import builder
from simrun.lang.ir.nodes import Expr, Var, VarRef
from simrun.lang.ir.ops import NOT_DIFFERENTIABLE, OPS, MathFn, Op, OpInfo, TypeRule
from simrun.lang.types import f32, f64, i32

MATH_AND_CODE = {Op.POW}  # float pow calls its MathFn, integer pow is code


def lowering_problems(ops: dict, emitters: dict) -> list[str]:
    """What is wrong with the ops' lowerings: none, or two where one is meant."""
    problems = []
    for op in Op:
        if op is Op.CAST:
            continue  # lowered by llvm_ops.cast from the operand's type
        info = ops.get(op)
        if info is None:
            problems.append(f"{op.name}: no registration")
            continue
        has_math, has_code = info.math is not None, op in emitters
        if not has_math and not has_code:
            problems.append(f"{op.name}: no lowering")
        elif has_math and has_code and op not in MATH_AND_CODE:
            problems.append(f"{op.name}: both an emitter and a MathFn")
    return problems


def test_every_op_has_one_registration_and_one_lowering():
    assert lowering_problems(OPS, EMITTERS) == []


@pytest.mark.parametrize("op", [op for op in Op if op is not Op.CAST])
def test_a_missing_lowering_or_registration_is_caught(op):
    """The check above is not vacuous: take away any op's lowering, or its registration."""
    emitters = {k: v for k, v in EMITTERS.items() if k is not op}
    ops = dict(OPS)
    if OPS[op].math is not None:
        ops[op] = dataclasses.replace(OPS[op], math=None)
    assert lowering_problems(ops, emitters) == [f"{op.name}: no lowering"]
    assert lowering_problems({k: v for k, v in OPS.items() if k is not op}, EMITTERS) == \
        [f"{op.name}: no registration"]


def test_a_registration_without_cost_or_derivative_rule_does_not_construct():
    with pytest.raises(TypeError):
        OpInfo(1, TypeRule.FLOAT, math.erf, 24)  # no derivative rule, no ieee fallback
    with pytest.raises(TypeError):
        OpInfo(1, TypeRule.FLOAT, math.erf)  # no cost


@pytest.mark.parametrize("op", [op for op in Op if OPS[op].differentiable])
def test_derivative_rules_build_one_partial_per_operand(op):
    """Each rule runs on IR operands (its values are checked against central differences
    in tests/test_autodiff_ops.py): one f64 expression per float operand."""
    args = [VarRef(Var(f"a{k}", f64)) for k in range(OPS[op].arity)]
    if op is Op.SELECT:
        args[0] = VarRef(Var("c", i32))
    out = builder.cast(args[0], f32) if op is Op.CAST else builder.make(op, *args)
    ps = partials(out)
    assert len(ps) == len(args)
    for p, a in zip(ps, args):
        assert (p is None) if not a.dtype.is_float else isinstance(p, Expr), (op, p)


@pytest.mark.parametrize("op", [op for op in Op if OPS[op].math is not None])
def test_math_functions_name_a_cpu_and_a_libdevice_symbol(op):
    fn = OPS[op].math
    assert isinstance(fn, MathFn) and fn.cpu
    assert fn.libdevice.isidentifier() or fn.libdevice in ("llvm.sqrt",)  # NVPTX instructions
    assert fn.libm + "f" in libm_symbols() and fn.libm in libm_symbols()


@pytest.mark.parametrize("op", list(Op))
def test_ieee_fallbacks_only_for_float_ops(op):
    """numpy's result replaces a raised math error only where the op computes in floats."""
    if OPS[op].ieee is not None:
        assert OPS[op].rule is TypeRule.FLOAT, op


def test_reference_implementations_follow_python_semantics():
    assert OPS[Op.FLOORDIV].ref(-7, 2) == -4
    assert OPS[Op.MOD].ref(-7, 2) == 1
    assert OPS[Op.MOD].ref(-7.5, 2.0) == pytest.approx(0.5)
    assert OPS[Op.ATAN2].ref(1.0, -1.0) == pytest.approx(math.atan2(1.0, -1.0))
    assert OPS[Op.SIN].deriv is not NOT_DIFFERENTIABLE and not OPS[Op.LT].differentiable


X = np.array([-3.0, -1.2, -0.3, 0.0, 1e-4, 0.47, 1.0, 2.5, 5.0])


@pytest.mark.parametrize("dtype, rtol", [(ti.f64, 4 * np.finfo(np.float64).eps),
                                         (ti.f32, 4 * np.finfo(np.float32).eps)])
def test_erf_registered_once_runs_in_kernels_and_python(dtype, rtol):
    """ti.erf (one registration in ir/ops.py) against math.erf; its derivative is checked
    against central differences in tests/test_autodiff_ops.py."""
    ti.init(arch=ti.cpu)
    x = ti.field(dtype, len(X))
    y = ti.field(dtype, len(X))

    @ti.kernel
    def erf_of():
        for i in x:
            y[i] = ti.erf(x[i])

    x.from_numpy(X)
    erf_of()
    xs = x.to_numpy().astype(np.float64)  # the inputs as rounded to dtype
    want = np.array([math.erf(v) for v in xs])
    assert np.allclose(y.to_numpy(), want, rtol=rtol, atol=rtol * 1e-3)
    assert ti.erf(0.5) == math.erf(0.5)
    assert ti.erf(ti.Vector([0.5, 1.0]))[1] == math.erf(1.0)
    with pytest.raises(TypeError, match="takes 1 argument"):
        ti.erf(1.0, 2.0)
