"""Calls and subscripts that the frontend treats specially: ti.static, atomics, ranges, funcs."""

from __future__ import annotations

import builtins as py
import itertools
import operator
from dataclasses import dataclass

import numpy as np

from .. import builtins as B
from ..fields import Field
from ..ir import builder
from ..ir.emitter import active, current
from ..ir.nodes import Const, Expr, Print, Random, Var, VarRef
from ..matrix import Matrix
from ..types import defaults, i32, to_dtype
from .context import LOWERERS, GlobalRef, atomic, is_dynamic
from .inline import Func, inline_call


@dataclass
class Starred:
    value: object


class KRange:
    """range() inside kernels: bounds may be kernel expressions, the step must be a
    compile-time non-zero integer (loops.py counts trips, so negative steps work too)."""

    def __init__(self, *args):
        if not 1 <= len(args) <= 3:
            raise TypeError(f"range() takes 1 to 3 arguments, got {len(args)}")
        if len(args) == 1:
            self.lo, self.hi, self.step = 0, args[0], 1
        else:
            self.lo, self.hi = args[0], args[1]
            self.step = _range_step(args[2]) if len(args) == 3 else 1

    def __iter__(self):
        return iter(py.range(int(self.lo), int(self.hi), self.step))


def _range_step(step) -> int:
    if isinstance(step, Const) and step.dtype.is_int:
        step = step.value
    if isinstance(step, (Expr, GlobalRef)):
        raise TypeError("the step of range() in a kernel must be a compile-time constant "
                        "integer (a literal, a Python global or ti.static(...)); for a step "
                        "known only at run time loop over a counter instead: "
                        "`for k in range(trips): i = start + k * step`")
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise TypeError(f"the step of range() must be an integer, got {step!r}")
    if step == 0:
        raise ValueError("the step of range() must not be zero")
    return int(step)


class NDRange:
    """ti.ndrange(a, (lo, hi), ...)."""

    def __init__(self, *args):
        self.bounds = []
        for a in args:
            if isinstance(a, (tuple, list)):
                self.bounds.append((a[0], a[1]))
            else:
                self.bounds.append((0, a))

    @property
    def shape(self):
        return tuple(hi - lo for lo, hi in self.bounds)

    def __iter__(self):
        return itertools.product(*[py.range(int(lo), int(hi)) for lo, hi in self.bounds])


class Grouped:
    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        inner = self.inner
        if isinstance(inner, Field):
            inner = NDRange(*inner.shape)
        for p in inner:
            yield Matrix(list(p) if isinstance(p, tuple) else [p])


def static(value, *more):
    """ti.static: compile-time evaluation; in Python scope it returns its argument."""
    if more:
        return (value,) + more
    if isinstance(value, KRange):
        return py.range(int(value.lo), int(value.hi), value.step)
    return value


def static_assert(cond, msg: str = "") -> None:
    """A compile-time check; in a kernel a failure is a CompileError at the calling line."""
    if is_dynamic(cond):
        raise TypeError("ti.static_assert needs a condition known at compile time (Python "
                        "values, shapes, ti.static(...)), not a kernel value; use `assert` "
                        "with ti.init(debug=True) for run-time checks")
    if cond:
        return
    text = f"static assertion failed: {msg}" if msg else "static assertion failed"
    if active():
        raise current().error(text)
    raise AssertionError(text)


def static_print(*args):
    print(*args)


def _index_list(index) -> list:
    if index is None:
        return []
    if isinstance(index, Matrix):
        return index.entries()
    if isinstance(index, tuple):
        out = []
        for x in index:
            out.extend(x.entries() if isinstance(x, Matrix) else [x])
        return out
    return [index]


def _index(e):
    """Indices are i32 as in Taichi, but a 64-bit index keeps its width: truncated, a[2**40]
    would reach a[0] past the debug bounds check."""
    return e if e.dtype.is_int and e.dtype.bits == 64 else builder.cast(e, i32)


def field_ref(field, index):
    """field[index] inside a kernel: lazy GlobalRef(s), one per component."""
    idx = _index_list(index)
    if len(idx) != len(field.shape):
        raise TypeError(f"field '{field.name}' has {len(field.shape)} dimension(s) "
                        f"(shape {field.shape}) but is indexed with {len(idx)} index(es)"
                        + ("; use f[None] for a 0-D field" if not field.shape else ""))
    exprs = tuple(_index(builder.as_expr(i)) for i in idx)
    if not field.elem_shape:
        return GlobalRef(field, 0, exprs)
    out = Matrix.__new__(Matrix)
    if field.is_vector:
        out.rows = [[GlobalRef(field, c, exprs)] for c in py.range(field.n)]
        out.is_vector = True
    else:
        out.rows = [[GlobalRef(field, r * field.m + c, exprs) for c in py.range(field.m)]
                    for r in py.range(field.n)]
        out.is_vector = False
    return out


