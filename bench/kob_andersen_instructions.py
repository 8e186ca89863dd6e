"""Instructions per NVE step of the Kob-Andersen mixture, one thread, two trees: a count the
load on a shared machine does not move (backs up bench/kob_andersen_ab.py's timings).

    python bench/kob_andersen_instructions.py --a /path/to/main --b . [--cells 10]

A melted start (``scenes/kob_andersen.yaml``'s Langevin run, tree A's code) is written once
as an .npz; each tree then runs ``simrun run`` from it in NVE (velocity Verlet, as
kob_andersen_ab.py) for 200 and 600 steps under ``valgrind --tool=callgrind`` (kernels
cached beforehand, outside valgrind): the difference / 400 is one step, list builds,
Python and all. Also printed: the list's mean entries per particle at the start and the
list builds of the 600-step run. Haswell code in both trees, as bench/launch_instructions.py
(valgrind cannot decode AVX-512).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from kob_andersen_ab import SCENE, lattice, sets
from launch_instructions import HASWELL

ENTRIES = '''import sys
import numpy as np
from simrun.scene import load_scene
from simrun.stepper.system import System
scene = load_scene(sys.argv[1], sys.argv[3:])
start = np.load(sys.argv[2])
system = System(scene, start["x"], 1)
system.forces()
print("entries", system.neighbor_list.neighbors.to_numpy()[:, 0].mean())
'''
STEPS = (200, 600)


def scene_sets(cells: int, npz: Path, steps: int) -> list[str]:
    return [*lattice(cells), "integrator=velocity_verlet", f"steps={steps}",
            f"outputs.every={steps}", "outputs.positions=false", "outputs.velocities=false",
            f"initial={{type: file, path: {npz}}}"]


def run(tree: Path, tmp: Path, args: list[str], valgrind: bool = False) -> str:
    env = {**os.environ, "PYTHONPATH": f"{tmp}:{tree}", "SIMRUN_CACHE_DIR": str(tmp / tree.name),
           "MPLBACKEND": "Agg"}
    cmd = [sys.executable, *args]
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", *cmd]
    done = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def steps_run(tree: Path, tmp: Path, cells: int, npz: Path, steps: int, valgrind: bool
              ) -> tuple[int, int]:
    """(instructions, list builds) of one NVE run of ``steps``."""
    out = tmp / f"{tree.name}-{steps}"
    text = run(tree, tmp, ["-m", "simrun.cli", "run", str(SCENE), "--out", str(out),
                           "--overwrite", "--no-render", "-q", "--threads", "1",
                           *sets(scene_sets(cells, npz, steps))], valgrind)
    found = re.search(r"Collected : (\d+)", text)
    builds = json.loads((out / "run.json").read_text()).get("neighbors", {}).get("builds", -1)
    return (int(found.group(1)) if found else 0), builds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--cells", type=int, default=10)
    ap.add_argument("--equilibrate", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "sitecustomize.py").write_text(HASWELL)
        (tmp / "entries.py").write_text(ENTRIES)
        melt = tmp / "melt"
        run(args.a.resolve(), tmp, ["-m", "simrun.cli", "run", str(SCENE), "--out", str(melt),
                                    "--no-render", "-q", "--threads", "1",
                                    *sets([*lattice(args.cells), f"steps={args.equilibrate}",
                                           f"outputs.every={args.equilibrate}"])])
        frames = np.load(melt / "frames.npz")
        npz = tmp / "start.npz"
        np.savez(npz, x=frames["x"][-1], v=frames["v"][-1])
        per = {}
        for side, tree in (("A", args.a.resolve()), ("B", args.b.resolve())):
            entries = run(tree, tmp, [str(tmp / "entries.py"), str(SCENE), str(npz),
                                      *scene_sets(args.cells, npz, 1)]).split()[-1]
            steps_run(tree, tmp, args.cells, npz, STEPS[0], False)  # compiles, outside valgrind
            (few, _), (many, builds) = (steps_run(tree, tmp, args.cells, npz, s, True)
                                        for s in STEPS)
            per[side] = (many - few) / (STEPS[1] - STEPS[0])
            print(f"{side} {tree}: {per[side] / 1e6:.3f} M instructions per step; "
                  f"{float(entries):.2f} list entries per particle; {builds} builds in "
                  f"{STEPS[1]} steps", flush=True)
        print(f"B / A = {per['B'] / per['A']:.3f}")


if __name__ == "__main__":
    main()
