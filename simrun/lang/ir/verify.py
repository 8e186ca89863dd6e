"""Structural and type checks of a kernel's IR: what every pass must preserve.

The pipeline runs these after each pass when asked to (tests ask for every kernel they
compile: tests/conftest.py); a failure names the pass that broke the IR.
"""

from __future__ import annotations

from .access import stmt_exprs
from .nodes import (
    Assign,
    Atomic,
    Const,
    Expr,
    For,
    KernelIR,
    Load,
    OpExpr,
    Store,
    VarRef,
    walk,
)
from .ops import ATOMIC_NAMES, OPS, Op, result_type


class IRError(AssertionError):
    """The IR breaks an invariant; raised by verify()."""


def verify(kir: KernelIR, after: str = "") -> None:
    """Raise IRError unless every expression is well-formed and typed by the op table, and
    every statement stores values of the type of what it stores into."""
    where = f" after {after}" if after else ""
    for task in kir.tasks:
        if task.kind not in ("range", "serial"):
            raise IRError(f"{kir.name}{where}: task kind {task.kind!r}")
        for s in walk(task.body):
            problem = _stmt_problem(s)
            if problem is None:
                problem = next(filter(None, (_expr_problem(e) for e in stmt_exprs(s))), None)
            if problem is not None:
                raise IRError(f"{kir.name}{where}: {type(s).__name__}: {problem}")


def _stmt_problem(s) -> str | None:
    if isinstance(s, Assign) and s.value.dtype != s.var.dtype:
        return f"{s.value.dtype} value assigned to {s.var.dtype} local {s.var!r}"
    if isinstance(s, (Load, Store, Atomic)) and len(s.indices) != len(s.field.shape):
        return f"{len(s.indices)} indices into field of shape {s.field.shape}"
    if isinstance(s, Load) and s.var.dtype != s.field.dtype:
        return f"{s.field.dtype} loaded into {s.var.dtype} local"
    if isinstance(s, (Store, Atomic)) and s.value.dtype != s.field.dtype:
        return f"{s.value.dtype} value stored into {s.field.dtype} field"
    if isinstance(s, Atomic) and s.op not in ATOMIC_NAMES:
        return f"{s.op} is not an atomic op"
    if isinstance(s, For) and not (s.begin.dtype.is_int and s.end.dtype.is_int):
        return "a counted loop with non-integer bounds"
    return None


def _expr_problem(e) -> str | None:
    if isinstance(e, (Const, VarRef)):
        return None
    if not isinstance(e, OpExpr):
        return f"{e!r} is not an expression" if not isinstance(e, Expr) else None
    if len(e.args) != OPS[e.op].arity:
        return f"{e.op.value} with {len(e.args)} operands"
    if e.op is not Op.CAST:
        want = result_type(e.op, [a.dtype for a in e.args])
        if want != e.dtype:
            return f"{e.op.value} typed {e.dtype}, its operands give {want}"
    return next(filter(None, (_expr_problem(a) for a in e.args)), None)
