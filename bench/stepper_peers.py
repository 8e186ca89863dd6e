"""simrun's stepper side by side with its peers, each job in a fresh process (issue 16).

1. Per-step cost of ``simrun run scenes/gravity.yaml`` (N = 8, f32, symplectic Euler,
   launch-bound) against the reference program's substep (``Tape(compute_U)`` + ``advance``)
   under Taichi 1.7.4 (``programs.build_gravity``, the same source).
2. 64 softened-gravity bodies in 2-D, f64, velocity Verlet (grad_cost.py's scene): ``simrun
   run`` and ``simrun grad`` (``--checkpoints``) against JAX: a ``lax.scan`` of the same steps,
   and ``jax.grad`` of the final kinetic energy with ``jax.checkpoint`` on each of
   ``--checkpoints`` chunks (w.r.t. x0 and the softening, as simrun grad). Wall time and peak
   RSS; JAX's time excludes its compile (reported apart), XLA runs on one thread.

    python bench/stepper_peers.py --steps 40000 --checkpoints 20 --rounds 3 [--baseline DIR]

``--baseline DIR``: also time the simrun jobs on another commit's tree, in the same rounds
(``git archive main | tar -x -C DIR``), labelled ``@base``.

JAX and Taichi are benchmark peers only (``pip install taichi==1.7.4 "jax[cpu]"``).
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

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from grad_cost import CHILD, REPO, SCENE  # noqa: E402

GRAVITY8 = textwrap.dedent("""
    import dataclasses, json, sys
    from pathlib import Path
    from simrun.scene import load_scene
    from simrun.stepper import run_scene
    steps, out = int(sys.argv[1]), sys.argv[2]
    scene = load_scene(sys.argv[3])
    scene = dataclasses.replace(scene, steps=steps)
    r = run_scene(scene, Path(out), threads=1)
    print(json.dumps({"per_step_us": (r.wall_s - r.setup_s) / r.steps_done * 1e6,
                      "steps": r.steps_done}))
""")

TAICHI8 = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, sys.argv[2])
    import taichi as ti
    from programs import build_gravity
    ti.init(arch=ti.cpu, default_fp=ti.f32, cpu_max_num_threads=1, log_level=ti.WARN)
    substep, x, v = build_gravity(ti, 8)
    steps = int(sys.argv[1])
    for _ in range(200):
        substep()
    ti.sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        substep()
    ti.sync()
    print(json.dumps({"per_step_us": (time.perf_counter() - t0) / steps * 1e6}))
""")

JAX64 = textwrap.dedent("""
    import json, os, resource, sys, time
    import numpy as np
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    job, steps, chunks, x0_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    x0 = jnp.asarray(np.load(x0_path))
    m, dt, strength = jnp.ones(x0.shape[0]), 1e-4, 0.01

    def energy(x, softening):
        r = x[:, None, :] - x[None, :, :]
        inv = 1.0 / jnp.sqrt(jnp.sum(r * r, axis=-1) + softening)
        return jnp.sum(-strength * m[:, None] * m[None, :] * inv)

    force = jax.grad(lambda x, s: -energy(x, s))

    def step(carry, softening):
        x, v, f = carry
        v = v + 0.5 * dt * f / m[:, None]
        x = x + dt * v
        f = force(x, softening)
        v = v + 0.5 * dt * f / m[:, None]
        return (x, v, f)

    def trajectory(x0, softening, n):
        carry = (x0, jnp.zeros_like(x0), force(x0, softening))
        return jax.lax.scan(lambda c, _: (step(c, softening), None), carry, None, length=n)[0]

    def kinetic(carry):
        return 0.5 * jnp.sum(m[:, None] * carry[1] ** 2)

    def chunked(x0, softening):
        carry = (x0, jnp.zeros_like(x0), force(x0, softening))
        per = steps // chunks
        @jax.checkpoint
        def chunk(c):
            return jax.lax.scan(lambda c, _: (step(c, softening), None), c, None, length=per)[0]
        c = jax.lax.scan(lambda c, _: (chunk(c), None), carry, None, length=chunks)[0]
        return kinetic(c)

    if job == "forward":
        fn = jax.jit(lambda x0, s: kinetic(trajectory(x0, s, steps)))
    elif job == "grad":
        fn = jax.jit(jax.grad(chunked, argnums=(0, 1)))
    else:
        fn = jax.jit(jax.grad(lambda x0, s: kinetic(trajectory(x0, s, steps)), argnums=(0, 1)))
    t0 = time.perf_counter()
    compiled = fn.lower(x0, 0.01).compile()
    compile_s = time.perf_counter() - t0
    rss_before = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(x0, 0.01))
    wall = time.perf_counter() - t0
    value = float(out) if job == "forward" else float(out[1])
    print(json.dumps({"job": "jax_" + job, "wall_s": wall, "compile_s": compile_s,
                      "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "rss_before": rss_before, "value": value}))
""")


