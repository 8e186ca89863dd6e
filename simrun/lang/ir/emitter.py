"""The emission state of a kernel being lowered: its open blocks, fresh variables, and the
stack of kernels being lowered (nonempty exactly while IR is being built).

Below the frontend, so that Python-scope code that behaves differently inside a kernel
(builtins, matrices) can ask `active()` without importing the frontend.
"""

from __future__ import annotations

from ..errors import CompileError, Span
from ..types import DType
from .nodes import Assign, Expr, Load, Var, VarRef, walk


class Emitter:
    """Statements go to the innermost open block; the frontend opens one per nested body."""

    def __init__(self, kernel_name: str, debug: bool):
        self.kernel_name = kernel_name
        self.debug = debug
        self.blocks: list[list] = []
        self.span: Span | None = None
        self.loop_kinds: list[str] = []  # "parallel" | "serial" | "while"
        self.top_level_vars: list[Var] = []
        self.pending_serialize = False
        self.random_sites = 0
        self.stopped_everywhere: set = set()  # ti.stop_grad outside loops: kernel-wide
        self._stopped: dict[int, tuple[list, set]] = {}  # id(block) -> (block, fields)
        self.grad_reads: dict[int, object] = {}  # id(field) -> the field `field.grad` reads
        self.spills = 0  # expressions split by spill(): compiler.py compiles without SLP

    def next_random_site(self) -> int:
        self.random_sites += 1
        return self.random_sites

    def emit(self, stmt) -> None:
        if stmt.span is None:
            stmt.span = self.span
        if isinstance(stmt, Load) and any(
                stmt.field in self._stopped.get(id(b), ((), ()))[1] for b in self.blocks):
            stmt.no_grad = True
        self.blocks[-1].append(stmt)

    def stop_grad(self, field) -> None:
        """ti.stop_grad(field) holds for the block it is called in and the blocks inside it,
        before and after the call (Taichi's scoping): at a kernel's top level, every loop;
        inside a loop, that loop only."""
        if not self.loop_kinds:
            self.stopped_everywhere.add(field)
            return
        block = self.blocks[-1]
        self._stopped.setdefault(id(block), (block, set()))[1].add(field)
        for s in walk(block):
            if isinstance(s, Load) and s.field is field:
                s.no_grad = True

    def fresh(self, name: str, dtype: DType) -> Var:
        var = Var(name, dtype)
        if not self.loop_kinds:
            self.top_level_vars.append(var)
        return var

    def spill(self, value: Expr) -> VarRef:
        """A temporary holding `value`, assigned here (builder keeps expressions shallow)."""
        self.spills += 1
        var = self.fresh("t", value.dtype)
        self.emit(Assign(var, value))
        return VarRef(var)

    def error(self, message: str) -> CompileError:
        return CompileError(message, self.span, self.kernel_name)


_stack: list[Emitter] = []


def current() -> Emitter:
    if not _stack:
        raise RuntimeError("this operation is only valid inside a kernel")
    return _stack[-1]


def active() -> bool:
    return bool(_stack)
