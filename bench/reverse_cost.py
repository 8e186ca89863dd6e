"""A reverse step against a forward step, as the gradient's native program makes them: 64
softened gravity bodies (bench/grad_cost.py's scene, velocity Verlet, f64, one thread), with
grad_cost's KEYs (state.x0 and the softening). The forward step is the stepper's launches
without U (the recomputations' `step` row of adjoint/program.py); the reverse step is
ReverseStep.backward (the `reverse` row without the slab's load of the state before it).
Each is one native chain repeated N times in one call.

    python bench/reverse_cost.py [--rounds 7] [--steps 20000]   # CPU time a step
    python bench/reverse_cost.py --instructions [--parts]       # callgrind, per step

CPU time (process_time) in fresh processes, interleaved; with --instructions, valgrind's
callgrind counts each at two repeat counts (kernels compiled for Haswell beforehand, as
bench/launch_instructions.py does), and the difference over the repeats is one step.
Also prints the reverse step's launches by kernel, and the slab's load per reverse step.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from grad_cost import SCENE
from launch_instructions import HASWELL

REPO = Path(__file__).resolve().parents[1]
CHILD = textwrap.dedent("""
    import collections, sys, time
    import numpy as np
    from simrun.adjoint.kernel_state import KernelAdjoint
    from simrun.adjoint.reverse_step import ReverseStep
    from simrun.jobs.grad import _begin, _trajectory
    from simrun.keys import parse_keys
    from simrun.scene import initial_state, load_scene
    from simrun.stepper.launches import Rows
    which, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    scene = load_scene(path, allow_outside=True)
    keys = parse_keys(scene, ["state.x0", "energy.0.params.softening"])
    x0, v0 = initial_state(scene)
    traj = _trajectory(scene, keys, 1, x0)
    state0 = _begin(traj, x0, v0, {})
    end = traj.advance(state0, 0)
    native = traj._made_once(ReverseStep)
    native.prepare()
    for bound in traj.system.energy:
        bound.kernel.last_launch = None
    traj.system.energy_terms().set_field_args()
    if which == "list":
        names = collections.Counter(
            getattr(getattr(l[0], "kernel", None), "name", None) or
            getattr(l[0], "name", "?") if isinstance(l, tuple) else "python"
            for l in native.backward)
        print(len(native.backward), "launches:", dict(names))
        sys.exit()
    energy = tuple(b.kernel.name for b in traj.system.energy)
    def small(launches):  # without the energies' launches (forces, H lambda)
        return [l for l in launches if not (isinstance(l, tuple) and
                                            getattr(l[0], "name", "").startswith(energy))]
    if which.startswith("forward"):
        traj.model.stepper.load(state0)
        launches = traj.model.stepper.step_launches(potential=False)
        rows = Rows(small(launches) if which.endswith("small") else launches, True)
    else:
        adj = KernelAdjoint(np.ones(x0.shape) * 1e-3, np.ones(x0.shape) * 1e-3, {},
                            np.zeros(len(x0)))
        native.push(adj)
        native.begin(end)
        native.load(state0)
        rows = Rows(small(native.backward) if which.endswith("small") else native.backward,
                    True)
    rows.run()
    start = time.process_time()
    rows.run_program(np.array([0, len(rows.launches), n]))
    print((time.process_time() - start) / n * 1e6)
""")


def child(root: Path, which: str, n: int, scene: Path, tmp: Path, valgrind: bool) -> float:
    env = {**os.environ, "PYTHONPATH": f"{tmp}:{root}" if valgrind else str(root),
           "SIMRUN_CACHE_DIR": str(tmp / ("cache-hw" if valgrind else "cache"))}
    cmd = [sys.executable, "-c", CHILD, which, str(n), str(scene)]
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", *cmd]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    if valgrind:
        return float(re.search(r"Collected : (\d+)", done.stderr).group(1))
    if which == "list":
        print(done.stdout.strip())
        return 0.0
    return float(done.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--root", type=Path, default=REPO)
    ap.add_argument("--parts", action="store_true",
                    help="--instructions also without the energies' launches: what they cost")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "sitecustomize.py").write_text(HASWELL)
        scene = tmp / "scene.yaml"
        scene.write_text(SCENE.format(kernels=args.root / "kernels", steps=100, every=100))
        child(args.root, "list", 1, scene, tmp, False)
        if args.instructions:
            per = {}
            for which in ("forward", "reverse") + (("forward small", "reverse small")
                                                   if args.parts else ()):
                env = {**os.environ, "PYTHONPATH": f"{tmp}:{args.root}",
                       "SIMRUN_CACHE_DIR": str(tmp / "cache-hw")}
                subprocess.run([sys.executable, "-c", CHILD, which, "1", str(scene)], env=env,
                               check=True, capture_output=True)
                few, many = (child(args.root, which, k, scene, tmp, True) for k in (200, 1200))
                per[which] = (many - few) / 1000
                print(f"{which}: {per[which] / 1e3:.1f}k instructions a step", flush=True)
            print(f"reverse / forward: {per['reverse'] / per['forward']:.2f}x (instructions)")
            if args.parts:
                force = per["forward"] - per["forward small"]
                hvp = per["reverse"] - per["reverse small"]
                print(f"the energies' launch: forward {force / 1e3:.1f}k, reverse (H lambda) "
                      f"{hvp / 1e3:.1f}k")
            return
        times: dict = {}
        for _ in range(args.rounds):
            for which in ("forward", "reverse"):
                times.setdefault(which, []).append(
                    child(args.root, which, args.steps, scene, tmp, False))
        for which, values in times.items():
            print(f"{which}: median {statistics.median(values):.2f} us CPU a step "
                  f"(range {min(values):.2f}-{max(values):.2f}, {len(values)} processes)")
        print(f"reverse / forward: "
              f"{statistics.median(times['reverse']) / statistics.median(times['forward']):.2f}x")


if __name__ == "__main__":
    main()
