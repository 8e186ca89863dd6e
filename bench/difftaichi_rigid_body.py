"""DiffTaichi's rigid_body.py under Taichi 1.7.4 beside `simrun optimize scenes/rigid_body.yaml`
(robot 1; `robot=2`: rigid_body_legs.yaml), from the same initial weights: both loss curves
and the median time per iteration.

The original is read at run time from the DiffTaichi mirror (or DIFFTAICHI_EXAMPLES, a folder
holding rigid_body.py and robot_config.py), never copied here, and runs unmodified in its own
process under Taichi (TAICHI_PYTHON, default /work/peers/bin/python) with Python's and NumPy's
generators seeded with 0, which is where the scene's weights come from
(bench/robots/rigid_body_geometry.py). Its own update is the scene's `optimize:` (plain
descent, learning rate 1, gradient scaled down to norm 0.2). Its losses are recorded as each
`ti.ad.Tape` exits; its time per iteration is the median gap between them.

    python bench/difftaichi_rigid_body.py [iterations] [robot] [ulp_runs]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SCENES = {1: "rigid_body", 2: "rigid_body_legs"}
TAICHI_PYTHON = os.environ.get("TAICHI_PYTHON", "/work/peers/bin/python")

DRIVER = r'''
import json, os, random, sys, time
import numpy as np
random.seed(0)
np.random.seed(0)
import taichi as ti


class NoGUI:  # the program opens a window at import and draws while it trains
    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        return lambda *a, **k: None


ti.GUI = NoGUI
WANT, LOG = int(sys.argv[1]), sys.argv[2]
NUDGE = float(sys.argv[4])  # every drawn weight times (1 + NUDGE): rounding-sized changes
draw = np.random.randn
np.random.randn = lambda *shape: draw(*shape) * (1.0 + NUDGE)
events = []
exit_tape = ti.ad.Tape.__exit__


def __exit__(self, *exc):
    out = exit_tape(self, *exc)
    events.append((time.perf_counter(), float(self.loss[None])))
    with open(LOG, "w") as f:
        json.dump(events, f)
    if len(events) >= WANT:
        os._exit(0)
    return out


ti.ad.Tape.__exit__ = __exit__
sys.argv = ["rigid_body.py", sys.argv[3], "train"]
sys.path.insert(0, os.getcwd())
exec(compile(open("rigid_body.py").read(), "rigid_body.py", "exec"), {"__name__": "__main__"})
'''


def _original_files(into: Path) -> None:
    source = os.environ.get("DIFFTAICHI_EXAMPLES")
    sys.path.insert(0, str(REPO / "bench" / "robots"))
    from difftaichi_mass_spring import fetch

    fetch(Path(source) if source else None, into, ("examples/rigid_body.py",
                                                   "examples/robot_config.py"))


def taichi_side(iterations: int, robot: int, work: Path, nudge: float = 0.0) -> dict:
    """The original's first `iterations` losses and its median seconds per iteration; with
    `nudge`, from its weights times (1 + nudge) (1.2e-7: about one f32 ulp)."""
    _original_files(work)
    log = work / "taichi.json"
    env = {**os.environ, "TI_LOG_LEVEL": "error", "TI_ARCH": "x64", "PYTHONPATH": ""}
    subprocess.run([TAICHI_PYTHON, "-c", DRIVER, str(iterations), str(log), str(robot),
                    repr(nudge)], cwd=work, env=env, check=True, capture_output=True, text=True)
    events = json.loads(log.read_text())
    gaps = [b[0] - a[0] for a, b in zip(events, events[1:])]
    return {"losses": [e[1] for e in events], "seconds": median(gaps) if gaps else None}


def simrun_side(iterations: int, robot: int, work: Path, nudge: float = 0.0) -> dict:
    """`simrun optimize` on the scene: its loss curve and median seconds per iteration; with
    `nudge`, from its weights times (1 + nudge), as the original's are nudged."""
    out = work / f"simrun{nudge!r}"
    scene = REPO / "scenes" / f"{SCENES[robot]}.yaml"
    nudged = []
    if nudge:
        start = np.load(scene.parent / f"{SCENES[robot]}_weights.npz")
        moved = work / f"weights{nudge!r}.npz"  # the biases start at zero, as drawn
        np.savez(moved, **{k: v * (1.0 + nudge) if k.startswith("weights") else v
                           for k, v in start.items()})
        nudged = [a for k in ("weights1", "weights2") for a in ("--set", f"fields.{k}={moved}")]
    subprocess.run([sys.executable, "-m", "simrun.cli", "optimize", str(scene), "--iterations",
                    str(iterations), "--out", str(out), "--no-render", *nudged], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    rows = np.loadtxt(out / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    walls = np.diff(rows[:, 4])
    return {"losses": rows[:, 1].tolist(), "seconds": float(np.median(walls[1:] if
                                                                      len(walls) > 1 else walls))}


def compare(iterations: int = 20, robot: int = 1, ulp_runs: int = 0) -> dict:
    """Run both sides and print their loss curves and times per iteration; `ulp_runs` more
    runs of each from weights moved by k x 1.2e-7 (k = 1..ulp_runs, about k f32 ulps) show
    how far rounding alone moves each engine's curve, and the last losses' medians compare
    the two engines over those draws."""
    with tempfile.TemporaryDirectory(prefix="difftaichi_rigid_body_") as tmp:
        work = Path(tmp)
        taichi = taichi_side(iterations, robot, work)
        ours = simrun_side(iterations, robot, work)
        nudged = [taichi_side(iterations, robot, work, k * 1.2e-7)["losses"]
                  for k in range(1, ulp_runs + 1)]
        ours_nudged = [simrun_side(iterations, robot, work, k * 1.2e-7)["losses"]
                       for k in range(1, ulp_runs + 1)]
    print(f"rigid_body (robot {robot}): {iterations} iterations")
    print(f"{'iter':>4} {'Taichi 1.7.4':>14} {'simrun':>14} {'rel. diff':>10}")
    for i, (a, b) in enumerate(zip(taichi["losses"], ours["losses"])):
        print(f"{i:>4} {a:>14.8g} {b:>14.8g} {abs(a - b) / max(abs(a), 1e-30):>10.2e}")
    print(f"s/iteration: Taichi 1.7.4 {taichi['seconds']:.3f}, simrun {ours['seconds']:.3f} "
          f"({taichi['seconds'] / ours['seconds']:.2f}x)")
    for k, (theirs, mine) in enumerate(zip(nudged, ours_nudged), 1):
        print(f"weights x (1 + {k} x 1.2e-7): Taichi 1.7.4 " +
              " ".join(f"{v:.4g}" for v in theirs) + "\n" + " " * 28 + "simrun       " +
              " ".join(f"{v:.4g}" for v in mine))
    if nudged:
        last_taichi = [taichi["losses"][-1]] + [c[-1] for c in nudged]
        last_simrun = [ours["losses"][-1]] + [c[-1] for c in ours_nudged]
        for name, last in (("Taichi 1.7.4", last_taichi), ("simrun", last_simrun)):
            print(f"loss {iterations} over k = 0..{ulp_runs}, {name}: median "
                  f"{median(last):.4f}, range {min(last):.4f}-{max(last):.4f}")
        print(f"simrun / Taichi, medians: {median(last_simrun) / median(last_taichi):.4f}")
    return {"taichi": taichi, "simrun": ours, "taichi_nudged": nudged,
            "simrun_nudged": ours_nudged}


if __name__ == "__main__":
    compare(*(int(a) for a in sys.argv[1:4]))
