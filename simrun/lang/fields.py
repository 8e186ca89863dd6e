"""Fields: dense arrays that kernels read and write, stored in NumPy, with grad/dual companions."""

from __future__ import annotations

import itertools
import linecache
import math
import re
import sys
import weakref

import numpy as np

from . import guards
from .enums import SNodeGradType
from .errors import SimrunError, Span
from .ir import builder
from .ir.access import cell_offset
from .types import DType, constructors, f32, to_dtype

_ids = itertools.count()
registry: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_generation = [0]  # bumped by every ti.init: fields belong to the program they were placed in


def current_generation() -> int:
    """The program (ti.init) that fields placed now belong to."""
    return _generation[0]


def new_generation() -> None:
    """ti.init starts a new program: `lazy_grad()` walks only the fields placed after it."""
    _generation[0] += 1


def _user_frame():
    """The first frame outside simrun.lang: where the user's program declared the field."""
    frame = sys._getframe(1)
    pkg = __name__.rsplit(".", 1)[0]
    while frame is not None and frame.f_globals.get("__name__", "").startswith(pkg):
        frame = frame.f_back
    return frame


def _user_line() -> tuple[str, str]:
    """('file:line: ', excerpt) of the user's declaration, for errors raised outside kernels."""
    frame = _user_frame()
    if frame is None:
        return "", ""
    text = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    col = len(text) - len(text.lstrip())
    span = Span(frame.f_code.co_filename, frame.f_lineno, col, text)
    return f"{span}: ", span.excerpt()


def _caller_assignment_name() -> str | None:
    """`x = ti.field(...)` in user code names the field 'x' (for error messages)."""
    frame = _user_frame()
    if frame is not None and frame.f_code.co_name == "<lambda>":
        frame = frame.f_back  # `vec = lambda: ti.Vector.field(2)` then `v = vec()` names 'v'
    if frame is None:
        return None
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    m = re.match(r"\s*(?:self\.)?([A-Za-z_]\w*)\s*(?::[^=]+)?=[^=]", line)
    return m.group(1) if m else None


class FieldError(SimrunError, ValueError):
    """A field declaration simrun cannot honour exactly; raised instead of silently changing it."""


def _reject_offset(name: str, offset, shape: tuple | None) -> None:
    """Offsets are not implemented (kernels index from 0): refuse them rather than ignore them."""
    lo = _norm_shape(offset) or ()
    if not any(lo):
        return
    names = "ijkl"[:len(lo)] if len(lo) <= 4 else [f"i{d}" for d in range(len(lo))]
    shifted = ", ".join(f"{v} - {o}" if o > 0 else f"{v} + {-o}" if o else v
                        for v, o in zip(names, lo))
    if shape is not None and len(shape) == len(lo):
        ranges = ", ".join(f"({o}, {o + n})" for o, n in zip(lo, shape))
        loop = f"ti.ndrange({ranges})" if len(lo) > 1 else f"range{ranges}"
    else:
        loop = "range(lo, lo + n) per axis"
    where, excerpt = _user_line()
    raise FieldError(
        f"{where}field '{name}' is declared with offset={offset!r}, which simrun does not "
        "support (its indices always start at 0, in kernels and in Python scope). Declare it "
        f"without offset= and shift the indices yourself: write {name}[{shifted}] where the "
        f"program writes {name}[{', '.join(names)}], and loop over {loop} instead of over "
        f"the field.{excerpt}"
    )


def _norm_shape(shape) -> tuple | None:
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


class ElementShape:
    """The element layout every field-like storage shares (fields, ndarray arguments):
    `elem_shape` is () for scalars, (n,) for vectors, (n, m) for matrices."""

    elem_shape: tuple = ()
    cell_strides: tuple | None = None  # elements per step of each index; None: row-major

    @property
    def ncomp(self) -> int:
        return int(np.prod(self.elem_shape)) if self.elem_shape else 1

    @property
    def n(self) -> int:
        return self.elem_shape[0]

    @property
    def m(self) -> int:
        return self.elem_shape[1] if len(self.elem_shape) > 1 else 1

    @property
    def is_vector(self) -> bool:
        return len(self.elem_shape) == 1


