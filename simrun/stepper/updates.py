"""The integrator's updates as simrun.lang kernels on the system's fields.

Forces are F = -x.grad (the energy kernels' gradient), so a kick reads x.grad directly. Each
update is written as the NumPy integrators wrote it, operation for operation (``(-g / m -
damping * v) * h`` added to v, ``dt * v`` added to x, ``2 * low - x`` at a wall), and the
kernels are compiled without fast-math contractions (`ieee`), so a step makes the same IEEE
operations in the same order: the same bits as before, in f32 and f64.

Walls: ``wall`` is 0 (none), 1 (reflect: mirror the position, flip that velocity component)
or 2 (periodic: ``low + (x - low) mod (high - low)``, the mod as ``a - c * floor(a / c)``,
which may differ from NumPy's fmod-based ``np.mod`` in the last bit).
"""

from __future__ import annotations

from contextlib import contextmanager

import simrun.lang as ti
from simrun.lang.api import config

NO_WALL, REFLECT, PERIODIC = 0, 1, 2
WALLS = {"none": NO_WALL, "reflect": REFLECT, "periodic": PERIODIC}


@contextmanager
def ieee():
    """Compile the kernels launched inside without fast-math flags (no FMA contraction, no
    reassociation): the updates then round exactly as NumPy's elementwise operations."""
    old = config.fast_math
    config.fast_math = False
    try:
        yield
    finally:
        config.fast_math = old


@ti.func
def _wall(x: ti.template(), v: ti.template(), box: ti.template(), i, wall: ti.template()):
    if ti.static(wall == REFLECT):
        for c in ti.static(range(x.n)):
            low, high = box[0][c], box[1][c]
            if x[i][c] < low:
                x[i][c] = 2 * low - x[i][c]
                v[i][c] = -v[i][c]
            elif x[i][c] > high:
                x[i][c] = 2 * high - x[i][c]
                v[i][c] = -v[i][c]
    if ti.static(wall == PERIODIC):
        for c in ti.static(range(x.n)):
            low, width = box[0][c], box[1][c] - box[0][c]
            a = x[i][c] - low
            x[i][c] = low + (a - width * ti.floor(a / width))


@ti.kernel
def kick_drift(x: ti.template(), v: ti.template(), m: ti.template(), box: ti.template(),
               h: float, dt: float, damping: float, wall: ti.template(),
               damped: ti.template()):
    """v += (F/m - damping v) * h, then x += dt * v, then the walls. `damped` (compile time:
    `damping != 0` in `run`) keeps the damping term, so its derivative exists at 0 too."""
    for i in x:
        acc = -x.grad[i] / m[i]
        if ti.static(damped):
            acc = acc - damping * v[i]
        v[i] += acc * h
        x[i] += dt * v[i]
        _wall(x, v, box, i, wall)


@ti.kernel
def kick(x: ti.template(), v: ti.template(), m: ti.template(), h: float, damping: float,
         damped: ti.template()):
    """v += (F/m - damping v) * h (velocity Verlet's second half kick); `damped` as in
    kick_drift."""
    for i in x:
        acc = -x.grad[i] / m[i]
        if ti.static(damped):
            acc = acc - damping * v[i]
        v[i] += acc * h


@ti.kernel
def walls(x: ti.template(), v: ti.template(), box: ti.template(), wall: ti.template()):
    """The walls alone (after a scene's own step kernels)."""
    for i in x:
        _wall(x, v, box, i, wall)


@ti.kernel
def zero(g: ti.template()):
    for I in ti.grouped(g):
        g[I] = 0


@ti.kernel
def reset_loss(U: ti.template()):
    """U = 0 before the energies accumulate into it; dU/dU = 1 for their gradients."""
    U[None] = 0
    U.grad[None] = 1


@ti.kernel
def watch(x: ti.template(), v: ti.template(), U: ti.template(), bad: ti.template()):
    """bad = 1 when a position, velocity or force component, or U, is NaN or infinite
    (y - y is 0 exactly for every finite y; compiled by `ieee`, nothing folds it away)."""
    for i in x:
        for c in ti.static(range(x.n)):
            if x[i][c] - x[i][c] != 0 or v[i][c] - v[i][c] != 0 or \
                    x.grad[i][c] - x.grad[i][c] != 0:
                bad[None] = 1
    if U[None] - U[None] != 0:
        bad[None] = 1
