"""Wall time of `simrun optimize scenes/fit_lj.yaml` (reweighted Adam, then the
Gauss-Newton polish) against 20 iterations of the plain trajectory gradient on the same
scene and horizon (6000 steps per gradient, reverse mode through every step), one after
the other in one run, with the CPU time and the load average around each.

The trajectory optimisation's objective is <U> over the run (`builtin: potential, at:
mean`): the targets' loss has no trajectory gradient here (the pressure is an ensemble
average), and a gradient costs the same reverse sweep whatever scalar it ends in.

    python bench/fit_cost.py [--keep DIR]      # ~8 minutes on 2 cores

--keep DIR keeps both output folders (DIR/fit/best.yaml: the fitted scene, for
`python scenes/fit_lj_targets.py --check DIR/fit/best.yaml`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENE = ROOT / "scenes" / "fit_lj.yaml"
TRAJECTORY = ["--set", "objective={builtin: potential, at: mean}", "--iterations", "20"]


def timed(args: list[str]) -> dict:
    """Run `simrun optimize` with ``args``; wall and CPU seconds, load before and after."""
    before, load = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "simrun.cli", "optimize", str(SCENE), "-q",
                           "--no-render", *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"wall": wall, "cpu": cpu, "load": (load, os.getloadavg()[0]),
            "stdout": done.stdout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the outputs in this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep.resolve() if args.keep else Path(scratch)
        fit = timed(["--out", str(tmp / "fit")])
        record = json.loads((tmp / "fit" / "fit.json").read_text())
        plain = timed(["--out", str(tmp / "trajectory"), *TRAJECTORY])
    print(fit["stdout"])
    print(f"fit: {record['trajectories']} runs; fitted {record['fitted']['params']} "
          f"+- {record['fitted'].get('errors')}")
    for name, r in (("fit_lj.yaml (reweighting + polish)", fit),
                    ("20 trajectory-gradient iterations", plain)):
        print(f"{name}: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, load average "
              f"{r['load'][0]:.1f} -> {r['load'][1]:.1f}")
    print(f"ratio (trajectory / fit), wall: {plain['wall'] / fit['wall']:.2f}")


if __name__ == "__main__":
    main()
