"""Softened Newtonian gravity: the reference's autodiff N-body example as an energy term."""

import simrun.lang as ti

DEFAULTS = {"gravity": {"softening": 1e-3, "strength": 1.0}}
LIMITS = {"gravity": ["softening > 0"]}  # the i == j pairs divide by sqrt(softening)


@ti.kernel
def gravity(x: ti.template(), m: ti.template(), U: ti.template(), softening: float,
            strength: float):
    """U += -strength * m_i m_j / sqrt(|x_i - x_j|^2 + softening) over all ordered pairs.

    Exactly the reference's ``U[None] += -1 / r.norm(1e-3)`` over ``ti.ndrange(N, N)`` when
    masses and strength are 1 (the i == j terms are constants and add no force).
    """
    for i, j in ti.ndrange(x.shape[0], x.shape[0]):
        r = x[i] - x[j]
        U[None] += -strength * m[i] * m[j] / r.norm(softening)