class Field(ElementShape):
    """A scalar, vector or matrix field. `data` has shape (*shape, *elem_shape), C order."""

    version = 0  # bumped by every write (kernel launch or Python scope); kernel.grad() uses it
    # the leading extent is not part of a kernel's compiled text (ir/printer.py): kernels
    # over a row-major field compile once for any number of rows (adjoint/slab.py)
    runtime_rows = False
    _sync = None  # set by a GPU holding a copy (runtime/cuda.py): _sync(field, write)

    @property
    def data(self) -> np.ndarray | None:
        """The values on the host, as NumPy (the GPU's copy brought back first, if newer).
        The caller may write them, so a GPU re-uploads them before its next launch."""
        return self.host_values(write=True)

    def host_values(self, write: bool) -> np.ndarray | None:
        """The host array, current; write=False promises not to change it (to_numpy, f[i]),
        so that looking at a field costs a GPU no upload."""
        if self._sync is not None:
            self._sync(self, write)
        return self._data

    @data.setter
    def data(self, value: np.ndarray | None) -> None:
        self._data = value

    def __init__(self, dtype=None, shape=None, name: str = "", needs_grad: bool = False,
                 needs_dual: bool = False, elem_shape: tuple = (), role: str = "primal",
                 primal: Field | None = None, offset=None, **_ignored):
        self.dtype: DType = to_dtype(dtype) if dtype is not None else f32
        self.elem_shape = tuple(elem_shape)
        self.id = next(_ids)
        self.generation = _generation[0]
        self.name = name or _caller_assignment_name() or f"field{self.id}"
        self.role = role
        self.primal = primal
        self._grad: Field | None = None
        self._dual: Field | None = None
        self.data: np.ndarray | None = None
        self.shape: tuple | None = None
        self.order: tuple | None = None
        self._wants = (needs_grad, needs_dual)
        _reject_offset(self.name, offset, _norm_shape(shape))
        registry[self.id] = self
        if shape is not None:
            self._place(_norm_shape(shape))

    # ------------------------------------------------------------ layout
    def _place(self, shape: tuple, order: tuple | None = None) -> None:
        """Allocate; `order` (SNode.cell_order) stores the axes in Taichi's nesting order."""
        if self.shape is not None:
            raise RuntimeError(f"field '{self.name}' is already placed with shape {self.shape}")
        self.shape = shape
        self.generation = _generation[0]  # placed after a later ti.init: that program's
        # in guard zones (guards.py): an unchecked out-of-range write is found, not the heap's
        if order is None:
            self.data = guards.zeros(shape + self.elem_shape, self.dtype.np, self.name,
                                     self.generation)
        else:  # data stays indexed logically: a transposed view of storage in nesting order
            store = guards.zeros(tuple(shape[a] for a in order) + self.elem_shape,
                                 self.dtype.np, self.name, self.generation)
            tail = tuple(range(len(shape), len(shape) + len(self.elem_shape)))
            self.data = store.transpose(tuple(order.index(a) for a in range(len(shape))) + tail)
            self.cell_strides = tuple(math.prod(shape[b] for b in order[order.index(a) + 1:])
                                      for a in range(len(shape)))
        self.order = order
        needs_grad, needs_dual = self._wants
        if needs_grad:
            self._make_grad()
        if needs_dual:
            self._make_dual()

    def _companion(self, role: str) -> Field:
        f = Field(self.dtype, None, name=f"{self.name}.{role}", elem_shape=self.elem_shape,
                  role=role, primal=self)
        f._place(self.shape, self.order)
        return f

    def _make_grad(self) -> None:
        if self._grad is None and self.dtype.is_float:
            self._grad = self._companion("grad")

    def _make_dual(self) -> None:
        if self._dual is None and self.dtype.is_float:
            self._dual = self._companion("dual")

    @property
    def grad(self) -> Field | Unplaced | None:
        """The gradient field; for a float field without one, a handle that `place(x, x.grad)`
        (with x or later, as wave.py does) turns into one: Taichi's way of placing gradients
        by hand. Internal code asks `grad_of(x)`, which is None then."""
        if self._grad is not None or self.role != "primal" or not self.dtype.is_float:
            return self._grad
        return Unplaced(self, "grad")

    @property
    def dual(self) -> Field | Unplaced | None:
        return self._dual if self._dual is not None or not self._placeable() else \
            Unplaced(self, "dual")

    def _placeable(self) -> bool:
        return self.shape is None and self.role == "primal" and self.dtype.is_float

    def get_scalar_field(self, *indices: int) -> Component:
        """One component, for placing a vector field component by component (DiffTaichi's
        smoke places them struct-of-arrays): placing it places the whole field."""
        return Component(self, indices)

    @property
    def snode(self):
        return self

    @property
    def ptr(self):
        """`x.snode.ptr` in Taichi is the C++ SNode; the part user code asks of it is here."""
        return self

    adjoint_checkbit = False  # set by Tape(validation=True) on fields with gradients

    def has_adjoint_checkbit(self) -> bool:
        return self.adjoint_checkbit

    def get_snode_grad_type(self):
        return {"grad": SNodeGradType.ADJOINT, "dual": SNodeGradType.DUAL}.get(
            self.role, SNodeGradType.PRIMAL)

    def parent(self, n: int = 1):
        return self

    def _require_placed(self, write: bool = True) -> np.ndarray:
        if self._data is None:
            raise RuntimeError(
                f"field '{self.name}' has no shape yet: pass shape= to ti.field or place it with "
                "ti.root.dense(...).place(...)"
            )
        return self.host_values(write)

    # ------------------------------------------------------------ Python-scope access
    def _key(self, key) -> tuple:
        data = self._require_placed(write=False)
        if key is None:
            key = ()
        elif not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self.shape):
            raise IndexError(
                f"field '{self.name}' has {len(self.shape)} indices (shape {self.shape}), "
                f"got {len(key)}: use f[None] for a 0-D field"
            )
        out = []
        for k in key:
            if isinstance(k, builder.elementwise):  # a ti.Vector
                raise IndexError("index a field with integers, or unpack the vector: f[v[0], v[1]]")
            out.append(int(k))
        del data
        for axis, (k, n) in enumerate(zip(out, self.shape)):
            if not 0 <= k < n:
                return self._cell_of(tuple(out), axis)
        return tuple(out)

    def _cell_of(self, key: tuple, axis: int) -> tuple:
        """Where an index past its axis lands in a field stored in Taichi's nesting order
        (Taichi's Python scope does not check it either), as a logical index; elsewhere (and
        past the whole field) an IndexError."""
        cell = cell_offset(key, self.shape, self.cell_strides)
        if self.cell_strides is None or not 0 <= cell < math.prod(self.shape):
            raise IndexError(f"index {key[axis]} out of range for axis {axis} of field "
                             f"'{self.name}' (size {self.shape[axis]})")
        stored = np.unravel_index(cell, tuple(self.shape[a] for a in self.order))
        return tuple(int(stored[self.order.index(a)]) for a in range(len(self.shape)))

    def __getitem__(self, key):
        idx = self._key(key)
        if self.elem_shape:  # a matrix.FieldElement (matrix.py imports this module)
            return constructors["field_element"](self, idx)
        return self.host_values(write=False)[idx].item()

    def __setitem__(self, key, value):
        idx = self._key(key)
        if self.dtype.is_int:
            self._check_ints(value, "a write")
        if self.elem_shape:
            value = np.asarray(value, dtype=self.dtype.np).reshape(self.elem_shape)
        self.data[idx] = value
        self.version += 1

    def _check_ints(self, values, what: str) -> None:
        """Values an integer field cannot hold are refused: numpy would wrap 2**40 to 0
        (or NaN to INT_MIN) without a word."""
        arr = np.asarray(values)
        if arr.size == 0 or arr.dtype.kind not in "iufb" and arr.dtype != object:
            return
        info = np.iinfo(self.dtype.np)
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise ValueError(f"{what} to the integer field '{self.name}' ({self.dtype.name}) "
                             "holds NaN or infinity")
        lo, hi = arr.min(), arr.max()
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise OverflowError(
                f"{what} to the integer field '{self.name}' ({self.dtype.name}) holds "
                f"{str(bad)[:30]}, outside [{info.min}, {info.max}]: use a wider dtype")

    def to_numpy(self, dtype=None, keep_dims: bool = False) -> np.ndarray:
        arr = self._require_placed(write=False).copy()
        return arr.astype(dtype) if dtype is not None else arr

    def from_numpy(self, arr) -> None:
        data = self._require_placed()
        arr = np.asarray(arr)
        if arr.shape != data.shape:
            raise ValueError(f"from_numpy: field '{self.name}' has shape {data.shape}, "
                             f"array has {arr.shape}")
        if self.dtype.is_int:
            self._check_ints(arr, "from_numpy")
        data[...] = arr
        self.version += 1

    def fill(self, value) -> None:
        if self.dtype.is_int:
            self._check_ints(value, "fill")
        self._require_placed()[...] = value
        self.version += 1

    def copy_from(self, other: Field) -> None:
        self.from_numpy(other.host_values(write=False))

    def __repr__(self) -> str:
        return f"<field {self.name} {self.dtype} shape={self.shape} elem={self.elem_shape}>"

    def __str__(self) -> str:
        return str(self.to_numpy())


