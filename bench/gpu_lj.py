"""LJ melt on the GPU: simrun (--device cuda) against JAX MD on the same GPU, atom-steps/s.

bench/lj_melt.py's melt (fcc at density 0.8442, T = 1.44, LJ cut at 2.5, skin 0.3, f64
velocity Verlet) at 32,000 atoms x 100 steps and 1,000,188 atoms x 20 steps, medians of
``repeats`` fresh processes, stepping time only (simrun: run.json wall_s - setup_s; JAX MD:
its second, compiled run). JAX MD runs where `jax_md` imports (its wheel may travel beside
the checkout); a peer that fails is recorded with its error, not fatal.

    python bench/gpu_lj.py --out RESULTS.json [--repeats 3] [--skip-jax] [--sizes 20 63]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from lj_melt import jax_md, simrun  # noqa: E402 (a sibling script, not a package)

STEPS = {20: 100, 63: 20}  # cells -> steps: 32,000 and 1,000,188 atoms


def simrun_cuda(cells: int, steps: int) -> float:
    return simrun(cells, steps, 1, "cuda")[0]


def measure(repeats: int, fn, *args) -> dict:
    try:
        return {"seconds": statistics.median(fn(*args) for _ in range(repeats))}
    except (subprocess.CalledProcessError, RuntimeError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return {"error": f"{type(exc).__name__}: {detail.strip()[-400:]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-jax", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(STEPS))
    args = parser.parse_args()
    jax_ok = not args.skip_jax and importlib.util.find_spec("jax_md") is not None
    rows = []
    for cells in args.sizes:
        steps = STEPS.get(cells, 20)
        atoms = 4 * cells ** 3
        row = {"atoms": atoms, "steps": steps, "load": os.getloadavg()[0],
               "simrun_cuda": measure(args.repeats, simrun_cuda, cells, steps)}
        if jax_ok:
            row["jax_md_cuda"] = measure(args.repeats, jax_md, cells, steps, 1, "cuda")
        for peer in ("simrun_cuda", "jax_md_cuda"):
            if "seconds" in row.get(peer, {}):
                row[peer]["atom_steps_per_s"] = atoms * steps / row[peer]["seconds"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({"jax_md": jax_ok, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
