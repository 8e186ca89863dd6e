"""The typed, structured IR: scalar expressions (pure trees) and statements (explicit effects).

Expressions carry Python operators so IR can be written as ordinary arithmetic, in the frontend
and in the derivative rules alike.  Global loads, stores and atomics are statements with
explicit indices, locals are named variables, and control flow stays structured, so the
autodiff passes can walk and reverse it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from ..errors import Span
from ..types import DType
from .ops import Op

_ids = itertools.count()


@dataclass(eq=False)
class Var:
    """A mutable local scalar variable (an alloca in codegen)."""

    name: str
    dtype: DType
    id: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"%{self.name}{self.id}"


class Arith:
    """Python operators that build IR; shared by Expr and the frontend's lazy global loads.

    How an operator becomes IR (typing, casts, folding) is ir/builder.py's, which builds on
    this file: builder installs its `alu` here when imported (ir/__init__.py imports it)."""

    __hash__ = object.__hash__

    @staticmethod
    def alu(op: Op, *operands) -> Any:
        raise NotImplementedError("simrun.lang.ir.builder installs Arith.alu")

    def _bin(self, op, other, swap=False):
        return self.alu(op, other, self) if swap else self.alu(op, self, other)

    def __add__(self, o): return self._bin(Op.ADD, o)
    def __radd__(self, o): return self._bin(Op.ADD, o, True)
    def __sub__(self, o): return self._bin(Op.SUB, o)
    def __rsub__(self, o): return self._bin(Op.SUB, o, True)
    def __mul__(self, o): return self._bin(Op.MUL, o)
    def __rmul__(self, o): return self._bin(Op.MUL, o, True)
    def __truediv__(self, o): return self._bin(Op.TRUEDIV, o)
    def __rtruediv__(self, o): return self._bin(Op.TRUEDIV, o, True)
    def __floordiv__(self, o): return self._bin(Op.FLOORDIV, o)
    def __rfloordiv__(self, o): return self._bin(Op.FLOORDIV, o, True)
    def __mod__(self, o): return self._bin(Op.MOD, o)
    def __rmod__(self, o): return self._bin(Op.MOD, o, True)
    def __pow__(self, o): return self._bin(Op.POW, o)
    def __rpow__(self, o): return self._bin(Op.POW, o, True)
    def __lt__(self, o): return self._bin(Op.LT, o)
    def __le__(self, o): return self._bin(Op.LE, o)
    def __gt__(self, o): return self._bin(Op.GT, o)
    def __ge__(self, o): return self._bin(Op.GE, o)
    def __eq__(self, o): return self._bin(Op.EQ, o)  # type: ignore[override]
    def __ne__(self, o): return self._bin(Op.NE, o)  # type: ignore[override]
    def __and__(self, o): return self._bin(Op.BIT_AND, o)
    def __rand__(self, o): return self._bin(Op.BIT_AND, o, True)
    def __or__(self, o): return self._bin(Op.BIT_OR, o)
    def __ror__(self, o): return self._bin(Op.BIT_OR, o, True)
    def __xor__(self, o): return self._bin(Op.BIT_XOR, o)
    def __rxor__(self, o): return self._bin(Op.BIT_XOR, o, True)
    def __lshift__(self, o): return self._bin(Op.SHL, o)
    def __rshift__(self, o): return self._bin(Op.SHR, o)
    def __rlshift__(self, o): return self._bin(Op.SHL, o, True)
    def __rrshift__(self, o): return self._bin(Op.SHR, o, True)

    def __neg__(self):
        return self.alu(Op.NEG, self)

    def __pos__(self):
        return self

    def __invert__(self):
        return self.alu(Op.BIT_NOT, self)

    def __abs__(self):
        return self.alu(Op.ABS, self)

    def __bool__(self):
        raise TypeError(
            "a kernel value has no Python truth value here; use it in an `if` of the kernel, "
            "or ti.static(...) for compile-time conditions"
        )


class Expr(Arith):
    """Base of pure scalar expressions."""

    dtype: DType


@dataclass(eq=False, repr=False)
class Const(Expr):
    """A constant; `weak` for Python literals, which adopt the type of the other operand."""

    value: Any
    dtype: DType
    weak: bool = False


@dataclass(eq=False, repr=False)
class VarRef(Expr):
    var: Var

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.var.dtype


@dataclass(eq=False, repr=False)
class OpExpr(Expr):
    """`depth`: the longest chain of operations below and including this one. The frontend
    keeps it under builder.SPILL_DEPTH (deeper sub-expressions go to temporaries), so the
    recursive walks of passes, autodiff and codegen stay far from Python's recursion limit
    however long a kernel's sums and literals are."""

    op: Op
    args: tuple
    dtype: DType

    def __post_init__(self) -> None:
        self.depth = 1 + max((a.depth for a in self.args if isinstance(a, OpExpr)), default=0)


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt:
    span: Span | None = field(default=None, kw_only=True)


