"""The LJ list's reverse pass, this checkout against another, in alternating processes.

    python bench/pair_ab.py --base /path/to/other/checkout --cells 20 --alternations 5

Each process builds the melt's list (pair_cycles.LJCase) with its checkout's simrun, then
times the reverse kernel alone and the C reference's energy + forces (``-fopenmp-simd``
build) in turns, ``samples`` of each; the C loop is the same in both, so reverse / C
cancels much of a shared machine's drift. Prints one line per process and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(cells: int, precision: str, samples: int) -> None:
    import pair_cycles as pc  # the checkout's simrun comes from PYTHONPATH

    case = pc.LJCase(cells, precision, 20)
    real = "float" if precision == "f32" else "double"
    lib = pc.compile_reference(real, pc.FLAGS["C -O3 simd"], Path(tempfile.mkdtemp()))
    _, c_call, _ = case.c_calls(lib, pc.c_real(case))
    reverse = case.stepper.forces[1]
    rev, ref = [], []
    for _ in range(samples):
        rev.append(pc.per_call_s(lambda: pc.FieldStepper._make(reverse)))
        ref.append(pc.per_call_s(c_call))
    print(json.dumps({"reverse_ms": statistics.median(rev) * 1e3,
                      "c_ms": statistics.median(ref) * 1e3, "load": os.getloadavg()[0]}))


def run(checkout: Path, args, precision: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout),
           "SIMRUN_CACHE_DIR": str(Path(tempfile.gettempdir()) / f"pair-ab-{checkout.name}")}
    out = subprocess.run([sys.executable, __file__, "--child", str(args.cells), precision,
                          str(args.samples)], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path)
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--alternations", type=int, default=5)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--precision", nargs="+", default=["f64", "f32"])
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], int(args.child[2]))
        return
    checkouts = {"base": args.base.resolve(), "this": HERE.parent}
    for precision in args.precision:
        rows: dict[str, list] = {name: [] for name in checkouts}
        for _ in range(args.alternations):
            for name, path in checkouts.items():
                r = run(path, args, precision)
                rows[name].append(r)
                print(f"{precision} {name:>4}: reverse {r['reverse_ms']:7.3f} ms, C "
                      f"{r['c_ms']:7.3f} ms, reverse / C {r['reverse_ms'] / r['c_ms']:.3f}, "
                      f"load {r['load']:.1f}", flush=True)
        for name, rs in rows.items():
            print(f"{precision} {name:>4} medians: reverse "
                  f"{statistics.median(r['reverse_ms'] for r in rs):.3f} ms, reverse / C "
                  f"{statistics.median(r['reverse_ms'] / r['c_ms'] for r in rs):.3f}")


if __name__ == "__main__":
    main()
