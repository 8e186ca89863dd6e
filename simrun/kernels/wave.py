"""Height-field water on a grid (the physics of DiffTaichi's wave.py): the wave equation
p_tt = c^2 lap(p) + damping, by the leapfrog finite-difference step

    p[k+2] = 2 p[k+1] + (c^2 dt^2 + c alpha dt) lap(p[k+1]) - p[k] - c alpha dt lap(p[k])

with p = 0 outside the grid. The state carries two time levels: `height` = p[k] and
`height_next` = p[k+1] (the original's p[0] is the trained initial field and p[1] = 0), and
`height_new` is the step's scratch. The objective is the squared distance, times the cell
area, between the final level and a target image.

step kernels, in order: fdtd (p[k+2] into height_new), shift (the levels move on)
objective: match_target
"""

import simrun.lang as ti

DEFAULTS = {"fdtd": {"c": 340.0, "alpha": 0.0}, "shift": {}, "match_target": {}}
LIMITS = {"fdtd": ["c > 0", "alpha >= 0"]}


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
def fdtd(height: ti.template(), height_next: ti.template(), height_new: ti.template(),
         dt: float, dx: float, c: float, alpha: float):
    for i, j in height_new:
        inv_dx = 1.0 / dx
        inv_dx2 = inv_dx * inv_dx
        laplacian_p = _laplacian(height, i, j, inv_dx2)
        laplacian_q = _laplacian(height_next, i, j, inv_dx2)
        height_new[i, j] = 2 * height_next[i, j] + (c * c * dt * dt + c * alpha * dt) * \
            laplacian_q - height[i, j] - c * alpha * dt * laplacian_p


@ti.kernel
def shift(height: ti.template(), height_next: ti.template(), height_new: ti.template()):
    for i, j in height:
        height[i, j] = height_next[i, j]
        height_next[i, j] = height_new[i, j]


@ti.kernel
def match_target(height_next: ti.template(), target: ti.template(), L: ti.template(),
                 dx: float):
    for i, j in target:
        L[None] += dx * dx * (target[i, j] - height_next[i, j]) ** 2
