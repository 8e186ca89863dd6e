"""Field elements in kernel expressions (GlobalRef: loaded on first use), ti.atomic_*, local
matrices, and what is a kernel value (`is_dynamic`): the pieces every frontend module uses.

The emission state itself (Emitter, the stack of kernels being lowered) is ir/emitter.py."""

from __future__ import annotations

from ..ir import builder
from ..ir.emitter import current
from ..ir.nodes import Arith, Atomic, Expr, Load, Var, VarRef
from ..ir.ops import ATOMIC_OPS
from ..matrix import Matrix
from ..types import DType

LOWERERS: list = []  # (lowerer, call node) while a plain Python function runs inside a kernel


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


class LocalMatrix:
    """A name bound to a local vector/matrix: one Var per component."""

    def __init__(self, template: Matrix, vars_: list):
        self.n, self.m, self.is_vector = template.n, template.m, template.is_vector
        self.vars = vars_

    def value(self) -> Matrix:
        out = Matrix.__new__(Matrix)
        out.rows = [[VarRef(self.vars[i * self.m + j]) for j in range(self.m)]
                    for i in range(self.n)]
        out.is_vector = self.is_vector
        return out


def is_dynamic(value) -> bool:
    if isinstance(value, (Expr, GlobalRef)):
        return True
    if isinstance(value, Matrix):
        return any(is_dynamic(x) for x in value.entries())
    return False


def atomic(op: str, ref, value, want_result: bool = True):
    """ti.atomic_*(field[...], value): returns the old value, as Taichi does."""
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
