"""The op table, the LLVM emitter table and the derivative table never drift apart."""

import math

import pytest

from simrun.lang.autodiff.rules import NON_DIFFERENTIABLE, RULES
from simrun.lang.codegen.llvm_ops import EMITTERS
from simrun.lang.ir.ops import OPS, Op


@pytest.mark.parametrize("op", list(Op))
def test_every_op_has_an_emitter(op):
    assert op in EMITTERS


@pytest.mark.parametrize("op", list(Op))
def test_every_op_has_a_derivative_rule_or_is_marked_non_differentiable(op):
    if op is Op.CAST:
        return  # casts between floats pass the adjoint through (rules.partials)
    assert (op in RULES) != (op in NON_DIFFERENTIABLE), op
    assert OPS[op].differentiable == (op in RULES), op


def test_reference_implementations_follow_python_semantics():
    assert OPS[Op.FLOORDIV].ref(-7, 2) == -4
    assert OPS[Op.MOD].ref(-7, 2) == 1
    assert OPS[Op.MOD].ref(-7.5, 2.0) == pytest.approx(0.5)
    assert OPS[Op.ATAN2].ref(1.0, -1.0) == pytest.approx(math.atan2(1.0, -1.0))
