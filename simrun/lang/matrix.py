"""Vector and Matrix values: Python numbers in Python scope, IR expressions inside kernels.

Kernels see small matrices as compile-time arrays of scalar expressions (as Taichi does), so
every matrix function below is ordinary Python arithmetic that the frontend turns into IR.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import builtins as B
from .fields import Field, Ndarray
from .ir import builder
from .types import constructors, to_dtype


def _is_scalar(x) -> bool:
    return not isinstance(x, (Matrix, list, tuple, np.ndarray))


class Matrix:
    """An n x m matrix (m == 1 and is_vector for vectors) of scalars or kernel expressions."""

    __array_priority__ = 100

    def __init__(self, arr, dt=None, *, _vector: bool | None = None):
        if isinstance(arr, Matrix):
            rows = [list(r) for r in arr.rows]
            vec = arr.is_vector
        elif isinstance(arr, np.ndarray):
            arr = arr.tolist()
            return self.__init__(arr, dt, _vector=_vector)
        else:
            arr = list(arr)
            vec = not arr or not isinstance(arr[0], (list, tuple, np.ndarray, Matrix))
            if vec:
                rows = [[x] for x in arr]
            else:
                rows = [list(r.entries() if isinstance(r, Matrix) else r) for r in arr]
        self.rows = rows
        self.is_vector = vec if _vector is None else _vector
        if dt is not None:
            self.rows = [[B.cast(x, to_dtype(dt)) for x in r] for r in self.rows]

    # ------------------------------------------------------------ shape and access
    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def m(self) -> int:
        return len(self.rows[0]) if self.rows else 0

    def get_shape(self):
        return (self.n,) if self.is_vector else (self.n, self.m)

    def entries(self) -> list:
        return [x for r in self.rows for x in r]

    def zip_map(self, fn, args):
        """fn over the entries of args (matrices shaped like self, or scalars), entry by entry:
        ti.* math functions given a matrix."""
        shaped = [x if isinstance(x, Matrix) else None for x in args]
        out = Matrix.__new__(Matrix)
        out.rows = [[fn(*[s.rows[i][j] if s is not None else x for s, x in zip(shaped, args)])
                     for j in range(self.m)] for i in range(self.n)]
        out.is_vector = self.is_vector
        return out

    def _new(self, rows, vec=None):
        out = Matrix.__new__(Matrix)
        out.rows = rows
        out.is_vector = self.is_vector if vec is None else vec
        return out

    def map(self, f) -> Matrix:
        return self._new([[f(x) for x in r] for r in self.rows])

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        if self.is_vector:
            return iter([r[0] for r in self.rows])
        return iter([self._new([list(r)], True).transpose()._as_vec() for r in self.rows])

    def _as_vec(self):
        return self._new([[x] for x in self.entries()], True)

    def _index(self, key):
        if isinstance(key, tuple):
            if len(key) == 1:
                key = key[0]
            else:
                i, j = B.static_int(key[0]), B.static_int(key[1])
                self._check_index(i, self.n, "row")
                self._check_index(j, self.m, "column")
                return i, j
        k = B.static_int(key)
        self._check_index(k, self.n, "entry" if self.is_vector else "row")
        return (k, 0) if self.is_vector else (k, None)

    def _check_index(self, k: int, size: int, what: str) -> None:
        if not -size <= k < size:
            shape = f"{self.n}-vector" if self.is_vector else f"{self.n}x{self.m} matrix"
            raise IndexError(f"{what} index {k} is out of range for a {shape} (valid: 0 to "
                             f"{size - 1})")

    def __getitem__(self, key):
        i, j = self._index(key)
        if j is None:
            return self._new([[x] for x in self.rows[i]], True)
        return self.rows[i][j]

    def __setitem__(self, key, value):
        i, j = self._index(key)
        if j is None:
            for jj, x in enumerate(Matrix(value).entries()):
                self.rows[i][jj] = x
        else:
            self.rows[i][j] = value

    x = property(lambda s: s[0], lambda s, v: s.__setitem__(0, v))
    y = property(lambda s: s[1], lambda s, v: s.__setitem__(1, v))
    z = property(lambda s: s[2], lambda s, v: s.__setitem__(2, v))
    w = property(lambda s: s[3], lambda s, v: s.__setitem__(3, v))

    # ------------------------------------------------------------ arithmetic
    def _zip(self, other, f, swap=False):
        if isinstance(other, (list, tuple)):
            other = Matrix(other)
        if isinstance(other, Matrix):
            if (other.n, other.m) != (self.n, self.m):
                raise TypeError(f"matrix shapes {self.get_shape()} and {other.get_shape()} differ")
            pairs = [[(a, b) for a, b in zip(ra, rb)] for ra, rb in zip(self.rows, other.rows)]
        elif _is_scalar(other):
            pairs = [[(a, other) for a in r] for r in self.rows]
        else:
            return NotImplemented
        return self._new([[f(b, a) if swap else f(a, b) for a, b in r] for r in pairs])

    def __add__(self, o): return self._zip(o, lambda a, b: a + b)
    def __radd__(self, o): return self._zip(o, lambda a, b: a + b, True)
    def __sub__(self, o): return self._zip(o, lambda a, b: a - b)
    def __rsub__(self, o): return self._zip(o, lambda a, b: a - b, True)
    def __mul__(self, o): return self._zip(o, lambda a, b: a * b)
    def __rmul__(self, o): return self._zip(o, lambda a, b: a * b, True)
    def __truediv__(self, o): return self._zip(o, B.truediv)
    def __rtruediv__(self, o): return self._zip(o, B.truediv, True)
    def __floordiv__(self, o): return self._zip(o, lambda a, b: a // b)
    def __mod__(self, o): return self._zip(o, lambda a, b: a % b)
    def __pow__(self, o): return self._zip(o, lambda a, b: a**b)
    def __rpow__(self, o): return self._zip(o, lambda a, b: a**b, True)
    def __lt__(self, o): return self._zip(o, lambda a, b: a < b)
    def __le__(self, o): return self._zip(o, lambda a, b: a <= b)
    def __gt__(self, o): return self._zip(o, lambda a, b: a > b)
    def __ge__(self, o): return self._zip(o, lambda a, b: a >= b)
    def __eq__(self, o): return self._zip(o, lambda a, b: a == b)  # type: ignore[override]
    def __ne__(self, o): return self._zip(o, lambda a, b: a != b)  # type: ignore[override]
    def __neg__(self): return self.map(lambda a: -a)
    def __pos__(self): return self
    def __abs__(self): return self.map(B.abs)
    __hash__ = object.__hash__

    def __matmul__(self, other):
        if isinstance(other, (list, tuple)):
            other = Matrix(other)
        if self.n and other.n != self.m:
            raise TypeError(f"cannot multiply {self.get_shape()} by {other.get_shape()}")
        rows = [[_sum(self.rows[i][k] * other.rows[k][j] for k in range(self.m))
                 for j in range(other.m)] for i in range(self.n)]
        return self._new(rows, other.is_vector)

    def __rmatmul__(self, other):
        return Matrix(other) @ self

    # ------------------------------------------------------------ methods
    def transpose(self) -> Matrix:
        return self._new([[self.rows[i][j] for i in range(self.n)] for j in range(self.m)], False)

    @property
    def T(self) -> Matrix:
        return self.transpose()

    def sum(self):
        return _sum(self.entries())

    def dot(self, other):
        return (self * Matrix(other) if not isinstance(other, Matrix) else self * other).sum()

    def norm_sqr(self):
        return (self * self).sum()

    def norm(self, eps=0):
        return B.sqrt(self.norm_sqr() + eps) if not _is_zero(eps) else B.sqrt(self.norm_sqr())

    def norm_inv(self, eps=0):
        return B.rsqrt(self.norm_sqr() + eps)

    def normalized(self, eps=0):
        """v / (|v| + eps), as Taichi 1.7.4 (eps is added to the norm, not under the root)."""
        inv = 1.0 / (self.norm() + eps) if not _is_zero(eps) else 1.0 / self.norm()
        return self * inv

    def cross(self, other):
        a, b = self.entries(), Matrix(other).entries()
        if len(a) == 2:
            return a[0] * b[1] - a[1] * b[0]
        return Matrix([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                       a[0] * b[1] - a[1] * b[0]])

    def outer_product(self, other):
        a, b = self.entries(), Matrix(other).entries()
        return Matrix([[x * y for y in b] for x in a])

    def trace(self):
        return _sum(self.rows[i][i] for i in range(min(self.n, self.m)))

    def determinant(self):
        r = self.rows
        if self.n == 1:
            return r[0][0]
        if self.n == 2:
            return r[0][0] * r[1][1] - r[0][1] * r[1][0]
        if self.n == 3:
            return (r[0][0] * (r[1][1] * r[2][2] - r[1][2] * r[2][1])
                    - r[0][1] * (r[1][0] * r[2][2] - r[1][2] * r[2][0])
                    + r[0][2] * (r[1][0] * r[2][1] - r[1][1] * r[2][0]))
        total = 0
        for j in range(self.n):
            minor = self._new([row[:j] + row[j + 1:] for row in r[1:]], False)
            term = r[0][j] * minor.determinant()
            total = total + term if j % 2 == 0 else total - term
        return total

    def inverse(self):
        n, r = self.n, self.rows
        det = self.determinant()
        inv_det = 1.0 / det
        if n == 1:
            return self._new([[inv_det]], False)
        if n == 2:
            return self._new([[r[1][1] * inv_det, -r[0][1] * inv_det],
                              [-r[1][0] * inv_det, r[0][0] * inv_det]], False)
        cof = []
        for i in range(n):
            row = []
            for j in range(n):
                minor = self._new([rr[:j] + rr[j + 1:] for k, rr in enumerate(r) if k != i], False)
                c = minor.determinant()
                row.append(c if (i + j) % 2 == 0 else -c)
            cof.append(row)
        return self._new([[cof[j][i] * inv_det for j in range(n)] for i in range(n)], False)

    def max(self):
        return _reduce(B.max, self.entries())

    def min(self):
        return _reduce(B.min, self.entries())

    def any(self):
        return _reduce(lambda a, b: B.logical_or(a, b), [x != 0 for x in self.entries()])

    def all(self):
        return _reduce(lambda a, b: B.logical_and(a, b), [x != 0 for x in self.entries()])

    def cast(self, dtype) -> Matrix:
        return self.map(lambda x: B.cast(x, to_dtype(dtype)))

    def to_numpy(self, dtype=None) -> np.ndarray:
        arr = np.array([[B.python_value(x) for x in r] for r in self.rows])
        arr = arr.reshape(self.n) if self.is_vector else arr
        return arr.astype(dtype) if dtype is not None else arr

    def to_list(self):
        return self.to_numpy().tolist()

    def fill(self, value):
        self.rows = [[value for _ in r] for r in self.rows]

    def __repr__(self) -> str:
        try:
            return repr(self.to_numpy())
        except TypeError:
            return f"Matrix({self.rows})"

    def __array__(self, dtype=None, copy=None):
        return self.to_numpy(dtype)

    # ------------------------------------------------------------ constructors
    @staticmethod
    def identity(dt, n: int) -> Matrix:
        return Matrix([[B.cast(1 if i == j else 0, to_dtype(dt)) for j in range(n)]
                       for i in range(n)])

    @staticmethod
    def zero(dt, n: int, m: int | None = None) -> Matrix:
        if m is None:
            return Matrix([B.cast(0, to_dtype(dt)) for _ in range(n)])
        return Matrix([[B.cast(0, to_dtype(dt)) for _ in range(m)] for _ in range(n)])

    @staticmethod
    def diag(dim: int, val) -> Matrix:
        return Matrix([[val if i == j else 0 * val for j in range(dim)] for i in range(dim)])

    @staticmethod
    def unit(n: int, i: int, dt=None) -> Matrix:
        return Matrix([1 if k == i else 0 for k in range(n)], dt)

    @staticmethod
    def one(dt, n: int, m: int | None = None) -> Matrix:
        if m is None:
            return Matrix([B.cast(1, to_dtype(dt)) for _ in range(n)])
        return Matrix([[B.cast(1, to_dtype(dt)) for _ in range(m)] for _ in range(n)])

    @staticmethod
    def rows(rows) -> Matrix:  # noqa: F811 - instances shadow it with their data
        return Matrix([Matrix(r).entries() for r in rows])

    @staticmethod
    def cols(cols) -> Matrix:
        return Matrix([Matrix(c).entries() for c in cols]).transpose()

    @classmethod
    def field(cls, n: int, m: int, dtype=None, shape=None, name: str = "", offset=None,
              needs_grad: bool = False, needs_dual: bool = False, layout=None,
              _vector: bool = False, **kwargs):
        return Field(dtype, shape, name=name, needs_grad=needs_grad, needs_dual=needs_dual,
                     elem_shape=(n,) if _vector else (n, m), offset=offset)

    @staticmethod
    def ndarray(n: int, m: int, dtype=None, shape=(), needs_grad: bool = False, **kwargs):
        """ti.Matrix.ndarray: an n x m matrix per element (see fields.Ndarray)."""
        return Ndarray(dtype, shape, needs_grad=needs_grad, elem_shape=(n, m))


def _sum(items):
    items = list(items)
    total = items[0]
    for x in items[1:]:
        total = total + x
    return total


def _reduce(f, items):
    total = items[0]
    for x in items[1:]:
        total = f(total, x)
    return total


def _is_zero(x) -> bool:
    return isinstance(x, numbers.Number) and x == 0


class FieldElement(Matrix):
    """`v[i]` in Python scope: the element's value, whose component writes (`v[i][0] = 5.0`,
    `m[i][0, 1] = 3.0`, `m[i][0][1] = 3.0`, `v[i].x = 1.0`) also go to the field, as in Taichi;
    a plain copy would drop them silently."""

    def __init__(self, field, idx: tuple, row: int | None = None):
        data = field.host_values(write=False)  # a component write marks it (__setitem__)
        value = data[idx] if row is None else data[idx][row]
        super().__init__(value.tolist(), _vector=field.is_vector or row is not None)
        self._field, self._idx, self._row = field, idx, row

    def _place(self, i: int, j: int | None) -> tuple:
        if self._row is not None:  # a row of a matrix element: entry (row, i)
            return self._idx + (self._row, i)
        return self._idx + ((i,) if self._field.is_vector else (i,) if j is None else (i, j))

    def __getitem__(self, key):
        i, j = self._index(key)
        if j is None:  # a row of a matrix element: its writes reach the field too
            return FieldElement(self._field, self._idx, i)
        return self.rows[i][j]

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        i, j = self._index(key)
        row = self.rows[i] if j is None else self.rows[i][j]
        self._field.data[self._place(i, j)] = row
        self._field.version += 1


builder.elementwise += (Matrix,)
constructors.update(matrix=Matrix, field_element=FieldElement)


class _VectorMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Matrix) and obj.is_vector

    def __call__(cls, arr, dt=None, **kwargs):
        if isinstance(arr, Matrix):
            arr = arr.entries()
        return Matrix(list(arr), dt, _vector=True)


class Vector(metaclass=_VectorMeta):
    """`ti.Vector(...)` builds a vector Matrix; `ti.Vector.field` a vector field."""

    @staticmethod
    def field(n: int, dtype=None, shape=None, name: str = "", offset=None,
              needs_grad: bool = False, needs_dual: bool = False, **kwargs):
        return Matrix.field(n, 1, dtype, shape, name, offset, needs_grad=needs_grad,
                            needs_dual=needs_dual, _vector=True)

    # Taichi's unbound calls, e.g. ti.Vector.normalized(d, 1e-6) in DiffTaichi's billiards
    normalized = staticmethod(lambda v, eps=0: v.normalized(eps))
    norm = staticmethod(lambda v, eps=0: v.norm(eps))
    norm_sqr = staticmethod(lambda v: v.norm_sqr())
    dot = staticmethod(lambda a, b: a.dot(b))
    cross = staticmethod(lambda a, b: a.cross(b))
    outer_product = staticmethod(lambda a, b: a.outer_product(b))

    @staticmethod
    def ndarray(n: int, dtype=None, shape=(), needs_grad: bool = False, **kwargs):
        """ti.Vector.ndarray: an n-vector per element (see fields.Ndarray)."""
        return Ndarray(dtype, shape, needs_grad=needs_grad, elem_shape=(n,))

    @staticmethod
    def zero(dt, n: int) -> Matrix:
        return Matrix.zero(dt, n)

    @staticmethod
    def one(dt, n: int) -> Matrix:
        return Matrix.one(dt, n)

    @staticmethod
    def unit(n: int, i: int, dt=None) -> Matrix:
        return Matrix.unit(n, i, dt)

