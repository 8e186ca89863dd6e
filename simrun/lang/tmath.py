"""`ti.math`: Taichi's GLSL-style math module (the part differentiable programs use): vector and
matrix types, constants, and functions that work on scalars and element-wise on vectors."""

from __future__ import annotations

import math as _math

from . import builtins as B
from .types import f32, i32, types, u32

vec2, vec3, vec4 = (types.vector(n, None) for n in (2, 3, 4))
ivec2, ivec3, ivec4 = (types.vector(n, i32) for n in (2, 3, 4))
uvec2, uvec3, uvec4 = (types.vector(n, u32) for n in (2, 3, 4))
mat2, mat3, mat4 = (types.matrix(n, n, None) for n in (2, 3, 4))

pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan

sin, cos, tan, asin, acos, atan2 = B.sin, B.cos, B.tan, B.asin, B.acos, B.atan2
tanh, exp, log, sqrt, floor, ceil, round = B.tanh, B.exp, B.log, B.sqrt, B.floor, B.ceil, B.round
min, max, pow = B.min, B.max, B.pow  # noqa: A001


def clamp(x, xmin, xmax):
    return B.min(B.max(x, xmin), xmax)


def mix(x, y, a):
    return x * (1.0 - a) + y * a


def sign(x):
    return B.select(x > 0, 1.0, B.select(x < 0, -1.0, 0.0))


def step(edge, x):
    return B.select(x < edge, 0.0, 1.0)


def fract(x):
    return x - B.floor(x)


def smoothstep(edge0, edge1, x):
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def log2(x):
    return B.log(x) / _math.log(2.0)


def radians(x):
    return x * (_math.pi / 180.0)


def degrees(x):
    return x * (180.0 / _math.pi)


def dot(x, y):
    return x.dot(y)


def cross(x, y):
    return x.cross(y)


def length(x):
    return x.norm()


def distance(x, y):
    return (x - y).norm()


def normalize(x):
    return x.normalized()


def reflect(x, n):
    return x - 2.0 * n.dot(x) * n


def inverse(m):
    return m.inverse()


__all__ = ["vec2", "vec3", "vec4", "ivec2", "ivec3", "ivec4", "uvec2", "uvec3", "uvec4",
           "mat2", "mat3", "mat4", "pi", "e", "inf", "nan", "sin", "cos", "tan", "asin",
           "acos", "atan2", "tanh", "exp", "log", "sqrt", "floor", "ceil", "round", "min",
           "max", "pow", "clamp", "mix", "sign", "step", "fract", "smoothstep", "log2",
           "radians", "degrees", "dot", "cross", "length", "distance", "normalize", "reflect",
           "inverse", "f32"]
