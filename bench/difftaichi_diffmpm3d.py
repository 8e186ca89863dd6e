"""scenes/diffmpm3d.yaml beside DiffTaichi's diffmpm3d.py under Taichi 1.7.4, from the same
start (scenes/diffmpm3d_robot.npz: the original's particles and NumPy's seeded draw of its
weights, which the original draws with ti.randn), with the original's update (plain descent,
learning rate 30). Prints both loss curves and the median time per iteration (iterations
2..N; Taichi 1.7.4 compiles p2g's gradient for 9 to 15 minutes before its first loss).

    python bench/difftaichi_diffmpm3d.py [--iterations 3] [--record]

``--record`` writes both curves and times into bench/readme_figures.json (key
``taichi_diffmpm3d``, ``taichi_liquid``), whose figures tests/test_readme_figures.py holds
README.md to; ``--from TAICHI_JSON FOLDER`` compares (and records) runs made apart: the JSON
line ``--original NAME N`` printed and a `simrun optimize` folder.

The original is read at run time (bench/difftaichi_electric.py's `original_source`), never
copied here, and runs unmodified in Taichi 1.7.4's Python (TAICHI_PYTHON, default
/work/peers/bin/python) on the CPU: its own forward(), backward() (which recomputes each
step's grid) and update, driven from here with the start set through its fields.
liquid.py is driven the same way (bench/difftaichi_liquid.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from difftaichi_electric import original_source  # noqa: E402

# scene -> (the original's file, its learning rate)
ORIGINALS = {"diffmpm3d": ("diffmpm3d.py", 30.0), "liquid": ("liquid.py", 10.0)}


def run_original(name: str, iterations: int) -> dict:
    """Inside Taichi 1.7.4's Python: the original's kernels and passes, our start."""
    import taichi as ti

    init = ti.init
    ti.init = lambda **kw: init(**{**kw, "arch": ti.cpu})  # it asks for a GPU
    ti.clear_all_gradients = ti.ad.clear_all_gradients  # liquid's pre-1.0 name
    source, rate = ORIGINALS[name]
    work = Path(tempfile.mkdtemp(prefix=f"difftaichi_{name}_"))
    (work / f"{name}_original.py").write_text(original_source(source))
    sys.path.insert(0, str(work))
    mpm = __import__(f"{name}_original")
    start = np.load(REPO / "scenes" / f"{name}_robot.npz")
    scene = mpm.Scene()
    mpm.robot(scene)
    scene.finalize()
    if scene.n_particles != len(start["x"]):
        raise RuntimeError(f"{source} builds {scene.n_particles} particles, the scene "
                           f"{len(start['x'])}")
    mpm.allocate_fields()
    n, steps = scene.n_particles, mpm.max_steps
    x = np.zeros((steps, n, 3), np.float32)
    x[0] = start["x"]
    mpm.x.from_numpy(x)
    F = np.zeros((steps, n, 3, 3), np.float32)
    F[0] = np.eye(3)
    mpm.F.from_numpy(F)
    mpm.actuator_id.from_numpy(start["actuator"])
    mpm.particle_type.from_numpy(start["particle_type"])
    mpm.weights.from_numpy(start["weights"].astype(np.float32))
    mpm.bias.from_numpy(start["bias"].astype(np.float32))
    losses, seconds = [], []
    for _ in range(iterations):
        t0 = time.perf_counter()
        ti.ad.clear_all_gradients()
        loss = mpm.forward()
        mpm.loss.grad[None] = 1
        mpm.backward()
        for p in (mpm.weights, mpm.bias):
            p.from_numpy(p.to_numpy() - rate * p.grad.to_numpy())
        ti.sync()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(loss))
        print(json.dumps({"loss": losses[-1], "seconds": seconds[-1]}), file=sys.stderr,
              flush=True)
    return {"losses": losses, "seconds": seconds}


def run_scene(name: str, iterations: int, out: Path) -> dict:
    """`simrun optimize scenes/<name>.yaml`: iterations - 1 updates give `iterations`
    losses; the time per iteration is the gap between loss.csv's wall times."""
    subprocess.run([sys.executable, "-m", "simrun.cli", "optimize",
                    str(REPO / "scenes" / f"{name}.yaml"), "--iterations",
                    str(iterations - 1), "--out", str(out), "--no-render", "-q"], check=True,
                   capture_output=True, cwd=REPO)
    return scene_curve(out)


def scene_curve(folder: Path) -> dict:
    """A `simrun optimize` folder's losses and the seconds between them (loss.csv)."""
    rows = np.loadtxt(folder / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    return {"losses": rows[:, 1].tolist(), "seconds": np.diff(rows[:, 4]).tolist()}


def compare_scene(name: str, iterations: int, record: bool = False,
                  runs: tuple[Path, Path] | None = None) -> dict:
    """Both loss curves and the median seconds per iteration; prints a table. ``runs``: the
    original's JSON line and a simrun folder made apart, instead of running both here."""
    load = None if runs is not None else round(os.getloadavg()[0], 2)  # apart: not known
    if runs is not None:
        original = json.loads(runs[0].read_text().strip().splitlines()[-1])
        scene = scene_curve(runs[1])
    else:
        python = os.environ.get("TAICHI_PYTHON", "/work/peers/bin/python")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # Taichi, not shim
        done = subprocess.run([python, str(HERE / "difftaichi_diffmpm3d.py"), "--original",
                               name, str(iterations)], check=True, capture_output=True,
                              text=True, env=env)
        original = json.loads(done.stdout.strip().splitlines()[-1])
        with tempfile.TemporaryDirectory(prefix=f"{name}_opt_") as work:
            scene = run_scene(name, iterations, Path(work) / "opt")
    print(f"{name}\n{'iteration':>9} {'Taichi 1.7.4':>14} {'simrun':>14} {'rel. diff':>10}")
    for i, (a, b) in enumerate(zip(original["losses"], scene["losses"])):
        print(f"{i:>9} {a:>14.7g} {b:>14.7g} {abs(b - a) / max(abs(a), 1e-30):>10.2e}")
    per_iter = {"taichi": median(original["seconds"][1:] or original["seconds"]),
                "simrun": median(scene["seconds"] or [float("nan")])}
    print(f"s/iteration: Taichi 1.7.4 {per_iter['taichi']:.3f}, simrun "
          f"{per_iter['simrun']:.3f}")
    found = {"taichi": original, "simrun": scene, "seconds_per_iteration": per_iter}
    if record:
        write_record(f"taichi_{name}", {**found, "load_before": load,
                                        "measured": time.strftime("%Y-%m-%d", time.gmtime())})
    return found


def write_record(key: str, figures: dict) -> None:
    """Into bench/readme_figures.json beside bench/readme_figures.py's own entries."""
    path = HERE / "readme_figures.json"
    record = json.loads(path.read_text()) if path.is_file() else {}
    record[key] = figures
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def compare(iterations: int = 3, record: bool = False,
            runs: tuple[Path, Path] | None = None) -> dict:
    return compare_scene("diffmpm3d", iterations, record, runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--from", dest="runs", nargs=2, type=Path)
    ap.add_argument("--original", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.original is not None:
        print(json.dumps(run_original(args.original[0], int(args.original[1]))))
    else:
        compare(args.iterations, args.record, args.runs)


if __name__ == "__main__":
    main()
