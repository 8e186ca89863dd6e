"""Deterministic IR text: variables renumbered by first appearance, fields by slot.

Used for debugging (SIMRUN_PRINT_IR), golden tests, and as the compile-cache key.
"""

from __future__ import annotations

from .nodes import (
    AssertStmt,
    Assign,
    Atomic,
    Break,
    Const,
    Continue,
    For,
    If,
    Load,
    OpExpr,
    Print,
    Random,
    Return,
    StackPop,
    StackPush,
    Store,
    VarRef,
    While,
)
from .ops import ATOMIC_NAMES


class Printer:
    def __init__(self, field_names=None, exact_shapes: bool = False):
        self.names: dict = {}
        self.field_names = field_names or {}
        self.exact_shapes = exact_shapes
        self.lines: list[str] = []

    def var(self, v) -> str:
        if v not in self.names:
            self.names[v] = f"%{len(self.names)}"
        return f"{self.names[v]}:{v.dtype}"

    def field(self, f, exact: bool = False) -> str:
        name = self.field_names.get(id(f), f.name)
        cells = "" if f.cell_strides is None else f",cells{f.cell_strides}"  # part of the key
        # a promise codegen relies on (codegen/parallel.py) is part of the cache key too
        distinct = ",distinct_rows" if getattr(f, "distinct_rows", False) else ""
        return f"{name}<{f.dtype},{self.shape(f, exact)},{f.elem_shape}{cells}{distinct}>"

    def shape(self, f, exact: bool) -> tuple:
        """A field's shape, but `rows` for the leading extent of a runtime_rows field where
        the code does not depend on it: a row-major field's element offset is
        (i0 * shape[1] + i1 ...) * ncomp + comp, without shape[0]. An atomic's private copies
        and a debug build's bounds checks do use it, so they print it. Kernels over such a
        field then have one text, so one compiled module, for any number of rows."""
        if exact or self.exact_shapes or not getattr(f, "runtime_rows", False) or \
                f.cell_strides is not None or not f.shape:
            return f.shape
        return ("rows",) + tuple(f.shape[1:])

    def expr(self, e) -> str:
        if isinstance(e, Const):
            return f"{e.value!r}:{e.dtype}"
        if isinstance(e, VarRef):
            return self.var(e.var)
        if isinstance(e, OpExpr):
            args = ", ".join(self.expr(a) for a in e.args)
            return f"{e.op.value}({args}):{e.dtype}"
        return repr(e)

    def place(self, s) -> str:
        idx = ", ".join(self.expr(i) for i in s.indices)
        return f"{self.field(s.field, exact=isinstance(s, Atomic))}[{idx}].{s.comp}"

    def stmts(self, body, depth: int) -> None:
        pad = "  " * depth
        for s in body:
            if isinstance(s, Assign):
                self.lines.append(f"{pad}{self.var(s.var)} = {self.expr(s.value)}")
            elif isinstance(s, Load):
                no_grad = " no_grad" if s.no_grad else ""
                self.lines.append(f"{pad}{self.var(s.var)} = load {self.place(s)}{no_grad}")
            elif isinstance(s, Store):
                self.lines.append(f"{pad}store {self.place(s)} = {self.expr(s.value)}")
            elif isinstance(s, Atomic):
                res = f"{self.var(s.result)} = " if s.result is not None else ""
                self.lines.append(f"{pad}{res}atomic_{ATOMIC_NAMES[s.op]} {self.place(s)}, "
                                  f"{self.expr(s.value)}")
            elif isinstance(s, Random):
                self.lines.append(f"{pad}{self.var(s.var)} = random #{s.site}")
            elif isinstance(s, If):
                self.lines.append(f"{pad}if {self.expr(s.cond)}:")
                self.stmts(s.then, depth + 1)
                if s.orelse:
                    self.lines.append(f"{pad}else:")
                    self.stmts(s.orelse, depth + 1)
            elif isinstance(s, For):
                self.lines.append(f"{pad}for {self.var(s.var)} in range({self.expr(s.begin)}, "
                                  f"{self.expr(s.end)}):")
                self.stmts(s.body, depth + 1)
            elif isinstance(s, While):
                self.lines.append(f"{pad}while:")
                self.stmts(s.body, depth + 1)
            elif isinstance(s, (Break, Continue)):
                self.lines.append(f"{pad}{type(s).__name__.lower()}")
            elif isinstance(s, AssertStmt):
                self.lines.append(f"{pad}assert {self.expr(s.cond)}, {s.message!r}")
            elif isinstance(s, Print):
                items = ", ".join(repr(i) if isinstance(i, str) else self.expr(i) for i in s.items)
                self.lines.append(f"{pad}print {items}")
            elif isinstance(s, Return):
                self.lines.append(f"{pad}return " + ", ".join(self.expr(v) for v in s.values))
            elif isinstance(s, StackPush):
                self.lines.append(f"{pad}push {self.var(s.var)}")
            elif isinstance(s, StackPop):
                self.lines.append(f"{pad}{self.var(s.var)} = pop")
            else:
                self.lines.append(f"{pad}<{type(s).__name__}>")


def print_kernel(kernel, field_names=None, exact_shapes: bool = False) -> str:
    p = Printer(field_names, exact_shapes)
    p.lines.append(f"kernel {kernel.name}(" + ", ".join(p.var(v) for v in kernel.arg_vars)
                   + ")" + (f" -> {kernel.ret_types}" if kernel.ret_types else ""))
    for k, task in enumerate(kernel.tasks):
        if task.kind == "range":
            p.lines.append(f"task {k} parallel {p.var(task.var)} in range("
                           f"{p.expr(task.begin)}, {p.expr(task.end)}):")
        else:
            p.lines.append(f"task {k} serial:")
        p.stmts(task.body, 1)
    return "\n".join(p.lines) + "\n"
