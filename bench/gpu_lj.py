"""LJ melt on the GPU: simrun (--device cuda) against JAX MD on the same GPU, atom-steps/s.

bench/lj_melt.py's melt (fcc at density 0.8442, T = 1.44, LJ cut at 2.5, skin 0.3, f64
velocity Verlet) at 32,000 atoms x 100 steps and 1,000,188 atoms x 20 steps, medians of
``repeats`` fresh processes, stepping time only (simrun: run.json wall_s - setup_s; JAX MD:
its second, compiled run). JAX MD runs where `jax_md` imports (its wheel may travel beside
the checkout); a peer that fails is recorded with its error, not fatal.

Each size is timed in simrun's default mode, reproducible (`simrun_cuda_reproducible`: the
racing sums in 64-bit fixed point on the whole grid, lang/cuda_fixed_point.py), and with
`--no-reproducible` (`simrun_cuda`: float atomics); at 32,000 atoms the reproducible run is
made twice more and the bits of its outputs compared (`same_bits`). `--table` prints the
rows against issue 48's targets (reproducible >= 1x JAX MD, --no-reproducible >= 3x).

    python bench/gpu_lj.py --out RESULTS.json [--repeats 3] [--skip-jax] [--sizes 20 63]
    python bench/gpu_lj.py --table RESULTS.json   # the table of a results file
    python bench/gpu_lj.py --dry-run              # what would run, nothing started
    python bench/gpu_lj.py --profile 63   # where a step's time goes (SIMRUN_CUDA_PROFILE)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from lj_melt import SCENE, jax_md, melt_size, simrun  # noqa: E402 (a sibling script)

STEPS = {20: 100, 63: 20}  # cells -> steps: 32,000 and 1,000,188 atoms
BITS_CELLS = 20  # the size whose reproducible runs are compared bit for bit
TARGETS = {"simrun_cuda_reproducible": 1.0, "simrun_cuda": 3.0}  # x JAX MD (issue 48)


def simrun_cuda(cells: int, steps: int, reproducible: bool = False) -> float:
    return simrun(cells, steps, 1, "cuda", reproducible=reproducible)[0]


def measure(repeats: int, fn, *args) -> dict:
    try:
        return {"seconds": statistics.median(fn(*args) for _ in range(repeats))}
    except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return {"error": f"{type(exc).__name__}: {detail.strip()[-400:]}"}


def outputs_digest(cells: int, steps: int) -> str:
    """sha256 of a reproducible GPU run's frames (every saved array, in name order)."""
    sets = [*melt_size(cells), f"steps={steps}", f"outputs.every={steps}"]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "simrun.cli", "run", str(SCENE), "--out",
                        f"{tmp}/r", "--no-render", "--device", "cuda",
                        *[a for s in sets for a in ("--set", s)]],
                       capture_output=True, text=True, check=True, cwd=tmp,
                       env={**os.environ, "MPLBACKEND": "Agg"})
        import numpy as np

        with np.load(f"{tmp}/r/frames.npz") as frames:
            h = hashlib.sha256()
            for name in sorted(frames.files):
                h.update(name.encode())
                h.update(np.ascontiguousarray(frames[name]).tobytes())
    return h.hexdigest()


def plan(sizes: list, jax_ok: bool) -> list:
    """(atoms, steps, peer, what) of every measurement, in order."""
    rows = []
    for cells in sizes:
        steps, atoms = STEPS.get(cells, 20), 4 * cells ** 3
        rows += [(atoms, steps, "simrun_cuda_reproducible", "simrun run --device cuda"),
                 (atoms, steps, "simrun_cuda", "simrun run --device cuda --no-reproducible")]
        if jax_ok:
            rows.append((atoms, steps, "jax_md_cuda", "JAX MD, compiled run"))
        if cells == BITS_CELLS:
            rows.append((atoms, steps, "same_bits", "two reproducible runs' frames compared"))
    return rows


def table(results: dict) -> str:
    """The results against issue 48's targets, one line per size (M atom-steps/s)."""
    def rate(row, peer):
        r = row.get(peer, {})
        return r["atom_steps_per_s"] / 1e6 if "atom_steps_per_s" in r else None

    def cell(value, fmt="{:.1f}"):
        return "-" if value is None else fmt.format(value)

    lines = ["| atoms | reproducible | --no-reproducible | JAX MD | repro / JAX (>= 1) "
             "| no-repro / JAX (>= 3) | same bits |", "|" + " --- |" * 7]
    for row in results["rows"]:
        repro, fast, jax = (rate(row, p) for p in (*TARGETS, "jax_md_cuda"))
        ratios = [a / jax if a is not None and jax else None for a in (repro, fast)]
        verdicts = [cell(x, "{:.2f}") + ("" if x is None else " ok" if x >= t else " MISSED")
                    for x, t in zip(ratios, TARGETS.values())]
        bits = row.get("same_bits")
        lines.append(f"| {row['atoms']:,} | {cell(repro)} | {cell(fast)} | {cell(jax)} | "
                     f"{verdicts[0]} | {verdicts[1]} | "
                     f"{'-' if bits is None else 'yes' if bits is True else bits} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--profile", type=int, metavar="CELLS",
                        help="print the launch profile of one run at 4 CELLS^3 atoms")
    parser.add_argument("--table", type=Path, metavar="RESULTS",
                        help="print the table of a results file and exit")
    parser.add_argument("--dry-run", action="store_true", help="list the measurements only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-jax", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(STEPS))
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    jax_ok = not args.skip_jax and importlib.util.find_spec("jax_md") is not None
    if args.dry_run:
        for atoms, steps, peer, what in plan(args.sizes, jax_ok):
            print(f"{atoms:>9,} atoms x {steps:>3} steps  {peer:<26} {what}")
        return
    if args.profile:
        profile(args.profile)
        return
    if args.out is None:
        parser.error("--out is required (or --profile, --table, --dry-run)")
    rows: dict = {}
    for atoms, steps, peer, _ in plan(args.sizes, jax_ok):
        cells = round((atoms / 4) ** (1 / 3))
        row = rows.setdefault(atoms, {"atoms": atoms, "steps": steps,
                                      "load": os.getloadavg()[0]})
        if peer == "same_bits":
            try:
                digests = {outputs_digest(cells, steps) for _ in range(2)}
                row[peer] = True if len(digests) == 1 else f"DIFFERENT ({len(digests)} digests)"
            except (subprocess.SubprocessError, OSError) as exc:
                row[peer] = f"error: {type(exc).__name__}"
        elif peer == "jax_md_cuda":
            row[peer] = measure(args.repeats, jax_md, cells, steps, 1, "cuda")
        else:
            row[peer] = measure(args.repeats, simrun_cuda, cells, steps,
                                peer == "simrun_cuda_reproducible")
        result = row[peer]
        if isinstance(result, dict) and "seconds" in result:
            result["atom_steps_per_s"] = atoms * steps / result["seconds"]
        print(json.dumps({peer: row[peer], "atoms": atoms}), flush=True)
        results = {"jax_md": jax_ok, "rows": list(rows.values())}
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))


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
