"""The op table and every table keyed by Op never drift apart: each has an entry for every op.

Adding an op means one OpInfo row (ir/ops.py) plus one entry in each table below; a table that
lacks the op fails here, by name."""

import math

import pytest

from simrun.lang.autodiff.rules import NON_DIFFERENTIABLE, RULES
from simrun.lang.builtins import IEEE_FALLBACKS
from simrun.lang.codegen.libm import LIBM_CALLS
from simrun.lang.codegen.llvm_ops import EMITTERS
from simrun.lang.codegen.schedule import COSTS
from simrun.lang.ir.ops import OPS, Op, TypeRule

# Every table keyed by Op; a derivative rule or a non-differentiable mark counts as one table.
TABLES = {
    "OPS (ir/ops.py)": OPS,
    "EMITTERS (codegen/llvm_ops.py)": EMITTERS,
    "LIBM_CALLS (codegen/libm.py)": LIBM_CALLS,
    "COSTS (codegen/schedule.py)": COSTS,
    "IEEE_FALLBACKS (builtins.py)": IEEE_FALLBACKS,
    "RULES or NON_DIFFERENTIABLE (autodiff/rules.py)": {**RULES, **dict.fromkeys(
        NON_DIFFERENTIABLE), Op.CAST: None},  # casts between floats pass the adjoint through
}


def missing(table) -> list:
    return [op for op in Op if op not in table]


@pytest.mark.parametrize("name", list(TABLES))
def test_every_table_has_every_op(name):
    assert missing(TABLES[name]) == [], f"{name} lacks an entry"


@pytest.mark.parametrize("name", list(TABLES))
def test_a_table_lacking_one_op_is_caught(name):
    """The check above is not vacuous: drop any one op from any one table and it fails."""
    for op in Op:
        table = {k: v for k, v in TABLES[name].items() if k is not op}
        assert missing(table) == [op]


@pytest.mark.parametrize("op", list(Op))
def test_derivative_rule_exactly_when_differentiable(op):
    if op is Op.CAST:
        return  # casts between floats pass the adjoint through (rules.partials)
    assert (op in RULES) != (op in NON_DIFFERENTIABLE), op
    assert OPS[op].differentiable == (op in RULES), op


@pytest.mark.parametrize("op", list(Op))
def test_ieee_fallbacks_only_for_float_ops(op):
    """numpy's result replaces a raised math error only where the op computes in floats."""
    if IEEE_FALLBACKS[op] is not None:
        assert OPS[op].rule is TypeRule.FLOAT, op


def test_reference_implementations_follow_python_semantics():
    assert OPS[Op.FLOORDIV].ref(-7, 2) == -4
    assert OPS[Op.MOD].ref(-7, 2) == 1
    assert OPS[Op.MOD].ref(-7.5, 2.0) == pytest.approx(0.5)
    assert OPS[Op.ATAN2].ref(1.0, -1.0) == pytest.approx(math.atan2(1.0, -1.0))
