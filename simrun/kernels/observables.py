"""Objective kernels for ensemble averages (`objective: {kernel: ..., at: mean}`): each
accumulates one frame's value into the 0-D field L, and `simrun grad --method ensemble`
averages it over the canonical ensemble (no derivative of it is needed for reweighting).

- ``msd``: the mean-square displacement from the start, (1/N) sum_i |x_i - x0_i|^2 (for
  bound systems, where it is an equilibrium property: particles in traps or on a lattice;
  in a periodic fluid the positions are wrapped into the box, so use it for times shorter
  than a box crossing only).
- ``pair_fraction``: the fraction of pairs (over the neighbour list) closer than ``r``, a
  smooth-free histogram bin of g(r) (its ensemble derivative needs none of its own).
"""

import simrun.lang as ti
from simrun.md import min_image, neighbor, neighbor_count

DEFAULTS = {"pair_fraction": {"r": 1.5}}
LIMITS = {"pair_fraction": ["r > 0", "r <= list_cutoff"]}


@ti.kernel
def msd(x: ti.template(), x0: ti.template(), L: ti.template()):
    """L += (1/N) sum |x - x0|^2."""
    for i in x:
        L[None] += (x[i] - x0[i]).norm_sqr() / x.shape[0]


@ti.kernel
def pair_fraction(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
                  box_high: ti.template(), periodic: ti.template(), L: ti.template(),
                  r: float):
    """L += (pairs closer than r) / (N (N - 1) / 2)."""
    n = x.shape[0]
    for i in range(n):
        for k in range(neighbor_count(neighbors, i)):
            d = min_image(x[neighbor(neighbors, i, k)] - x[i], box_low, box_high, periodic)
            if d.norm_sqr() < r * r:
                L[None] += 2.0 / (n * (n - 1.0))
