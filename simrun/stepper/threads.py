"""How many threads a job uses when it is not told: one for a system whose step is too
little work to share, all usable CPUs otherwise (issue 44: lj_nvt's 108 atoms made 20.2k
steps/s on one thread and 14.1k on two, the workers' wake-ups and joins costing more than
they save).

The work of a step is estimated from the scene alone, before anything is compiled, as
interactions per step: N particles plus their pairs, N x (the particles within the
neighbour list's reach) with a list, or all N (N - 1) / 2 pairs without one (an energy
kernel without a list loops over every pair, as gravity's does; a scene of bonds or a
grid then counts high, which only keeps today's default of every CPU). The thresholds are
measured by `python bench/thread_choice.py` (bench/README.md, "Threads from the work").
The thread count never changes the results: the same bits at any count."""

from __future__ import annotations

import math

from simrun.lang.runtime.parallel import default_threads
from simrun.scene import Scene

# interactions per step below which one thread is faster (bench/README.md, "Threads from
# the work", measured on idle cores): two threads gain from about 10,000 with a list
# (lj_nvt 256 atoms, 9.4e3: 1.04-1.08x; 108 atoms, 4.0e3: 0.97x) and without one (gravity
# 140 bodies, 9.9e3: 1.02x; 100 bodies, 5.1e3: 0.99x; 200 bodies, 2.0e4: 1.33x)
ONE_THREAD_BELOW = {"neighbour list": 10_000, "all pairs": 10_000}


def work_per_step(scene: Scene) -> float:
    """Interactions per step: particles plus the pairs the energy kernels visit, plus the
    cells of the scene's grids."""
    n, dim = scene.particles.count, scene.particles.dim
    cells = sum(math.prod(g.shape) for g in scene.grids)
    spec, box = scene.neighbors, scene.boundary
    if spec is not None and box.low is not None and box.high is not None:
        volume = math.prod(h - lo for lo, h in zip(box.low, box.high))
        reach = spec.cutoff + spec.skin
        ball = math.pi ** (dim / 2) / math.gamma(dim / 2 + 1) * reach ** dim
        within = min(n - 1, n / volume * ball) if volume > 0 else n - 1
        return cells + n + n * within
    return cells + n + n * (n - 1) / 2


def job_threads(scene: Scene, threads: int | None) -> int:
    """``threads`` when given; else one thread below the measured work, every usable CPU
    above it."""
    if threads:
        return threads
    kind = "neighbour list" if scene.neighbors is not None else "all pairs"
    return 1 if work_per_step(scene) < ONE_THREAD_BELOW[kind] else default_threads()
