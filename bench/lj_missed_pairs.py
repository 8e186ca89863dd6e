"""Pairs within the cutoff that a neighbour list rebuilt on a fixed schedule misses.

LAMMPS's bench/in.lj rebuilds its list every 20 steps without checking how far atoms moved
(`neigh_modify delay 0 every 20 check no`). This replays that schedule on simrun's own melt
trajectory (scenes/lj_melt.yaml, every step): at each step, the pairs closer than the cutoff
(SciPy's periodic k-d tree) that are not among the pairs within cutoff + skin at the last
scheduled build. simrun's rule (rebuild once any atom has moved half the skin) misses none,
by the triangle inequality; the script checks that too.

    python bench/lj_missed_pairs.py [--every 20] [--steps 100] [--cells 20]
"""

from __future__ import annotations

import argparse

import numpy as np
from lj_melt import CELL, SCENE, melt_size
from scipy.spatial import cKDTree

from simrun.scene import load_scene
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.run import prepare


def within(x: np.ndarray, side: float, reach: float) -> set:
    tree = cKDTree(np.mod(x, side), boxsize=side)
    return set(map(tuple, tree.query_pairs(reach, output_type="ndarray")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--cells", type=int, default=20)
    args = parser.parse_args()
    side = args.cells * CELL
    scene = load_scene(SCENE, melt_size(args.cells))
    cutoff, skin = scene.neighbors.cutoff, scene.neighbors.skin
    system, _ = prepare(scene, None, None)
    stepper = FieldStepper(scene, system)
    fixed = checked = checked_at = None
    worst, total, steps_missing, checked_missed = 0, 0, 0, 0
    for step in range(args.steps + 1):
        x = system.x.to_numpy()
        if step % args.every == 0:
            fixed = within(x, side, cutoff + skin)
        d = x - checked_at if checked_at is not None else None
        if d is None or (np.square(d - side * np.round(d / side)).sum(1).max()
                         > (skin / 2) ** 2):
            checked, checked_at = within(x, side, cutoff + skin), x.copy()
        inside = within(x, side, cutoff)
        missed = len(inside - fixed)
        checked_missed += len(inside - checked)
        worst, total = max(worst, missed), total + missed
        steps_missing += missed > 0
        if missed:
            print(f"step {step:4d}: {len(inside):,} pairs within the cutoff, {missed} missed "
                  f"by the every-{args.every} list", flush=True)
        stepper.advance(1)
    print(f"every {args.every} unchecked: {steps_missing} of {args.steps + 1} steps miss "
          f"pairs, at most {worst} in one step, {total} pair-steps in all; simrun's "
          f"half-skin rule: {checked_missed} missed")


if __name__ == "__main__":
    main()
