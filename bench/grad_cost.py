"""simrun grad against simrun run on one long trajectory: wall time and peak memory.

Each job runs in its own process (peak RSS is per process), on the same scene: 64 softened
gravity bodies in 2-D, f64, velocity Verlet. Usage:

    python bench/grad_cost.py --steps 40000 --checkpoints 20 --threads 1
    python bench/grad_cost.py --steps 160000 --memory 64   # checkpoints that fit 64 MiB
    python bench/grad_cost.py --steps 16000 --device cuda     # kernels on the GPU
    python bench/grad_cost.py --steps 4000 --integrator '{type: langevin, temperature: 0.01, friction: 1.0}'

Besides time and peak RSS it prints what the binomial schedule's formula says the run must
recompute and store (`schedule.forward_steps`, snapshots x the bytes of one state), beside
what the gradient reports it did. The CPU time of each job (user + system) is printed too:
on a box shared with other work it moves less than the wall time. ``--baseline DIR`` runs
the same jobs with another checkout's simrun (e.g. main) in turn with this one's, round by
round, and ends with the medians of both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATE_BYTES = 3 * 64 * 2 * 8  # x, v and F of 64 bodies in 2-D, f64

SCENE = """version: 1
name: grad_cost
precision: f64
seed: 1
particles: {{count: 64, dim: 2, mass: 1.0}}
initial: {{type: random, low: [0, 0], high: [1, 1]}}
energy:
  - kernel: {kernels}/gravity.py:gravity
    params: {{softening: 0.01, strength: 0.01}}
integrator: velocity_verlet
dt: 1e-4
steps: {steps}
outputs: {{every: {every}, xyz: false}}
objective: {{builtin: kinetic, at: end}}
"""

CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    from simrun.scene import load_scene
    job, scene_path, out, threads, checkpoints, memory, device = sys.argv[1:8]
    threads = int(threads)
    checkpoints = int(checkpoints) if int(checkpoints) >= 0 else None
    memory = int(memory) * 2**20 if int(memory) > 0 else None
    scene = load_scene(scene_path, allow_outside=True)
    from simrun.lang.config import on_device
    on_device(device).__enter__()
    t0, c0 = time.perf_counter(), time.process_time()
    if job == "run":
        from simrun.stepper import run_scene
        run_scene(scene, Path(out), threads=threads)
        extra = {}
    else:
        from simrun.jobs.grad import scene_gradient
        r = scene_gradient(scene, ["state.x0", "energy.0.params.softening"],
                           checkpoints=checkpoints, memory=memory, threads=threads)
        extra = {"advances": r.advances, "stored_bytes": r.stored_bytes,
                 "snapshots": r.snapshots, "recompute_factor": r.recompute_factor,
                 "setup_s": r.seconds["setup"], "sweeps_s": r.seconds["sweeps"]}
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"job": job, "wall_s": wall, "cpu_s": cpu, "peak_rss": rss, **extra}))
""")


def measure(job: str, scene: Path, out: Path, threads: int, checkpoints: int,
            memory_mib: int = 0, root: Path = REPO, device: str = "cpu") -> dict:
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, job, str(scene), str(out), str(threads),
                           str(checkpoints), str(memory_mib), device], capture_output=True,
                          text=True,
                          check=True, env=env, cwd=root)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40000)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--memory", type=int, default=0,
                        help="MiB for stored states (replaces --checkpoints)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--integrator", default="velocity_verlet",
                        help="the scene's integrator, e.g. '{type: langevin, temperature: "
                             "0.01, friction: 1.0}' (a thermostat: NVT gradients)")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: kernels on the GPU")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout (e.g. main's) to measure in turn with this one")
    args = parser.parse_args()
    trees = [("this", REPO)] + ([("baseline", args.baseline)] if args.baseline else [])
    ratios: dict[str, list] = {name: [] for name, _ in trees}
    with tempfile.TemporaryDirectory() as tmp:
        scene = Path(tmp) / "scene.yaml"
        scene.write_text(SCENE.format(kernels=REPO / "kernels", steps=args.steps,
                                      every=max(args.steps // 100, 1)).replace(
            "integrator: velocity_verlet", f"integrator: {args.integrator}"))
        for r in range(args.rounds):
            for name, root in trees:
                run = measure("run", scene, Path(tmp) / f"run{r}{name}", args.threads, 0,
                              root=root, device=args.device)
                grad = measure("grad", scene, Path(tmp) / f"grad{r}{name}", args.threads,
                               -1 if args.memory else args.checkpoints, args.memory, root,
                               args.device)
                ratios[name].append((grad["wall_s"] / run["wall_s"],
                                     grad["cpu_s"] / run["cpu_s"]))
                print(f"[{name}, load {os.getloadavg()[0]:.1f}] " + _line(args, run, grad),
                      flush=True)
    for name, values in ratios.items():
        print(f"{name}: median grad/run {statistics.median(v[0] for v in values):.2f}x wall, "
              f"{statistics.median(v[1] for v in values):.2f}x CPU over {len(values)} rounds")


def _line(args, run: dict, grad: dict) -> str:
    from simrun.adjoint import schedule

    snaps = grad["snapshots"]
    return (f"steps {args.steps}, checkpoints {snaps}, threads {args.threads}: "
            f"run {run['wall_s']:.2f} s (CPU {run['cpu_s']:.2f}), "
            f"{run['peak_rss'] / 2**20:.0f} MiB; "
            f"grad {grad['wall_s']:.2f} s (CPU {grad['cpu_s']:.2f}; setup {grad['setup_s']:.2f}, "
            f"sweeps {grad['sweeps_s']:.2f}), {grad['peak_rss'] / 2**20:.0f} MiB; "
            f"grad/run {grad['wall_s'] / run['wall_s']:.2f}x time "
            f"({grad['cpu_s'] / run['cpu_s']:.2f}x CPU), "
            f"+{(grad['peak_rss'] - run['peak_rss']) / 2**20:.0f} MiB; "
            f"{grad['advances']} steps recomputed (formula "
            f"{schedule.forward_steps(args.steps, snaps)}, factor "
            f"{grad['recompute_factor']:.2f}), {grad['stored_bytes']} bytes of stored "
            f"states (formula {snaps} x {STATE_BYTES} = {snaps * STATE_BYTES})")


if __name__ == "__main__":
    main()
