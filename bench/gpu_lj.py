"""LJ melt on the GPU: simrun (--device cuda) against JAX MD on the same GPU, atom-steps/s.

bench/lj_melt.py's melt (fcc at density 0.8442, T = 1.44, LJ cut at 2.5, skin 0.3, f64
velocity Verlet) at 32,000 atoms x 100 steps and 1,000,188 atoms x 20 steps, medians of
``repeats`` fresh processes, stepping time only (simrun: run.json wall_s - setup_s; JAX MD:
its second, compiled run). JAX MD runs where `jax_md` imports (its wheel may travel beside
the checkout); a peer that fails is recorded with its error, not fatal.

simrun's jobs ask for reproducible bits (ti.init(deterministic=True)), which on a GPU runs
the loops whose float atomics race (the forces' scatter, the energy's sum) on one GPU thread
(codegen/cuda/order.py). The rows time simrun as JAX MD runs, with atomics on every thread
(its `simrun_cuda`, `--no-reproducible`), and the reproducible mode (`simrun_cuda_reproducible`)
at 32,000 atoms over a few steps, for what it costs. Results are written after each row.

    python bench/gpu_lj.py --out RESULTS.json [--repeats 3] [--skip-jax] [--sizes 20 63]
    python bench/gpu_lj.py --profile 63   # where a step's time goes (SIMRUN_CUDA_PROFILE)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from lj_melt import jax_md, simrun  # noqa: E402 (a sibling script, not a package)

STEPS = {20: 100, 63: 20}  # cells -> steps: 32,000 and 1,000,188 atoms
REPRODUCIBLE_STEPS = 5  # the one-thread loops at 32,000 atoms: seconds a step
def simrun_cuda(cells: int, steps: int, reproducible: bool = False) -> float:
    return simrun(cells, steps, 1, "cuda", reproducible=reproducible)[0]


def measure(repeats: int, fn, *args) -> dict:
    try:
        return {"seconds": statistics.median(fn(*args) for _ in range(repeats))}
    except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return {"error": f"{type(exc).__name__}: {detail.strip()[-400:]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--profile", type=int, metavar="CELLS",
                        help="print the launch profile of one run at 4 CELLS^3 atoms")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-jax", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(STEPS))
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return
    if args.out is None:
        parser.error("--out is required (or --profile)")
    jax_ok = not args.skip_jax and importlib.util.find_spec("jax_md") is not None
    rows = []
    sizes = [(cells, STEPS.get(cells, 20), False) for cells in args.sizes]
    for cells, steps, reproducible in sizes + [(20, REPRODUCIBLE_STEPS, True)]:
        atoms = 4 * cells ** 3
        peer = "simrun_cuda_reproducible" if reproducible else "simrun_cuda"
        row = {"atoms": atoms, "steps": steps, "load": os.getloadavg()[0],
               peer: measure(1 if reproducible else args.repeats, simrun_cuda, cells, steps,
                             reproducible)}
        if jax_ok and not reproducible:
            row["jax_md_cuda"] = measure(args.repeats, jax_md, cells, steps, 1, "cuda")
        for name in (peer, "jax_md_cuda"):
            if "seconds" in row.get(name, {}):
                row[name]["atom_steps_per_s"] = atoms * steps / row[name]["seconds"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        args.out.write_text(json.dumps({"jax_md": jax_ok, "rows": rows}, indent=2) + "\n")


def profile(cells: int) -> None:
    """Every launch and copy of one run, synchronised and timed (runtime/cuda.py's Profile)."""
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "profile.txt"
        os.environ["SIMRUN_CUDA_PROFILE"] = str(table)
        steps = STEPS.get(cells, 20)
        seconds = simrun_cuda(cells, steps)
        print(f"{4 * cells ** 3} atoms, {steps} steps: {seconds:.3f} s stepping (profiled: "
              "every launch waits for the device)")
        print(table.read_text().rstrip())


if __name__ == "__main__":
    main()
