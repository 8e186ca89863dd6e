"""Half list (each pair once; the reverse pass scatters to x[j]) against a full list (each
pair in both rows, U halved) for the LJ melt's forces, and the list build itself.

    python bench/lj_neighbors.py --cells 20 --repeats 20

Medians of ``repeats`` force evaluations (primal + reverse, f64, 2 threads) at the fcc start.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from timing import median_wall

import simrun.lang as ti
from simrun.md import min_image
from simrun.scene import initial_state, load_scene
from simrun.stepper.neighbors import NeighborList
from simrun.stepper.system import System

SCENE = Path(__file__).resolve().parents[1] / "scenes" / "lj_melt.yaml"


@ti.kernel
def lj_full(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
            box_high: ti.template(), periodic: ti.template(), U: ti.template()):
    for i in range(x.shape[0]):
        for k in range(neighbors[i, 0]):
            r = min_image(x[neighbors[i, k + 1]] - x[i], box_low, box_high, periodic)
            r2 = r.dot(r)
            if r2 < 6.25:
                s6 = (1.0 / r2) ** 3
                U[None] += 2.0 * (s6 * s6 - s6)  # half of 4 (s^12 - s^6): each pair twice


def median_ms(fn, repeats: int) -> float:
    return median_wall(fn, repeats) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    c = args.cells
    side = c * (4 / 0.8442) ** (1 / 3)
    scene = load_scene(SCENE, [f"particles.count={4 * c ** 3}", f"initial.shape=[{c}, {c}, {c}]",
                               f"boundary.high=[{side!r}, {side!r}, {side!r}]"])
    x0, v0 = initial_state(scene)
    system = System(scene, x0)
    system.set_state(x0, v0)
    half_ms = median_ms(system.forces, args.repeats)
    u_half = system.forces()[0]
    full = NeighborList(2.5, 0.3, x0, scene.boundary, system.fp, system.box, half=False)
    full.update(system.x)
    box = system.box

    def full_forces() -> None:
        system.x.grad.fill(0)
        with ti.ad.Tape(loss=system.U, clear_gradients=False):
            lj_full(system.x, full.neighbors, box["box_low"], box["box_high"], True, system.U)

    full_ms = median_ms(full_forces, args.repeats)
    nl = system.neighbor_list
    print(f"{4 * c ** 3} atoms, load average {os.getloadavg()}")
    print(f"forces, half list: {half_ms:.2f} ms; full list: {full_ms:.2f} ms "
          f"(full / half = {full_ms / half_ms:.2f}); U equal to {abs(system.U[None] - u_half):.2e}")
    print(f"build, half list: {median_ms(lambda: nl.build(system.x), 5):.2f} ms; "
          f"full list: {median_ms(lambda: full.build(system.x), 5):.2f} ms")


if __name__ == "__main__":
    main()