class Ndarray(Field):
    """`ti.ndarray(dtype, shape, needs_grad=True)`: an array passed to `ti.types.ndarray()`
    parameters. simrun stores it as a field (so it has .grad/.dual, works on a Tape and
    under kernel.grad) and binds it to the kernel like a template field."""

    is_ndarray = True

    def __init__(self, dtype=None, shape=(), needs_grad: bool = False,
                 needs_dual: bool = False, elem_shape: tuple = (), **kwargs):
        super().__init__(dtype, _norm_shape(shape) or (), needs_grad=needs_grad,
                         needs_dual=needs_dual, elem_shape=elem_shape, **kwargs)

    def _companion(self, role: str) -> Field:
        f = Ndarray(self.dtype, self.shape, name=f"{self.name}.{role}",
                    elem_shape=self.elem_shape, role=role, primal=self)
        return f

    @property
    def element_shape(self) -> tuple:
        return self.elem_shape


def ndarray(dtype, shape, needs_grad: bool = False, **kwargs) -> Ndarray:
    """ti.ndarray: see Ndarray. `dtype` may be a vector/matrix type (ti.math.vec2)."""
    elem_shape: tuple = ()
    if hasattr(dtype, "is_vector"):  # a MatrixType
        elem_shape = (dtype.n,) if dtype.is_vector else (dtype.n, dtype.m)
        dtype = dtype.dtype
    if needs_grad and dtype is not None and not to_dtype(dtype).is_float:
        raise NdarrayError(f"{to_dtype(dtype).name} is not supported for ndarray with "
                           "needs_grad=True: only float arrays have gradients")
    return Ndarray(dtype, shape, needs_grad=needs_grad, elem_shape=elem_shape,
                   name=kwargs.get("name", ""))


