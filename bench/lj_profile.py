"""Where a step of the LJ melt goes, per atom, at each size: the integrator's launches, the
rebuild check, the list build (binning, search), and the force pass (primal, reverse, and
both in one launch: autodiff's value_reverse, what each step launches).

    python bench/lj_profile.py --cells 10 20 30 40 --threads 1 --repeats 7

In-process medians of ``repeats`` calls of each part at the melt's state after ``warm``
steps (so the list holds a melt's rows, not the lattice's), f64; "per step" is a tenth of
ten steps (the rebuilds they make included).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from timing import median_wall

from simrun.scene import load_scene
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.run import prepare

SCENE = Path(__file__).resolve().parents[1] / "scenes" / "lj_melt.yaml"


def median_ns(fn, repeats: int, atoms: int) -> float:
    return median_wall(fn, repeats) * 1e9 / atoms


def profile(cells: int, threads: int, repeats: int, warm: int) -> dict[str, float]:
    side = cells * (4 / 0.8442) ** (1 / 3)
    n = 4 * cells ** 3
    scene = load_scene(SCENE, [f"particles.count={n}", f"initial.shape=[{cells}, {cells}, {cells}]",
                               f"boundary.high=[{side!r}, {side!r}, {side!r}]"])
    system, _ = prepare(scene, None, threads)
    stepper = FieldStepper(scene, system)
    stepper.advance(warm)
    nl = system.neighbor_list
    bound = system.energy[0]
    primal, reverse, both = (bound.kernel.prepare(bound.args, mode)[:2]
                             for mode in ("primal", "reverse", "value_reverse"))
    parts = {
        "10 steps": lambda: stepper.advance(10),
        "kick_drift": lambda: FieldStepper._make(stepper.pre[0]),
        "kick+watch": lambda: [FieldStepper._make(p) for p in stepper.post],
        "check": lambda: nl.update(system.x),
        "bin": lambda: nl.bin(system.x),
        "search": nl.search,
        "clear": lambda: [FieldStepper._make(p) for p in stepper.clear],
        "primal": lambda: FieldStepper._make(primal),
        "reverse": lambda: FieldStepper._make(reverse),
        "U and dU/dx (1 launch)": lambda: FieldStepper._make(both),  # what a step launches
    }
    rebuilds, steps = nl.rebuilds, stepper.step_index
    out = {name: median_ns(fn, repeats, n) for name, fn in parts.items()}
    out["per step"] = out.pop("10 steps") / 10  # rebuilds included
    out["steps per rebuild"] = (stepper.step_index - steps) / max(1, nl.rebuilds - rebuilds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, nargs="+", default=[10, 20, 30, 40])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warm", type=int, default=20)
    args = parser.parse_args()
    print(f"ns per atom, {args.threads} thread(s), load average {os.getloadavg()}")
    for cells in args.cells:
        row = profile(cells, args.threads, args.repeats, args.warm)
        print(f"{4 * cells ** 3:>8} " + " ".join(f"{k} {v:7.1f}" for k, v in row.items()),
              flush=True)


if __name__ == "__main__":
    main()