def subscript(lw, base, index, node):
    if isinstance(base, Field) or getattr(base, "is_ndarray_arg", False):
        return field_ref(base, index)
    if isinstance(base, Matrix):
        cells = dynamic_cells(lw, base, index, node)
        if cells is None:
            return base[index]
        value = None  # a runtime index picks one cell: a select over all of them
        for cond, (i, j) in cells:
            entry = builder.as_expr(base.rows[i][j])
            value = entry if value is None else B.select(cond, entry, value)
        return value
    if isinstance(base, GlobalRef):
        raise lw.error("a scalar field element cannot be indexed again", node)
    if isinstance(index, (VarRef,)) or (hasattr(index, "dtype") and not isinstance(index, int)):
        raise lw.error("Python lists/tuples can only be indexed by compile-time constants "
                       "inside kernels", node)
    return base[index]


def dynamic_cells(lw, shape, index, node) -> list | None:
    """For a vector/matrix indexed at run time (`a[k]`, `m[i][j, k]` with j, k loop
    variables): every cell (i, j) with the condition that the index names it; None when the
    index is a compile-time constant. Out of range (undefined in Taichi), a store writes no
    cell and a load reads cell (0, 0)."""
    key = index if isinstance(index, tuple) else (index,)
    if not any(is_dynamic(k) for k in key):
        return None
    if len(key) != (1 if shape.is_vector else 2):
        raise lw.error(f"a runtime index into a {shape.n}x{shape.m} matrix needs "
                       f"{1 if shape.is_vector else 2} indices (a row needs a constant one)",
                       node)
    cells = []
    for i in range(shape.n):
        for j in range(1 if shape.is_vector else shape.m):
            conds = [operator.eq(k, c) for k, c in zip(key, (i, j))]
            cond = conds[0] if len(conds) == 1 else B.logical_and(*conds)
            cells.append((cond, (i, j)))
    return cells


def random(dtype=float):
    """ti.random(dtype): uniform in [0, 1) for floats; a random integer for ints."""
    if active():
        return _random(dtype)
    dt = to_dtype(dtype)
    return float(np.random.random()) if dt.is_float else int(np.random.randint(0, 2**31))


def randn(dtype=float):
    """ti.randn(dtype): a standard normal draw (Box-Muller on two uniform draws, as Taichi
    does); in Python scope, numpy's."""
    if not active():
        return float(np.random.standard_normal())
    u1, u2 = _random(dtype), _random(dtype)
    return B.sqrt(-2.0 * B.log(1.0 - u1)) * B.cos(2.0 * np.pi * u2)


def _random(dtype=float):
    em = current()
    dtype = to_dtype(dtype)
    var = em.fresh("rand", dtype)
    em.emit(Random(var, em.next_random_site()))
    return VarRef(var)


def _print(*args, sep=" ", end="\n"):
    em = current()
    items = []
    for a in args:
        if isinstance(a, Matrix):
            items.append("[")
            items.extend(builder.as_expr(x) for x in a.entries())
            items.append("]")
        elif isinstance(a, (list, tuple)):
            items.extend(x if isinstance(x, str) else builder.as_expr(x) for x in a)
        elif isinstance(a, str):
            items.append(a)
        else:
            items.append(builder.as_expr(a))
    em.emit(Print(items))


def _loop_config(serialize=False, **kwargs):
    current().pending_serialize = bool(serialize)


def _make_atomic(op):
    def f(x, y):
        return atomic(op, x, y)

    f.__name__ = f"atomic_{op}"
    return f


ATOMICS = {name: _make_atomic(name) for name in
           ("add", "sub", "mul", "min", "max", "and", "or", "xor")}


def _int(x=0):
    if isinstance(x, (int, float, str)):
        return int(x)
    return B.cast(x, defaults.ip)


def _float(x=0.0):
    if isinstance(x, (int, float, str)):
        return float(x)
    return B.cast(x, defaults.fp)


def _len(x):
    if isinstance(x, Field):
        return x.shape[0]
    return py.len(x)


_int.dtype_alias = int
_float.dtype_alias = float

PY_BUILTINS = {
    id(py.range): KRange, id(py.min): B.min, id(py.max): B.max, id(py.abs): B.abs,
    id(py.int): _int, id(py.float): _float, id(py.print): _print, id(py.len): _len,
}


def call(lw, node):
    func = lw.expr(node.func)
    if func is static:
        values = [lw.expr(a) for a in node.args]
        return static(*values)
    args = []
    for a in node.args:
        v = lw.expr(a)
        if isinstance(v, Starred):
            args.extend(list(v.value.entries()) if isinstance(v.value, Matrix) else v.value)
        else:
            args.append(v)
    kwargs = {k.arg: lw.expr(k.value) for k in node.keywords}
    if isinstance(func, Func) or getattr(func, "is_bound_func", False):
        return inline_call(lw, func, args, kwargs, node)
    if getattr(func, "is_kernel", False) or getattr(func, "is_bound_kernel", False):
        raise lw.error("a kernel cannot call another kernel; make the callee a @ti.func", node)
    LOWERERS.append((lw, node))
    try:
        return func(*args, **kwargs)
    finally:
        LOWERERS.pop()


__all__ = ["Var", "static", "ATOMICS", "call", "subscript", "KRange", "NDRange", "Grouped",
           "random", "_print", "_loop_config", "static_assert", "static_print"]