class NdarrayError(FieldError, RuntimeError):
    """A ti.ndarray Taichi refuses (Taichi raises TaichiRuntimeError)."""


class Component:
    """`x.get_scalar_field(i)`: placing it places x (simrun's layout is its own business)."""

    def __init__(self, parent: Field, indices: tuple):
        self.parent, self.indices = parent, indices
        self.name = f"{parent.name}{list(indices)}"

    def place_in(self, shape: tuple) -> None:
        if self.parent.shape is None:
            self.parent._place(shape)
        elif self.parent.shape != shape:
            raise FieldError(f"component {self.name} is placed with shape {shape}, but "
                             f"'{self.parent.name}' already has shape {self.parent.shape}: "
                             "place every component of a field with one shape")


class _ElementKind(type):
    """isinstance(x, ti.ScalarField / ti.MatrixField): simrun has one Field class, and these
    test its element shape (Taichi's vector fields are MatrixFields too)."""

    def __instancecheck__(cls, obj) -> bool:
        if isinstance(obj, Component):
            return cls is ScalarField
        return isinstance(obj, Field) and bool(obj.elem_shape) == (cls is MatrixField)


class ScalarField(metaclass=_ElementKind):
    """A field of scalars, for isinstance()."""


class MatrixField(metaclass=_ElementKind):
    """A field of vectors or matrices, for isinstance()."""


def grad_of(f) -> Field | None:
    """f's gradient field, None when it has none (where `f.grad` is an unplaced handle)."""
    g = getattr(f, "grad", None)
    return None if isinstance(g, Unplaced) else g


class Unplaced:
    """`x.grad` of a field without one: `ti.root.place(x, x.grad)` (or a later
    `place(x.grad)`) gives x its gradient (or dual) with x's shape."""

    data = shape = None

    def __init__(self, primal: Field, role: str):
        self.primal, self.role = primal, role
        self.name = f"{primal.name}.{role}"

    def place_after(self) -> None:
        grad, dual = self.primal._wants
        self.primal._wants = (grad or self.role == "grad", dual or self.role == "dual")
        if self.primal.shape is not None:
            (self.primal._make_grad if self.role == "grad" else self.primal._make_dual)()

    def __getitem__(self, key):
        raise RuntimeError(f"gradient '{self.name}' has not been placed: create "
                           f"'{self.primal.name}' with needs_grad=True or place it with "
                           f"ti.root.place({self.primal.name}, {self.name})")


def field(dtype, shape=None, name: str = "", offset=None, needs_grad: bool = False,
          needs_dual: bool = False, **kwargs) -> Field:
    """ti.field: a scalar field; shape=None leaves it to be placed by ti.root.

    A non-zero offset raises FieldError: simrun fields are indexed from 0.
    """
    return Field(dtype, shape, name=name, needs_grad=needs_grad, needs_dual=needs_dual,
                 offset=offset)


def all_fields() -> list[Field]:
    return [f for f in list(registry.values()) if f.role == "primal"]


