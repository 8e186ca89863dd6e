"""simrun grad against a DiffTaichi-style Taichi 1.7.4 program, side by side (issue 16).

The same 64 softened-gravity bodies in 2-D, f64, velocity Verlet (grad_cost.py's scene), the
same objective (final kinetic energy) and the same derivatives (w.r.t. x0 and the softening),
two ways, each in a fresh process:

- Taichi, as DiffTaichi writes it: every step's x, v, half-step v and F stored in fields
  indexed by time (x[t, i]), the forces written by hand (F = -dU/dx of U = -s sum_ij m_i m_j
  / sqrt(|x_i - x_j|^2 + softening)), the whole trajectory run under ``ti.ad.Tape(loss)``
  so that the Tape replays every launch's gradient kernel in reverse. Memory grows with the
  horizon: 4 fields x (steps + 1) x 64 x 2 f64, and as much again for their gradients.
- ``simrun grad`` (``scene_gradient``) with ``--checkpoints``: H lambda from the energy
  kernel's forward-over-reverse launches, a binomial checkpoint schedule.

Wall time (Taichi's compile excluded: a 2-step Tape first), peak RSS, and the two gradients'
relative difference. Usage:

    python bench/taichi_tape.py --steps 4000 40000 --checkpoints 20 --rounds 3

Taichi is a benchmark peer only (``pip install taichi==1.7.4``, the ``bench`` extra).
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

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from grad_cost import REPO, SCENE  # noqa: E402

TAICHI = textwrap.dedent("""
    import json, resource, sys, time
    import numpy as np
    import taichi as ti
    steps, x0_path, threads = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=threads, log_level=ti.WARN)
    x0 = np.load(x0_path)
    N, dt, strength, soft0 = x0.shape[0], 1e-4, 0.01, 0.01
    T = steps + 1
    x = ti.Vector.field(2, ti.f64, shape=(T, N), needs_grad=True)
    v = ti.Vector.field(2, ti.f64, shape=(T, N), needs_grad=True)
    vh = ti.Vector.field(2, ti.f64, shape=(T, N), needs_grad=True)
    f = ti.Vector.field(2, ti.f64, shape=(T, N), needs_grad=True)
    m = ti.field(ti.f64, shape=N)
    softening = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def force(t: ti.i32):
        for i, j in ti.ndrange(N, N):
            r = x[t, i] - x[t, j]
            d2 = r.dot(r) + softening[None]
            f[t, i] += -2.0 * strength * m[i] * m[j] * r / (d2 * ti.sqrt(d2))

    @ti.kernel
    def kick_drift(t: ti.i32):
        for i in range(N):
            vh[t, i] = v[t, i] + 0.5 * dt * f[t, i] / m[i]
            x[t + 1, i] = x[t, i] + dt * vh[t, i]

    @ti.kernel
    def kick(t: ti.i32):
        for i in range(N):
            v[t + 1, i] = vh[t, i] + 0.5 * dt * f[t + 1, i] / m[i]

    @ti.kernel
    def kinetic(t: ti.i32):
        for i in range(N):
            loss[None] += 0.5 * m[i] * v[t, i].dot(v[t, i])

    def run(n):
        for fld in (x, v, vh, f):
            fld.fill(0)
        x.from_numpy(np.concatenate([x0[None], np.zeros((T - 1,) + x0.shape)]))
        m.fill(1.0)
        softening[None] = soft0
        loss[None] = 0
        with ti.ad.Tape(loss=loss):
            force(0)
            for t in range(n):
                kick_drift(t)
                force(t + 1)
                kick(t)
            kinetic(n)

    run(2)  # compiles every kernel and its gradient
    ti.sync()
    t0 = time.perf_counter()
    run(steps)
    ti.sync()
    wall = time.perf_counter() - t0
    print(json.dumps({"wall_s": wall, "value": float(loss[None]),
                      "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "grad_x0": x.grad.to_numpy()[0].tolist(),
                      "grad_softening": float(softening.grad[None])}))
""")

SIMRUN = textwrap.dedent("""
    import json, resource, sys, time
    from simrun.scene import load_scene
    from simrun.jobs.grad import scene_gradient
    scene_path, checkpoints, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    scene = load_scene(scene_path, allow_outside=True)
    scene_gradient(scene, ["state.x0"], steps=2, checkpoints=1, threads=threads)  # warm
    t0 = time.perf_counter()
    r = scene_gradient(scene, ["state.x0", "energy.0.params.softening"],
                       checkpoints=checkpoints, threads=threads)
    wall = time.perf_counter() - t0
    print(json.dumps({"wall_s": wall, "value": r.objective,
                      "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "grad_x0": r.gradients["state.x0"].tolist(),
                      "grad_softening": float(r.gradients["energy.0.params.softening"]),
                      "stored_bytes": r.stored_bytes}))
""")


def child(code: str, *args: str) -> dict:
    """Run `code` as a script file (Taichi reads its kernels' source from the file)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(code)
    done = subprocess.run([sys.executable, fh.name, *args], capture_output=True, text=True,
                          cwd=REPO)
    Path(fh.name).unlink()
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1500:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[4000, 40000])
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from simrun.scene import initial_state, load_scene

    with tempfile.TemporaryDirectory() as tmp:
        for steps in args.steps:
            scene_path = Path(tmp) / f"scene{steps}.yaml"
            scene_path.write_text(SCENE.format(kernels=REPO / "kernels", steps=steps,
                                               every=max(steps // 100, 1)))
            x0, _ = initial_state(load_scene(scene_path, allow_outside=True))
            np.save(Path(tmp) / "x0.npy", np.asarray(x0, dtype=np.float64))
            rows: dict[str, list[dict]] = {"simrun grad": [], "Taichi Tape": []}
            for _ in range(args.rounds):
                rows["simrun grad"].append(child(SIMRUN, str(scene_path),
                                                 str(args.checkpoints), str(args.threads)))
                try:
                    rows["Taichi Tape"].append(child(TAICHI, str(steps), str(Path(tmp) / "x0.npy"),
                                                     str(args.threads)))
                except RuntimeError as exc:
                    print(f"taichi, {steps} steps: {str(exc)[-400:]}")
            report(steps, args, rows)


def report(steps: int, args, rows: dict) -> None:
    print(f"{steps} steps, 64 bodies, 2-D, f64, {args.threads} thread(s), median of "
          f"{args.rounds}; simrun with {args.checkpoints} checkpoints:", flush=True)
    ours = rows["simrun grad"][0]
    for name, samples in rows.items():
        if not samples:
            continue
        wall = [s["wall_s"] for s in samples]
        rss = statistics.median(s["peak_rss"] for s in samples) / 2**20
        gx, gs = np.array(samples[0]["grad_x0"]), samples[0]["grad_softening"]
        diff = max(float(np.max(np.abs(gx - ours["grad_x0"])) / np.max(np.abs(ours["grad_x0"]))),
                   abs(gs - ours["grad_softening"]) / abs(ours["grad_softening"]))
        print(f"  {name:12s} {statistics.median(wall):8.2f} s (min {min(wall):.2f}, max "
              f"{max(wall):.2f}), peak RSS {rss:.0f} MiB, J = {samples[0]['value']:.12g}, "
              f"dJ/dsoftening = {gs:.10g}, gradients vs simrun: rel. diff {diff:.1e}",
              flush=True)


if __name__ == "__main__":
    main()
