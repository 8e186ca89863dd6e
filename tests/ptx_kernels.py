"""Kernels that exercise every part of the NVPTX lowering, for tests/test_cuda_ptx.py: every
registered op in f32 and f64 (the float functions through libdevice), atomics of each kind,
ndrange, serial tasks with a return value, random numbers, print, the autodiff stack of a
loop with a run-time trip count, and integer ops in 32 and 64 bits."""

import simrun.lang as ti
from simrun.lang.builtins import MATH_FUNCTIONS

N = 16
x32 = ti.field(ti.f32, N, needs_grad=True, needs_dual=True)
y32 = ti.field(ti.f32, N, needs_grad=True, needs_dual=True)
x64 = ti.field(ti.f64, N, needs_grad=True, needs_dual=True)
y64 = ti.field(ti.f64, N, needs_grad=True, needs_dual=True)
n32 = ti.field(ti.i32, N)
n64 = ti.field(ti.i64, N)
u32 = ti.field(ti.u32, N)
grid = ti.Vector.field(2, ti.f32, (8, 8), needs_grad=True, needs_dual=True)
loss = ti.field(ti.f32, (), needs_grad=True, needs_dual=True)
loss64 = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
count = ti.field(ti.i32, ())
UNARY = [f for f in MATH_FUNCTIONS.values() if f.__name__ != "atan2"]


@ti.func
def every_float_op(a, b):
    s = a * 0
    for f in ti.static(UNARY):
        s += f(ti.abs(a) * 0.5 + 0.1)
    s += ti.atan2(a, b) + a**b + a**2 + ti.rsqrt(ti.abs(b) + 1.0) + a % b + a // b
    s += ti.floor(a) + ti.ceil(b) + ti.round(a) + ti.min(a, b) + ti.max(a, b) + ti.abs(b)
    s += -a + a / b + ti.select(a > b, a, b) + ti.cast(ti.cast(a, ti.f32), a.dtype)
    if a < b and not (a == b) or a >= b and a != b or a <= b:
        s += 1.0
    return s


@ti.kernel
def float_ops_f32():
    for i in x32:
        y32[i] = every_float_op(x32[i], x32[(i + 1) % N] + 2.0)
        loss[None] += y32[i]


@ti.kernel
def float_ops_f64():
    for i in x64:
        y64[i] = every_float_op(x64[i], x64[(i + 1) % N] + 2.0)
        loss64[None] += y64[i]


@ti.kernel
def int_ops():
    for i in n32:
        a, b = n32[i], n32[(i + 3) % N] + 1
        n32[i] = a // b + a % b + (a << 2) + (a >> 1) + (a & b) + (a | b) + (a ^ b) + ~a
        n64[i] = ti.cast(a, ti.i64) ** 3 + n64[i] // 7 - (n64[i] >> 3)
        u32[i] = u32[i] // ti.u32(3) + (u32[i] >> ti.u32(1)) + ti.max(u32[i], ti.u32(5))
        ti.atomic_add(count[None], a)
        ti.atomic_max(count[None], b)
        ti.atomic_min(count[None], a)
        ti.atomic_and(n32[(i + 1) % N], 7)
        ti.atomic_or(n32[(i + 2) % N], 8)
        ti.atomic_xor(n32[(i + 3) % N], 9)


@ti.kernel
def float_to_int():
    for i in x32:
        n32[i] = ti.cast(x32[i] * 1e9, ti.i32)  # out of range past |x| > 2.1


@ti.kernel
def float_atomics():
    for i in x32:
        ti.atomic_add(y32[i % 4], x32[i])
        ti.atomic_sub(y64[i % 4], x64[i])
        ti.atomic_max(y32[4 + i % 4], x32[i])
        ti.atomic_min(y64[4 + i % 4], x64[i])
        ti.atomic_mul(y32[8 + i % 4], x32[i])


@ti.kernel
def stencil():
    for i, j in ti.ndrange((1, 7), (1, 7)):
        g = 0.25 * (grid[i - 1, j] + grid[i + 1, j] + grid[i, j - 1] + grid[i, j + 1])
        loss[None] += g.dot(g) * ti.sqrt(grid[i, j].norm_sqr() + 1.0)


@ti.kernel
def serial_with_return(k: ti.i32) -> ti.f32:
    total = 0.0
    for _ in range(1):
        for i in range(k):
            total += x32[i] * ti.random()
    print("total", total, k)
    return total


@ti.kernel
def dynamic_loop():
    """A run-time trip count in a differentiated loop: the reverse kernel uses the stack."""
    for i in x32:
        v = x32[i]
        for _ in range(n32[i]):
            v = ti.sin(v) * 0.9 + 0.1
        y32[i] = v
        loss[None] += v


KERNELS = [(float_ops_f32, ()), (float_ops_f64, ()), (int_ops, ()), (float_atomics, ()),
           (stencil, ()), (serial_with_return, (3,)), (dynamic_loop, ()), (float_to_int, ())]
DIFFERENTIABLE = {float_ops_f32, float_ops_f64, stencil, dynamic_loop}
