"""Process start of the reference gravity program with a warm cache, end to end.

    python bench/start_time.py [--runs 9] [--frames 1]

Runs `python bench/ad_gravity.py` (the reference document's gravity example; the GUI runs
headless and stops after --frames frames) once to fill a fresh kernel cache, then --runs
more times and reports the median wall time of the whole process. The rows above it split
that time: the interpreter alone, `import numpy`, `import simrun.lang`, and the GUI module.

"Warm" means both caches a second process normally finds: simrun's kernel cache
(SIMRUN_CACHE_DIR) and Python's bytecode cache. This sandbox sets PYTHONDONTWRITEBYTECODE=1,
which makes every start recompile simrun's Python source; the script points
PYTHONPYCACHEPREFIX at a temporary directory and clears PYTHONDONTWRITEBYTECODE so that
.pyc files are written there (never into the repository), and also reports the process
with the environment's setting (no bytecode cache) for comparison.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from timing import ForeignLoad, wait_for_quiet

HERE = os.path.dirname(os.path.abspath(__file__))
# simrun.lang loads its names (the compiler) on first use: the row times that load too
LANG = "import simrun.lang as ti; ti.kernel"
sys.path.insert(0, HERE)
ROOT = os.path.dirname(HERE)
GRAVITY = os.path.join(HERE, "ad_gravity.py")


def timed(cmd: list, env: dict, cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return elapsed


def median_of(cmd: list, env: dict, cwd: str, runs: int) -> tuple[float, float, float, float]:
    timed(cmd, env, cwd)  # warm-up: fills the kernel and bytecode caches, page cache
    with ForeignLoad() as load:
        samples = [timed(cmd, env, cwd) for _ in range(runs)]
    return statistics.median(samples), min(samples), max(samples), load.cores


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--frames", type=int, default=1, help="GUI frames (50 substeps each)")
    ap.add_argument("--wait-quiet", type=float, default=120.0,
                    help="before each row, wait up to this many seconds for other processes "
                         "to use < 0.1 cores")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="simrun-start-")
    env = dict(os.environ)
    env.update(SIMRUN_GUI_HEADLESS="1", SIMRUN_GUI_MAX_FRAMES=str(args.frames),
               SIMRUN_GUI_DIR=os.path.join(tmp, "frames"), MPLBACKEND="Agg",
               SIMRUN_CACHE_DIR=os.path.join(tmp, "kernel-cache"),
               PYTHONPYCACHEPREFIX=os.path.join(tmp, "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    no_pyc = dict(env, PYTHONDONTWRITEBYTECODE="1")
    no_pyc.pop("PYTHONPYCACHEPREFIX")
    py = sys.executable
    # the same program without its four GUI lines: the floor any renderer could start in
    # (the simulation, the cached kernels and x.to_numpy() per frame)
    with open(GRAVITY) as f:
        source = f.read()
    head = source[:source.index("gui = ti.GUI(")]
    sim_only = os.path.join(tmp, "ad_gravity_no_gui.py")
    with open(sim_only, "w") as f:
        f.write(head + f"for frame in range({args.frames}):\n    for i in range(50):\n"
                "        substep()\n    x.to_numpy()\n")
    rows = [
        ("python -c pass", [py, "-c", "pass"], env),
        ("python -c 'import numpy'", [py, "-c", "import numpy"], env),
        ("python -c 'import simrun.lang'", [py, "-c", LANG], env),
        ("... + import simrun.lang.gui and its headless canvas (PIL)",
         [py, "-c", LANG + "; import simrun.lang.gui, simrun.lang.gui.pil"], env),
        (f"python bench/ad_gravity.py ({args.frames} frame)", [py, GRAVITY], env),
        ("same, no bytecode cache (PYTHONDONTWRITEBYTECODE=1)", [py, GRAVITY], no_pyc),
        ("same program without the GUI lines", [py, sim_only], env),
    ]
    timed([py, "-c", LANG + "; import simrun.lang.gui, simrun.lang.gui.pil"], env,
          tmp)  # bytecode cache
    cold = timed([py, GRAVITY], dict(env, SIMRUN_CACHE_DIR=os.path.join(tmp, "cold")), tmp)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} cores; median of {args.runs} warm runs each; load avg {load:.1f} "
          "before\n")
    print("| process | median | min | max | other processes' CPU |\n|---|---:|---:|---:|---:|")
    for label, cmd, e in rows:
        wait_for_quiet(args.wait_quiet)
        med, lo, hi, foreign = median_of(cmd, e, tmp, args.runs)
        print(f"| {label} | {med * 1e3:.0f} ms | {lo * 1e3:.0f} ms | {hi * 1e3:.0f} ms | "
              f"{foreign:.2f} cores |", flush=True)
    print(f"\ncold kernel cache (bytecode cache warm), one run: {cold * 1e3:.0f} ms; "
          f"load avg {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
