"""External potentials: a uniform gravity field and anchor springs that pin particles."""

import simrun.lang as ti

DEFAULTS = {"uniform_gravity": {"g": 9.8}, "anchor": {"k": 1e4, "first": 0, "count": 1}}
LIMITS = {"anchor": ["k >= 0", "first >= 0", "count >= 0", "first + count <= n"]}


@ti.kernel
def uniform_gravity(x: ti.template(), m: ti.template(), U: ti.template(), g: float):
    """U += m g y: a uniform field pulling along -y (the second coordinate)."""
    for p in x:
        U[None] += m[p] * g * x[p][1]


@ti.kernel
def anchor(x: ti.template(), x0: ti.template(), U: ti.template(), k: float, first: ti.i32,
           count: ti.i32):
    """U += k/2 |x_p - x0_p|^2 for particles first..first+count-1: stiff pins at the start."""
    for p in range(first, first + count):
        U[None] += 0.5 * k * (x[p] - x0[p]).norm_sqr()
