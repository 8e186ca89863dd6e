"""2-D smoke on a periodic grid (the physics of DiffTaichi's smoke_taichi.py): each step the
velocity advects itself semi-Lagrangianly, is made divergence-free by a pressure from Jacobi
iterations, and then carries the smoke. Displacements are in cells per step (dt = 1).

step kernels, in order (the scene lists them):
    advect_velocity   velocity_mid = velocity sampled bilinearly at x - velocity(x)
    divergence        div = -dx / 2 (central differences of velocity_mid)
    project           velocity = velocity_mid - grad(pressure_half) / 2dx, with the pressure
                      the original's update reads: its previous step's second-to-last
                      Jacobi iterate (pressure_half as the last step left it)
    jacobi_even, jacobi_odd (alternating, 10 in all)
                      p <- (div + the 4 neighbours' p) / 4, between pressure and
                      pressure_half; the first starts from the previous step's last iterate
    advect_smoke      smoke_new = smoke sampled at x - velocity(x) (the projected velocity)
    keep_smoke        smoke = smoke_new
objective: match_smoke, the mean squared difference between the smoke and a target image.
Element [y, x] is row y, column x; every index wraps around the grid.
"""

import simrun.lang as ti

DEFAULTS = {name: {} for name in ("advect_velocity", "divergence", "project", "jacobi_even",
                                  "jacobi_odd", "advect_smoke", "keep_smoke", "match_smoke")}


@ti.func
def _wrap(i, n):
    out = i % n
    if out < 0:
        out += n
    return out


@ti.func
def _sample(f: ti.template(), cy, cx):
    """f bilinearly at (cy, cx) in cells, wrapping around the grid."""
    n = f.shape[0]
    left = ti.cast(ti.floor(cy), ti.i32)
    top = ti.cast(ti.floor(cx), ti.i32)
    rw = cy - left
    bw = cx - top
    left = _wrap(left, n)
    right = _wrap(left + 1, n)
    top = _wrap(top, n)
    bot = _wrap(top + 1, n)
    return (1 - rw) * ((1 - bw) * f[left, top] + bw * f[left, bot]) + \
        rw * ((1 - bw) * f[right, top] + bw * f[right, bot])


@ti.kernel
def advect_velocity(velocity: ti.template(), velocity_mid: ti.template()):
    for y, x in velocity:
        velocity_mid[y, x] = _sample(velocity, y - velocity[y, x][0], x - velocity[y, x][1])


@ti.kernel
def divergence(velocity_mid: ti.template(), div: ti.template(), dx: float):
    for y, x in div:
        n = div.shape[0]
        div[y, x] = -0.5 * dx * (velocity_mid[_wrap(y + 1, n), x][0] -
                                 velocity_mid[_wrap(y - 1, n), x][0] +
                                 velocity_mid[y, _wrap(x + 1, n)][1] -
                                 velocity_mid[y, _wrap(x - 1, n)][1])


@ti.func
def _jacobi(p: ti.template(), out: ti.template(), div: ti.template()):
    for y, x in out:
        n = out.shape[0]
        out[y, x] = (div[y, x] + p[_wrap(y - 1, n), x] + p[_wrap(y + 1, n), x] +
                     p[y, _wrap(x - 1, n)] + p[y, _wrap(x + 1, n)]) / 4.0


@ti.kernel
def jacobi_even(pressure: ti.template(), pressure_half: ti.template(), div: ti.template()):
    _jacobi(pressure, pressure_half, div)


@ti.kernel
def jacobi_odd(pressure_half: ti.template(), pressure: ti.template(), div: ti.template()):
    _jacobi(pressure_half, pressure, div)


@ti.kernel
def project(velocity_mid: ti.template(), pressure_half: ti.template(),
            velocity: ti.template(), dx: float):
    for y, x in velocity:
        n = velocity.shape[0]
        p = pressure_half
        velocity[y, x] = ti.Vector([
            velocity_mid[y, x][0] - 0.5 * (p[_wrap(y + 1, n), x] - p[_wrap(y - 1, n), x]) / dx,
            velocity_mid[y, x][1] - 0.5 * (p[y, _wrap(x + 1, n)] - p[y, _wrap(x - 1, n)]) / dx])


@ti.kernel
def advect_smoke(velocity: ti.template(), smoke: ti.template(), smoke_new: ti.template()):
    for y, x in smoke:
        smoke_new[y, x] = _sample(smoke, y - velocity[y, x][0], x - velocity[y, x][1])


@ti.kernel
def keep_smoke(smoke_new: ti.template(), smoke: ti.template()):
    for y, x in smoke:
        smoke[y, x] = smoke_new[y, x]


@ti.kernel
def match_smoke(smoke: ti.template(), target: ti.template(), L: ti.template()):
    for y, x in target:
        L[None] += (target[y, x] - smoke[y, x]) ** 2 * (1.0 / (target.shape[0] *
                                                               target.shape[1]))