def program_fields() -> list[Field]:
    """The primal fields placed since the last ti.init (Taichi's current program): what
    `ti.root.lazy_grad()` gives gradients, not every field still alive in the process."""
    return [f for f in all_fields() if f.shape is not None and f.generation == _generation[0]]


class _Axes:
    """ti.i .. ti.l and their combinations: which logical axes a dense() level divides."""

    def __init__(self, *axes: int):
        self.axes = axes

    def __repr__(self) -> str:
        if max(self.axes) < 4:
            return "ti." + "".join("ijkl"[a] for a in self.axes)
        return f"ti.axes{self.axes}"


def axes(*indices: int) -> _Axes:
    """ti.axes(1, 0): axes by number, in any order."""
    if not indices or any(not 0 <= int(a) < 8 for a in indices):
        raise ValueError(f"axes() takes axis numbers 0..7, got {indices}")
    return _Axes(*(int(a) for a in indices))


i, j, k, l = _Axes(0), _Axes(1), _Axes(2), _Axes(3)  # noqa: E741
ij, ik, jk, ijk, ijkl = _Axes(0, 1), _Axes(0, 2), _Axes(1, 2), _Axes(0, 1, 2), _Axes(0, 1, 2, 3)


class SNode:
    """ti.root and its dense() children, reduced to what is semantic: the logical shape.

    As in Taichi, shape[a] is the product of the sizes given for axis a along the chain and
    unused axes are dropped (`dense(ti.j, 3).dense(ti.i, 4)` is (4, 3); `dense(ti.i, 2)
    .dense(ti.i, 3)` is (6,)). Taichi's nesting orders its memory: simrun follows that order
    where each axis is divided once (`cell_order`), so that an index past its axis lands in
    the cell it lands in under Taichi (DiffTaichi's misc examples index x[t, 0] in a field of
    shape (1, steps)); elsewhere row-major in the logical shape, which indexes identically.
    """

    def __init__(self, sizes: dict[int, int] | None = None, levels: tuple = ()):
        self._sizes = dict(sizes or {})
        self._levels = levels  # each dense() level's axes, outermost first

    @property
    def cell_order(self) -> tuple[int, ...] | None:
        """Logical axes in Taichi's memory order (levels outermost first, axes sorted within
        a level), or None where that is row-major or an axis is divided more than once."""
        flat = [a for level in self._levels for a in level]
        if len(set(flat)) != len(flat) or flat == sorted(flat):
            return None
        return tuple(sorted(flat).index(a) for a in flat)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._sizes[a] for a in sorted(self._sizes))

    def dense(self, axes: _Axes, dims) -> SNode:
        """A child dividing `axes` into `dims` (an int applies to every axis)."""
        if not isinstance(axes, _Axes):
            where, _ = _user_line()
            raise TypeError(f"{where}dense() takes axes such as ti.i, ti.j or ti.ij as its "
                            f"first argument, got {axes!r}")
        given = dims
        dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
        if len(dims) == 1:
            dims = dims * len(axes.axes)
        if len(dims) != len(axes.axes) or any(int(d) <= 0 for d in dims):
            where, excerpt = _user_line()
            raise FieldError(f"{where}dense({axes!r}, {given!r}) needs one positive size per "
                             f"axis ({len(axes.axes)} for {axes!r}){excerpt}")
        sizes = dict(self._sizes)
        for a, d in zip(axes.axes, dims):
            sizes[a] = sizes.get(a, 1) * int(d)
        return SNode(sizes, self._levels + (tuple(sorted(axes.axes)),))

    pointer = bitmasked = dense

    def dynamic(self, axis: _Axes, n: int, chunk_size=None) -> SNode:
        """Stored dense with its maximum length n (simrun has no sparse storage)."""
        return self.dense(axis, n)

    def place(self, *fields: Field, offset=None) -> SNode:
        for f in fields:
            if isinstance(f, Unplaced):
                continue
            if isinstance(f, Component):
                f.place_in(self.shape)
                continue
            if not isinstance(f, Field):
                raise TypeError(f"place() takes fields, got {f!r}")
            _reject_offset(f.name, offset, self.shape)
            f._place(self.shape, self.cell_order)
        for f in fields:  # x.grad after x, as in place(x, x.grad)
            if isinstance(f, Unplaced):
                f.place_after()
        return self

    def lazy_grad(self) -> None:
        for f in program_fields():
            f._make_grad()

    def lazy_dual(self) -> None:
        for f in program_fields():
            f._make_dual()

    def deactivate_all(self) -> None:
        pass


root = SNode()
