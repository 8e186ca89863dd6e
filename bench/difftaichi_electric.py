"""scenes/electric.yaml beside DiffTaichi's electric.py under Taichi 1.7.4, from the same
start (scenes/electric_start.npz: the weights and the goal's path the original draws with
`random` seeded with 0), with the original's update (plain descent, learning rate 2e-2).
Prints both loss curves and the median time per iteration (iterations 2..N).

    python bench/difftaichi_electric.py [--iterations 5]

The original is read at run time (DIFFTAICHI_EXAMPLES, else /work/difftaichi/examples, else
the mirror), never copied here, and runs in Taichi 1.7.4's Python (TAICHI_PYTHON, default
/work/peers/bin/python) on the CPU, headless, with two changes: its network reads the state
its step starts from (x[t - 1], v[t - 1]; the original reads x[t], v[t] before advance(t)
writes them, i.e. the previous forward pass's values), and every iteration trains on the
scene's goal path (the original draws a new one per iteration).

On a shared machine wall time measures the load more than the program, so each side also
runs a single iteration, and the difference of the two runs' CPU time (user + system, all
threads), divided by the extra iterations, is its CPU time per steady iteration.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import numpy as np

REPO = Path(__file__).resolve().parents[1]
START = REPO / "scenes" / "electric_start.npz"
LEARNING_RATE = 2e-2
PLACES = (Path(os.environ.get("DIFFTAICHI_EXAMPLES", "/work/difftaichi/examples")),)
MIRROR = Path("/work/.mirror/taichi-dev+difftaichi/repo")


def original_source(name: str) -> str:
    """The original example's text, from a checkout or the mirror's git history."""
    for folder in PLACES:
        if (folder / name).exists():
            return (folder / name).read_text()
    return subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:examples/{name}"],
                          check=True, capture_output=True, text=True).stdout


def patched_source() -> str:
    """electric.py with its network reading the state the step starts from."""
    text = original_source("electric.py")
    start, end = text.index("def nn1"), text.index("def nn2")
    body = text[start:end]
    fixed = re.sub(r"\b([xv])\[t\]\[", r"\1[t - 1][", body)
    if fixed.count("[t - 1][") != 4:
        raise RuntimeError("electric.py's nn1 is not the one this benchmark knows")
    return text[:start] + fixed + text[end:]


def run_original(iterations: int) -> dict:
    """Inside Taichi 1.7.4's Python: the original's kernels, our start, its update rule."""
    import taichi as ti

    class NoGUI:  # the program opens a window at import
        def __init__(self, *args, **kwargs) -> None:
            pass

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    ti.GUI = NoGUI
    init = ti.init
    ti.init = lambda **kw: init(**{**kw, "arch": ti.cpu})
    work = Path(tempfile.mkdtemp(prefix="difftaichi_electric_"))
    (work / "electric_original.py").write_text(patched_source())
    sys.path.insert(0, str(work))
    import electric_original as el

    el.allocate_fields()
    start = np.load(START)
    for name in ("weight1", "bias1", "weight2", "bias2"):
        getattr(el, name).from_numpy(start[name].astype(np.float32))
    for k in range(el.steps):
        el.goal[k] = start["goal"][k].tolist()
        el.goal_v[k] = start["goal_v"][k].tolist()
    el.x[0] = start["x"][0].tolist()
    losses, seconds = [], []
    for _ in range(iterations):
        t0 = time.perf_counter()
        with ti.ad.Tape(el.loss):
            el.forward()
        for p in (el.weight1, el.bias1, el.weight2, el.bias2):
            p.from_numpy(p.to_numpy() - LEARNING_RATE * p.grad.to_numpy())
        ti.sync()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(el.loss[None]))
    return {"losses": losses, "seconds": seconds}


def run_scene(iterations: int, out: Path) -> dict:
    """`simrun optimize scenes/electric.yaml`: iterations - 1 updates give `iterations`
    losses; the time per iteration is the gap between loss.csv's wall times."""
    subprocess.run([sys.executable, "-m", "simrun.cli", "optimize",
                    str(REPO / "scenes" / "electric.yaml"), "--iterations",
                    str(iterations - 1), "--out", str(out), "--no-render", "-q"], check=True,
                   capture_output=True, cwd=REPO)
    rows = np.loadtxt(out / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    return {"losses": rows[:, 1].tolist(), "seconds": np.diff(rows[:, 4]).tolist()}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def taichi_side(iterations: int) -> tuple[dict, float]:
    python = os.environ.get("TAICHI_PYTHON", "/work/peers/bin/python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # Taichi, not the shim
    before = children_cpu()
    done = subprocess.run([python, __file__, "--original", str(iterations)], check=True,
                          capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1]), children_cpu() - before


def simrun_side(iterations: int) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory(prefix="electric_opt_") as work:
        before = children_cpu()
        result = run_scene(iterations, Path(work) / "opt")
        return result, children_cpu() - before


def compare(iterations: int = 5) -> dict:
    """Both loss curves, the median wall seconds and the CPU seconds per iteration; prints
    a table."""
    original, taichi_cpu = taichi_side(iterations)
    scene, simrun_cpu = simrun_side(iterations)
    cpu = {"taichi": (taichi_cpu - taichi_side(1)[1]) / max(iterations - 1, 1),
           "simrun": (simrun_cpu - simrun_side(2)[1]) / max(iterations - 2, 1)}
    print(f"{'iteration':>9} {'Taichi 1.7.4':>14} {'simrun':>14} {'rel. diff':>10}")
    for i, (a, b) in enumerate(zip(original["losses"], scene["losses"])):
        print(f"{i:>9} {a:>14.7g} {b:>14.7g} {abs(b - a) / max(abs(a), 1e-30):>10.2e}")
    per_iter = {"taichi": median(original["seconds"][1:] or original["seconds"]),
                "simrun": median(scene["seconds"] or [float("nan")])}
    print(f"s/iteration: Taichi 1.7.4 {per_iter['taichi']:.4f}, simrun "
          f"{per_iter['simrun']:.4f} (wall); CPU s/iteration: Taichi 1.7.4 "
          f"{cpu['taichi']:.4f}, simrun {cpu['simrun']:.4f}")
    return {"taichi": original, "simrun": scene, "seconds_per_iteration": per_iter,
            "cpu_seconds_per_iteration": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--original", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.original is not None:
        print(json.dumps(run_original(args.original)))
    else:
        compare(args.iterations)


if __name__ == "__main__":
    main()
