"""`simrun grad` of a scene with a `controller` on the integrator's velocity Verlet (the
integrator's update kernels differentiated as step kernels, adjoint/trajectory.py): time per
step of `run`, reverse-mode `grad` and forward-mode `grad` (one tangent sweep), in one
process, kernels compiled before timing; medians of --repeats.

    python bench/grad_controller.py [--particles 64] [--steps 200 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from test_adjoint_integrated import THRUST  # noqa: E402
from timing import median_wall  # noqa: E402

from simrun.jobs.grad import forward_gradient, scene_gradient  # noqa: E402
from simrun.scene import load_scene  # noqa: E402
from simrun.stepper import run_scene  # noqa: E402


def _scene(folder: Path, particles: int, steps: int):
    (folder / "thrust.py").write_text(THRUST)
    side = int(round(particles ** 0.5))
    path = folder / "bench.yaml"
    path.write_text(f"""version: 1
precision: f64
particles: {{count: {side * side}, dim: 2, mass: 1.5}}
initial: {{type: lattice, shape: [{side}, {side}], spacing: 0.1, velocity: [0.3, -0.2]}}
controller: {{kernels: [thrust.py:steer], params: {{omega: 3.0}}}}
energy: [{{kernel: thrust.py:trap, params: {{k: 2.0, gain: 1.3}}}}]
integrator: velocity_verlet
dt: 0.01
steps: {steps}
outputs: {{every: {steps}, xyz: false, positions: false, velocities: false}}
objective: {{kernel: thrust.py:miss, params: {{tx: 0.8, ty: 0.5}}, at: end}}
""")
    return load_scene(path, allow_outside=True)


def _row(folder: Path, particles: int, steps: int, repeats: int, threads: int) -> str:
    """One table row: run, reverse and forward time per step for `steps` steps."""
    scene = _scene(folder, particles, steps)
    keys = ["fields.weights", "energy.0.params.k", "dt"]
    runs = iter(range(10**6))
    run = median_wall(lambda: run_scene(scene, folder / f"run{steps}-{next(runs)}",
                                    threads=threads), repeats)
    rev = median_wall(lambda: scene_gradient(scene, keys, threads=threads, checkpoints=20),
                  repeats)
    fwd = median_wall(lambda: forward_gradient(scene, ["dt"], threads=threads), repeats)
    return (f"| {steps} | {run / steps * 1e6:.0f} us | {rev / steps * 1e6:.0f} us | "
            f"{rev / run:.1f}x | {fwd / steps * 1e6:.0f} us |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--particles", type=int, default=64)
    ap.add_argument("--steps", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    print(f"{args.particles} particles, f64, velocity Verlet + controller, threads "
          f"{args.threads}, cpus {os.cpu_count()}; per step, medians of {args.repeats}")
    print("| steps | run | grad (reverse) | grad / run | forward (1 sweep) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for steps in args.steps:
            print(_row(Path(tmp), args.particles, steps, args.repeats, args.threads),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
