"""Height-field water on a grid (the physics of DiffTaichi's wave.py): the wave equation
p_tt = c^2 lap(p), by the leapfrog finite-difference step

    p[k+2] = 2 p[k+1] + c^2 dt^2 lap(p[k+1]) - p[k]

with p = 0 outside the grid. The state carries two time levels: `height` = p[k] and
`height_next` = p[k+1] (the original's p[0] is the trained initial field and p[1] = 0). The
objective is the squared distance, times the cell area, between the final level and a target
image. The original's damping alpha is 0 there and is left out: its term reads p[k] at the
neighbours, which `leap` overwrites in place.

step kernels, in order:
    leap     height = p[k+2], cell by cell in place (each cell reads only its own p[k])
    swap     the levels move on: height = p[k+1], height_next = p[k+2]
objective: match_target
"""

import simrun.lang as ti

DEFAULTS = {"leap": {"c": 340.0}, "swap": {}, "match_target": {}}
LIMITS = {"leap": ["c > 0"]}


@ti.func
def _at(p: ti.template(), i, j):
    """p[i, j], 0 outside the grid."""
    out = 0.0
    if 0 <= i < p.shape[0] and 0 <= j < p.shape[1]:
        out = p[i, j]
    return out


@ti.func
def _laplacian(p: ti.template(), i, j, inv_dx2):
    return inv_dx2 * (-4 * _at(p, i, j) + _at(p, i, j - 1) + _at(p, i, j + 1) +
                      _at(p, i + 1, j) + _at(p, i - 1, j))


@ti.kernel
def leap(height: ti.template(), height_next: ti.template(), dt: float, dx: float, c: float):
    for i, j in height:
        inv_dx = 1.0 / dx
        inv_dx2 = inv_dx * inv_dx
        height[i, j] = 2 * height_next[i, j] + (c * c * dt * dt) * \
            _laplacian(height_next, i, j, inv_dx2) - height[i, j]


@ti.kernel
def swap(height: ti.template(), height_next: ti.template()):
    for i, j in height:
        newest = height[i, j]
        height[i, j] = height_next[i, j]
        height_next[i, j] = newest


@ti.kernel
def match_target(height_next: ti.template(), target: ti.template(), L: ti.template(),
                 dx: float):
    for i, j in target:
        L[None] += dx * dx * (target[i, j] - height_next[i, j]) ** 2
