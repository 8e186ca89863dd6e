"""Where a real LJ melt run's time goes, kernel by kernel (the same split LAMMPS prints as
Pair / Neigh / Modify):

    python bench/melt_kernels.py --cells 20 --steps 200 --threads 1

Runs ``simrun run lj_melt.yaml`` (in.lj, 4 cells^3 atoms, one frame at the end) in this
process with every kernel launch timed, and prints each kernel's launches and its ns per
atom-step (its total time / atoms / steps) and per launch. Unlike bench/lj_profile.py's
medians of repeated calls, these are the launches of one run, caches as the run leaves them.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time

from lj_melt import SCENE, melt_size

from simrun.cli import main as main_cli
from simrun.lang.runtime.launch import CompiledKernel


def timed_launches() -> dict[str, list[float]]:
    """Wrap CompiledKernel.launch to add up each kernel's launches and seconds."""
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    launch = CompiledKernel.launch

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        result = launch(self, *args, **kwargs)
        entry = totals[self.name]
        entry[0] += 1
        entry[1] += time.perf_counter() - start
        return result

    CompiledKernel.launch = timed
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    atoms = 4 * args.cells ** 3
    sets = [*melt_size(args.cells), f"steps={args.steps}", f"outputs.every={args.steps}"]
    totals = timed_launches()
    with tempfile.TemporaryDirectory() as tmp:
        sys.argv = ["simrun", "run", str(SCENE), "--out", f"{tmp}/r", "--no-render",
                    "--threads", str(args.threads), *[a for s in sets for a in ("--set", s)]]
        try:
            main_cli()
        except SystemExit as stop:
            if stop.code:
                raise
    per = atoms * args.steps
    print(f"{atoms} atoms, {args.steps} steps, {args.threads} thread(s), "
          f"load average {os.getloadavg()}", file=sys.stderr)
    everything = sum(t for _, t in totals.values())
    for name, (count, seconds) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:24s} {count:5d} launches {seconds * 1e9 / per:8.1f} ns/atom-step "
              f"{seconds * 1e9 / atoms / count:8.1f} ns/atom-launch")
    print(f"{'all kernels':24s} {'':14s} {everything * 1e9 / per:8.1f} ns/atom-step")


if __name__ == "__main__":
    main()
