"""Scalar dtypes and Taichi's promotion rules; imports nothing from the IR."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# What calling a type builds is defined above this module, which imports nothing of
# simrun.lang: builtins.py installs "cast" (`ti.f32(x)`), matrix.py "matrix" (the Matrix
# class, for `ti.types.vector(3, ti.f32)(...)` and `.field(...)`) and "field_element" (what
# fields.py returns for `v[i]` in Python scope).
constructors: dict = {}


@dataclass(frozen=True)
class DType:
    """A scalar type: kind is 'f' (float), 'i' (signed) or 'u' (unsigned)."""

    name: str
    kind: str
    bits: int

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def np(self) -> np.dtype:
        return np.dtype(NUMPY_NAMES[self.name])

    def __repr__(self) -> str:
        return self.name

    def __call__(self, value):
        """`ti.f32(x)` casts, as in Taichi."""
        return constructors["cast"](value, self)


f16 = DType("f16", "f", 16)
f32 = DType("f32", "f", 32)
f64 = DType("f64", "f", 64)
i8, i16, i32, i64 = (DType(f"i{b}", "i", b) for b in (8, 16, 32, 64))
u1 = DType("u1", "u", 1)
u8, u16, u32, u64 = (DType(f"u{b}", "u", b) for b in (8, 16, 32, 64))
float16, float32, float64 = f16, f32, f64
int8, int16, int32, int64 = i8, i16, i32, i64
uint8, uint16, uint32, uint64 = u8, u16, u32, u64

ALL = [f16, f32, f64, i8, i16, i32, i64, u1, u8, u16, u32, u64]
NUMPY_NAMES = {
    "f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
    "i32": "int32", "i64": "int64", "u1": "bool", "u8": "uint8", "u16": "uint16",
    "u32": "uint32", "u64": "uint64",
}
BY_NAME = {t.name: t for t in ALL}


class _Defaults:
    """Default float and int types, set by ti.init(default_fp=..., default_ip=...)."""

    fp: DType = f32
    ip: DType = i32


defaults = _Defaults()


def to_dtype(obj) -> DType:
    """Accept ti dtypes, Python float/int and numpy dtypes wherever Taichi does."""
    if isinstance(obj, DType):
        return obj
    obj = getattr(obj, "dtype_alias", obj)  # `float`/`int` seen inside a kernel
    if obj is float:
        return defaults.fp
    if obj is int:
        return defaults.ip
    if obj is bool:
        return defaults.ip
    try:
        name = np.dtype(obj).name
    except TypeError as exc:
        raise TypeError(f"{obj!r} is not a dtype; use ti.f32, ti.f64, ti.i32, float or int") from exc
    for key, value in NUMPY_NAMES.items():
        if value == name:
            return BY_NAME[key]
    raise TypeError(f"numpy dtype {name} has no simrun equivalent")


def promote(a: DType, b: DType) -> DType:
    """Binary-op result type: floats beat ints, wider beats narrower, unsigned wins ties."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.kind == "u" else b


def literal_dtype(value) -> DType:
    if isinstance(value, bool):
        return defaults.ip
    if isinstance(value, (int, np.integer)):
        return defaults.ip
    if isinstance(value, (float, np.floating)):
        return defaults.fp
    raise TypeError(f"{value!r} is not a number")


class template:
    """Annotation for compile-time arguments (fields, Python values): each distinct value specialises."""

    def __init__(self, *args, **kwargs):
        pass


class ndarray_type:
    """Annotation for numpy arrays passed to kernels; specialised by dtype and shape."""

    def __init__(self, dtype=None, ndim=None, needs_grad=None, element_dim=0, **kwargs):
        self.dtype = dtype
        self.ndim = ndim
        self.element_dim = element_dim  # 1: the last axis is a vector, 2: a matrix
        self.needs_grad = needs_grad  # False: the kernel's gradient skips this array

    def __call__(self, *args, **kwargs):
        return ndarray_type(*args, **kwargs)


@dataclass(frozen=True)
class MatrixType:
    """ti.types.vector / ti.types.matrix: usable as annotation and constructor."""

    n: int
    m: int
    dtype: DType | None
    is_vector: bool

    def __call__(self, *values):
        Matrix = constructors["matrix"]
        if len(values) == 1 and not isinstance(values[0], (int, float)):
            values = values[0]
        if self.is_vector:
            mat = Matrix(list(values))
        else:
            flat = list(values)
            if flat and not isinstance(flat[0], (list, tuple)):
                flat = [flat[i * self.m:(i + 1) * self.m] for i in range(self.n)]
            mat = Matrix(flat)
        return mat.cast(self.dtype) if self.dtype is not None else mat

    def field(self, **kwargs):
        Matrix = constructors["matrix"]
        return Matrix.field(self.n, self.m, dtype=self.dtype, **kwargs) if not self.is_vector \
            else Matrix.field(self.n, 1, dtype=self.dtype, _vector=True, **kwargs)


class _TypesModule:
    """`ti.types`: the constructors Taichi programs use in annotations."""

    template = template
    ndarray = ndarray_type()
    f16, f32, f64 = f16, f32, f64
    i8, i16, i32, i64 = i8, i16, i32, i64
    u8, u16, u32, u64 = u8, u16, u32, u64

    @staticmethod
    def vector(n: int, dtype=None) -> MatrixType:
        return MatrixType(n, 1, to_dtype(dtype) if dtype is not None else None, True)

    @staticmethod
    def matrix(n: int, m: int, dtype=None) -> MatrixType:
        return MatrixType(n, m, to_dtype(dtype) if dtype is not None else None, False)


types = _TypesModule()
