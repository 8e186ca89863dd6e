"""The LJ melt side by side: two simrun checkouts and LAMMPS, alternating, fresh processes.

    python bench/melt_ab.py --base /path/to/main-checkout --cells 20 --steps 200 \
        --rounds 5 --threads 1 [--lammps-prefix /tmp/venv-with-lammps]

in.lj with LAMMPS's rebuild check (the rule simrun uses), 4 cells^3 atoms; each round runs
LAMMPS (lj/cut, lj/cut/opt, and on several threads lj/cut/omp: MPI ranks = threads), then
``simrun run lj_melt.yaml`` from ``--base`` and from this checkout (PYTHONPATH and a kernel
cache of their own each); medians over rounds, M atom-steps/s, the load average per round.
On a shared machine single rounds swing; the alternation puts the drift on both sides.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from lj_melt import CHECKED, IN_LJ, simrun

HERE = Path(__file__).resolve().parents[1]
SUFFIXES = {"lj/cut": [], "lj/cut/opt": ["-sf", "opt"], "lj/cut/omp": ["-sf", "omp", "-pk", "omp", "1"]}


def lammps(prefix: Path, cells: int, steps: int, ranks: int, suffix: list[str]) -> float:
    """LAMMPS's loop time (s) for in.lj with the rebuild check."""
    env = {**os.environ, "LD_LIBRARY_PATH": f"{prefix / 'lib'}", "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "in.lj"
        script.write_text(IN_LJ.format(n=cells, steps=steps, neigh_modify=CHECKED))
        cmd = [str(prefix / "bin" / "lmp"), "-in", str(script), "-log", "none", *suffix]
        if ranks > 1:
            cmd = [str(prefix / "bin" / "mpirun"), "-np", str(ranks), *cmd]
        out = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True,
                             check=True).stdout
    return float(re.search(r"Loop time of ([0-9.eE+-]+)", out).group(1))


def simrun_in(tree: Path, cells: int, steps: int, threads: int) -> float:
    os.environ["PYTHONPATH"] = str(tree)
    os.environ["SIMRUN_CACHE_DIR"] = f"{tempfile.gettempdir()}/simrun-cache-melt-ab-{tree.name}"
    return simrun(cells, steps, threads)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lammps-prefix", type=Path, default=None)
    args = parser.parse_args()
    c, s, t = args.cells, args.steps, args.threads
    runs = {}
    if args.lammps_prefix is not None:
        for style, suffix in SUFFIXES.items():
            if style != "lj/cut/omp" or t > 1:
                runs[f"LAMMPS {style}"] = lambda sf=suffix: lammps(args.lammps_prefix, c, s, t, sf)
    runs["simrun base"] = lambda: simrun_in(args.base.resolve(), c, s, t)
    runs["simrun this checkout"] = lambda: simrun_in(HERE, c, s, t)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for k in range(args.rounds):
        for name, fn in runs.items():
            times[name].append(fn())
        print(k, {n: round(v[-1], 3) for n, v in times.items()},
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    atoms = 4 * c ** 3
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:24s} {median:8.3f} s  {atoms * s / median / 1e6:6.2f} M atom-steps/s")


if __name__ == "__main__":
    main()
