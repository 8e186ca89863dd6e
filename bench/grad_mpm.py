"""simrun grad through step kernels (scenes/mpm.yaml) against simrun run: wall time and peak
memory, reverse (checkpointed) and forward mode, and what the deterministic scatter mode
costs at 2 threads.

Each job runs in its own process (peak RSS is per process; kernels come from the disk cache,
warmed by a first round that is not counted). Usage:

    python bench/grad_mpm.py --steps 200 --checkpoints 20 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KEYS = ["step_kernels.params.gravity", "energy.0.params.youngs", "fields.C"]

CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    from simrun.scene import load_scene
    job, out, threads, checkpoints, steps, deterministic, big = sys.argv[1:8]
    threads, steps = int(threads), int(steps)
    if deterministic == "0":  # the engine's default scatters, for the cost of the mode
        import simrun.stepper.system as system
        init = system.System.__init__
        system.System.__init__ = lambda self, s, x0, t=None, deterministic=False: init(
            self, s, x0, t, deterministic=False)
    sets = ["objective={builtin: kinetic, at: end}", f"steps={steps}"]
    if big == "1":  # 6400 particles: p2g is split over the threads
        sets += ["particles.count=6400", "initial.shape=[160, 40]", "initial.spacing=0.004",
                 "particles.mass=1.6e-5"]
    scene = load_scene(%r, sets)
    keys = %r
    t0 = time.perf_counter()
    extra = {}
    if job == "run":
        from simrun.stepper import run_scene
        run_scene(scene, Path(out), threads=threads)
    elif job == "reverse":
        from simrun.jobs.grad import scene_gradient
        r = scene_gradient(scene, keys, checkpoints=int(checkpoints), threads=threads)
        extra = {"advances": r.advances, "stored_bytes": r.stored_bytes}
    else:
        from simrun.jobs.grad import forward_gradient
        forward_gradient(scene, keys[:1], threads=threads)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"job": job, "wall_s": wall, "peak_rss": rss, **extra}))
""") % (str(REPO / "scenes" / "mpm.yaml"), KEYS)


def measure(job: str, out: Path, threads: int, checkpoints: int, steps: int,
            deterministic: bool = True, big: bool = False) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, job, str(out), str(threads),
                           str(checkpoints), str(steps), "1" if deterministic else "0",
                           "1" if big else "0"],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big", action="store_true", help="6400 particles instead of 800")
    args = parser.parse_args()
    jobs = [("run", 1, True), ("reverse", 1, True), ("forward", 1, True),
            ("run", 2, True), ("reverse", 2, True), ("reverse", 2, False)]
    with tempfile.TemporaryDirectory() as tmp:
        times: dict = {j: [] for j in jobs}
        last: dict = {}
        for r in range(args.rounds + 1):  # round 0 warms the kernel cache
            for job, threads, det in jobs:
                res = measure(job, Path(tmp) / f"{job}{threads}{det}{r}", threads,
                              args.checkpoints, args.steps, det, args.big)
                if r:
                    times[(job, threads, det)].append(res["wall_s"])
                last[(job, threads, det)] = res
    run1 = statistics.median(times[("run", 1, True)])
    print(f"scenes/mpm.yaml ({6400 if args.big else 800} particles, f32), {args.steps} steps, "
          f"{args.checkpoints} checkpoints, median of {args.rounds}")
    print("| job | threads | deterministic | wall s | / run (1 thread) | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for key in jobs:
        job, threads, det = key
        med = statistics.median(times[key])
        mode = "-" if job == "run" else ("yes" if det else "no")
        print(f"| {job} | {threads} | {mode} | {med:.2f} | "
              f"{med / run1:.1f} | {last[key]['peak_rss'] / 2**20:.0f} |")


if __name__ == "__main__":
    main()
