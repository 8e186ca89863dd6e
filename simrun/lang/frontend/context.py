"""The emission state of a kernel being lowered: current block, fresh variables, global refs."""

from __future__ import annotations

from ..errors import CompileError, Span
from ..ir import builder
from ..ir.nodes import Arith, Atomic, Expr, Load, Var, VarRef, walk
from ..ir.ops import ATOMIC_OPS
from ..types import DType


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

    def error(self, message: str) -> CompileError:
        return CompileError(message, self.span, self.kernel_name)


_stack: list[Emitter] = []


def current() -> Emitter:
    if not _stack:
        raise RuntimeError("this operation is only valid inside a kernel")
    return _stack[-1]


def active() -> bool:
    return bool(_stack)


class GlobalRef(Arith):
    """A field element (one component) not yet loaded: atomics need the place, not the value."""

    def __init__(self, field, comp: int, indices: tuple):
        self.field = field
        self.comp = comp
        self.indices = indices
        self._loaded: dict[int, Var] = {}

    @property
    def dtype(self) -> DType:
        return self.field.dtype

    def load(self) -> Expr:
        em = current()
        block = id(em.blocks[-1])
        if block not in self._loaded:
            var = em.fresh(f"{self.field.name}_v", self.field.dtype)
            em.emit(Load(var, self.field, self.comp, self.indices))
            self._loaded[block] = var
        return VarRef(self._loaded[block])


def _load_hook(value):
    if isinstance(value, GlobalRef):
        return value.load()
    return None


builder.value_hooks.append(_load_hook)


def atomic(op: str, ref, value, want_result: bool = True):
    """ti.atomic_*(field[...], value): returns the old value, as Taichi does."""
    from ..matrix import Matrix

    if isinstance(ref, Matrix):
        olds = [atomic(op, r, v, want_result) for r, v in
                zip(ref.entries(), value.entries() if isinstance(value, Matrix)
                    else [value] * len(ref.entries()))]
        out = Matrix.__new__(Matrix)
        out.rows = [[o] for o in olds] if ref.is_vector else \
            [olds[i * ref.m:(i + 1) * ref.m] for i in range(ref.n)]
        out.is_vector = ref.is_vector
        return out
    em = current()
    if not isinstance(ref, GlobalRef):
        raise em.error(f"ti.atomic_{op} needs a field element as its first argument, "
                       "e.g. ti.atomic_add(x[i], v); for a local variable write `a += v`")
    value = builder.cast(builder.as_expr(value), ref.dtype)
    result = em.fresh(f"old_{ref.field.name}", ref.dtype) if want_result else None
    em.emit(Atomic(ATOMIC_OPS[op], ref.field, ref.comp, ref.indices, value, result))
    return VarRef(result) if result is not None else None
