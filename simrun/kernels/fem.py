"""Hyperelastic FEM: compressible neo-Hookean energy on a 2-D triangle mesh.

The rest shape is the scene's step-0 positions; ``allocate`` stores, per triangle, the inverse
rest edge matrix Dm_inv and the rest area. Forces come from autodiff of U (as in Taichi's
fem99 example), never from a hand-written stress.
"""

import numpy as np

import simrun.lang as ti

DEFAULTS = {"neo_hookean": {"youngs": 1000.0, "poisson": 0.3}}
LIMITS = {"neo_hookean": ["youngs > 0", "-1 < poisson < 0.5"]}  # Lame lambda is finite


def rest_shapes(x0: np.ndarray, triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per triangle: inverse of Dm = [x1 - x0, x2 - x0] (columns), and the rest area."""
    a, b, c = (x0[triangles[:, i]] for i in range(3))
    dm = np.stack([b - a, c - a], axis=2)  # (T, 2, 2), edge vectors as columns
    det = np.linalg.det(dm)
    if np.any(np.abs(det) < 1e-300):
        raise ValueError("a triangle has zero rest area")
    return np.linalg.inv(dm), 0.5 * np.abs(det)


def allocate(ctx) -> dict:
    """Dm_inv (T, 2x2) and rest_area (T) from the rest shape x0."""
    triangles = ctx.topology.get("triangles")
    if triangles is None or ctx.dim != 2:
        return {}
    dm_inv, area = rest_shapes(ctx.x0, triangles)
    dm_field = ti.Matrix.field(2, 2, dtype=ctx.dtype, shape=len(triangles))
    area_field = ti.field(dtype=ctx.dtype, shape=len(triangles))
    dm_field.from_numpy(dm_inv.astype(ctx.np_dtype))
    area_field.from_numpy(area.astype(ctx.np_dtype))
    return {"Dm_inv": dm_field, "rest_area": area_field}


@ti.kernel
def neo_hookean(x: ti.template(), triangles: ti.template(), Dm_inv: ti.template(),
                rest_area: ti.template(), U: ti.template(), youngs: float, poisson: float):
    """U += A0 (mu/2 (tr(F^T F) - 2) - mu log J + lambda/2 (log J)^2), F = Ds Dm_inv."""
    for t in range(triangles.shape[0]):
        mu = youngs / (2.0 * (1.0 + poisson))
        la = youngs * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson))
        a = triangles[t, 0]
        ab = x[triangles[t, 1]] - x[a]
        ac = x[triangles[t, 2]] - x[a]
        Ds = ti.Matrix([[ab[0], ac[0]], [ab[1], ac[1]]])
        F = Ds @ Dm_inv[t]
        I1 = (F.transpose() @ F).trace()
        log_J = ti.log(F.determinant())
        U[None] += rest_area[t] * (0.5 * mu * (I1 - 2.0) - mu * log_J + 0.5 * la * log_J ** 2)