def child(code: str, *args: str, env: dict | None = None) -> dict:
    # `python -c` puts the working directory first on sys.path: run in the tree it imports
    cwd = env["PYTHONPATH"] if env is not None and "PYTHONPATH" in env else REPO
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def base_env(tree: str | None) -> dict | None:
    """The environment that imports simrun from ``tree`` (None: this checkout)."""
    if tree is None:
        return None
    return {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}


def jax_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1 "
                        + env.get("XLA_FLAGS", ""))
    return env


def gravity8(rounds: int, steps: int, tmp: Path, baseline: str | None) -> None:
    rows: dict[str, list[float]] = {}
    trees = [("simrun run", None)] + ([("simrun run@base", baseline)] if baseline else [])
    for r in range(rounds):  # alternate A/B: the machine is shared
        for name, tree in trees:
            rows.setdefault(name, []).append(child(
                GRAVITY8, str(steps), str(tmp / f"g8_{r}_{len(rows)}"),
                str(REPO / "scenes" / "gravity.yaml"), env=base_env(tree))["per_step_us"])
        try:
            rows.setdefault("Taichi 1.7.4 substep", []).append(
                child(TAICHI8, str(steps), str(HERE))["per_step_us"])
        except RuntimeError as exc:
            print(f"taichi: {exc}")
    print(f"gravity N=8, f32, {steps} steps, 1 thread, median of {rounds} (us/step):")
    for name, samples in rows.items():
        print(f"  {name:22s} {fmt(samples)}", flush=True)


def fmt(samples: list[float]) -> str:
    return f"{statistics.median(samples):.1f} (min {min(samples):.1f}, max {max(samples):.1f})"


def bodies64(rounds: int, steps: int, checkpoints: int, threads: int, tmp: Path,
             baseline: str | None) -> None:
    from simrun.scene import initial_state, load_scene

    scene_path = tmp / "scene.yaml"
    scene_path.write_text(SCENE.format(kernels=REPO / "kernels", steps=steps,
                                       every=max(steps // 100, 1)))
    x0, _ = initial_state(load_scene(scene_path, allow_outside=True))
    np.save(tmp / "x0.npy", np.asarray(x0, dtype=np.float64))
    rows: dict[str, list[dict]] = {}
    trees = [("", None)] + ([("@base", baseline)] if baseline else [])
    for r in range(rounds):
        jobs = []
        for job in ("run", "grad"):
            for tag, tree in trees:
                jobs.append((f"simrun {job}{tag}", lambda job=job, tag=tag, tree=tree, r=r: child(
                    CHILD, job, str(scene_path), str(tmp / f"{job}{tag}{r}"), str(threads),
                    str(checkpoints), "0", env=base_env(tree))))
        for job in ("forward", "grad"):
            jobs.append((f"jax {job}", lambda job=job: child(
                JAX64, job, str(steps), str(checkpoints), str(tmp / "x0.npy"), env=jax_env())))
        for name, fn in jobs:
            try:
                rows.setdefault(name, []).append(fn())
            except RuntimeError as exc:
                print(f"{name}: {str(exc)[-400:]}")
    print(f"64 bodies, 2-D, f64, velocity Verlet, {steps} steps, {checkpoints} checkpoints, "
          f"{threads} thread(s), median of {rounds}:")
    for name, samples in rows.items():
        wall = [s["wall_s"] for s in samples]
        rss = statistics.median(s["peak_rss"] for s in samples) / 2**20
        extra = ""
        if "compile_s" in samples[0]:
            extra = (f", compile {statistics.median(s['compile_s'] for s in samples):.2f} s, "
                     f"RSS before the job {samples[0]['rss_before'] / 2**20:.0f} MiB")
        print(f"  {name:16s} {fmt(wall)} s, peak RSS {rss:.0f} MiB{extra}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40000)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gravity-steps", type=int, default=20000)
    parser.add_argument("--only", choices=["gravity8", "bodies64"])
    parser.add_argument("--baseline", help="a tree of another commit to time beside this one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "bodies64":
            gravity8(args.rounds, args.gravity_steps, Path(tmp), args.baseline)
        if args.only != "gravity8":
            bodies64(args.rounds, args.steps, args.checkpoints, args.threads, Path(tmp),
                     args.baseline)


if __name__ == "__main__":
    main()
