"""Objectives for `simrun optimize`: how far the particles end from a target.

Objective kernels accumulate into the 0-D field ``L`` (see ``kernels/__init__.py``)."""

import simrun.lang as ti

DEFAULTS = {"miss": {"tx": 0.0, "ty": 0.0}}


@ti.kernel
def miss(x: ti.template(), L: ti.template(), tx: float, ty: float):
    """L += |x_p - (tx, ty)|^2 / 2 for every particle (the x-y plane)."""
    for p in x:
        L[None] += 0.5 * ((x[p][0] - tx) ** 2 + (x[p][1] - ty) ** 2)


def render_shapes(params) -> dict:
    """The target (tx, ty) the objective aims at, drawn in the pictures."""
    p = {**DEFAULTS["miss"], **params}
    return {"targets": [[p["tx"], p["ty"]]]}
