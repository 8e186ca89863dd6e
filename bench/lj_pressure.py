"""Pressure and energy against LAMMPS at the same melted state (not only the fcc start).

LAMMPS runs in.lj (lj/cut 2.5, no tail correction) for ``--steps`` steps and dumps positions
and velocities; simrun loads that state into ``scenes/lj_melt.yaml`` and computes U and the
pressure by autodiff of U with respect to a box scale. Both print 15 digits.

    python bench/lj_pressure.py --cells 10 --steps 100
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from simrun.scene import initial_state, load_scene
from simrun.stepper.pressure import pressure
from simrun.stepper.system import System

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lj_melt import CELL, IN_LJ, PUBLISHED  # noqa: E402


def lammps_state(cells: int, steps: int, tmp: Path) -> tuple[dict[str, float], np.ndarray]:
    script = IN_LJ.format(n=cells, steps=steps, neigh_modify=PUBLISHED).replace(
        f"thermo {steps}\n", f"thermo {steps}\nthermo_modify format float %.15g\n"
        f"dump 1 all custom {steps} dump.txt id x y z vx vy vz\ndump_modify 1 sort id format float %.17g\n")
    (tmp / "in.lj").write_text(script)
    lib = Path(sys.prefix) / "lib"
    env = {**os.environ, "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    out = subprocess.run([str(Path(sys.prefix) / "bin" / "lmp"), "-in", "in.lj", "-log",
                          "none"], cwd=tmp, env=env, capture_output=True, text=True,
                         check=True).stdout
    header = re.search(r"\n\s*Step\s+Temp.*\n", out)
    names = header.group(0).split()
    rows = out[header.end():].splitlines()
    last = [r.split() for r in rows if r.split() and r.split()[0] == str(steps)][0]
    thermo = dict(zip(names, map(float, last)))
    text = (tmp / "dump.txt").read_text().split("ITEM: ATOMS")[-1].splitlines()[1:]
    atoms = np.array([[float(v) for v in line.split()] for line in text if line.strip()])
    return thermo, atoms[:, 1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    c = args.cells
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        thermo, state = lammps_state(c, args.steps, tmp)
        np.savez(tmp / "state.npz", x=state[:, :3], v=state[:, 3:])
        side = c * CELL
        scene = load_scene(REPO / "scenes" / "lj_melt.yaml", [
            f"particles.count={4 * c ** 3}", f"boundary.high=[{side!r}, {side!r}, {side!r}]",
            f"initial={{type: file, path: {tmp / 'state.npz'}}}"])
        x, v = initial_state(scene)
        system = System(scene, x)
        system.set_state(x, v)
        u, _ = system.forces()
        p = pressure(system, v)
    n = 4 * c ** 3
    print(f"{n} atoms after {args.steps} LAMMPS steps")
    print(f"  E_pair / N: LAMMPS {thermo['E_pair']:.12f}  simrun {u / n:.12f}  "
          f"difference {u / n - thermo['E_pair']:.2e}")
    print(f"  pressure:   LAMMPS {thermo['Press']:.12f}  simrun {p:.12f}  "
          f"difference {p - thermo['Press']:.2e}")


if __name__ == "__main__":
    main()