@dataclass(eq=False)
class Assign(Stmt):
    var: Var
    value: Expr


@dataclass(eq=False)
class Load(Stmt):
    """var = field[indices] (component comp of a vector/matrix element); no_grad: the load
    lies in a block that called ti.stop_grad(field), so it carries no derivative."""

    var: Var
    field: Any
    comp: int
    indices: tuple
    no_grad: bool = False


@dataclass(eq=False)
class Store(Stmt):
    field: Any
    comp: int
    indices: tuple
    value: Expr


@dataclass(eq=False)
class Atomic(Stmt):
    """field[indices] <op>= value; the old value goes to `result` when it is used."""

    op: Op  # one of ops.ATOMIC_OPS
    field: Any
    comp: int
    indices: tuple
    value: Expr
    result: Var | None = None


@dataclass(eq=False)
class Random(Stmt):
    var: Var
    site: int = 0  # distinguishes the draws of one launch; see codegen s_Random


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: list
    orelse: list


@dataclass(eq=False)
class For(Stmt):
    """Serial counted loop: var runs begin, begin+1, ..., end-1."""

    var: Var
    begin: Expr
    end: Expr
    body: list


@dataclass(eq=False)
class While(Stmt):
    """`while True` loop; the frontend turns `while cond:` into a leading `if not cond: break`."""

    body: list


@dataclass(eq=False)
class Break(Stmt):
    pass


@dataclass(eq=False)
class Continue(Stmt):
    pass


@dataclass(eq=False)
class AssertStmt(Stmt):
    cond: Expr
    message: str


@dataclass(eq=False)
class Print(Stmt):
    items: list


@dataclass(eq=False)
class Return(Stmt):
    values: list


@dataclass(eq=False)
class StackPush(Stmt):
    """Autodiff: save var's current value on the per-thread stack."""

    var: Var


@dataclass(eq=False)
class StackPop(Stmt):
    """Autodiff: restore var from the per-thread stack."""

    var: Var


@dataclass(eq=False)
class Task:
    """One offloaded piece of a kernel: a parallel range loop, or serial code run once."""

    kind: str  # "range" or "serial"
    body: list
    var: Var | None = None
    begin: Expr | None = None
    end: Expr | None = None
    span: Span | None = None
    index_vars: tuple = ()  # a range task's loop indices, a bijection of `var`
    # an ndrange task: (low, extent) per dimension, and the expressions (objects, so passes
    # that copy statements keep them) that compute each index from `var`; codegen runs the
    # innermost dimension as a loop of its own (contiguous, vectorisable), no div/mod
    grid: tuple = ()
    index_exprs: tuple = ()


@dataclass(eq=False)
class KernelIR:
    name: str
    tasks: list
    arg_vars: list  # Var per scalar argument, in slot order
    ret_types: list
    span: Span | None = None
    extra: dict = field(default_factory=dict)


def walk(stmts):
    """Yield every statement, nested ones included, in program order."""
    for s in stmts:
        yield s
        if isinstance(s, If):
            yield from walk(s.then)
            yield from walk(s.orelse)
        elif isinstance(s, (For, While)):
            yield from walk(s.body)


def expr_vars(e: Expr):
    """Yield every Var an expression reads."""
    if isinstance(e, VarRef):
        yield e.var
    elif isinstance(e, OpExpr):
        for a in e.args:
            yield from expr_vars(a)
