"""The thread count a job picks when not told (issue 44: all cores made lj_nvt's 108 atoms
30% slower than one thread): one thread below a measured work per step, every usable CPU
above it, --threads as given, and the same bits whichever it picks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from simrun.lang.runtime.parallel import default_threads
from simrun.scene import load_scene
from simrun.stepper.threads import ONE_THREAD_BELOW, job_threads, work_per_step

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"


def simrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_work_per_step_counts_the_pairs_a_step_visits() -> None:
    gravity = load_scene(SCENES / "gravity.yaml")  # 8 bodies, every pair
    assert work_per_step(gravity) == 8 + 8 * 7 / 2
    lj = load_scene(SCENES / "lj_nvt.yaml")  # 108 atoms, density 0.7, reach 2.3
    within = 108 / 5.363421210579405 ** 3 * 4 / 3 * np.pi * 2.3 ** 3
    assert np.isclose(work_per_step(lj), 108 + 108 * within)


def test_small_systems_get_one_thread_large_ones_every_cpu_and_threads_wins() -> None:
    small = load_scene(SCENES / "lj_nvt.yaml")
    large = load_scene(SCENES / "lj_melt.yaml")
    assert work_per_step(small) < ONE_THREAD_BELOW["neighbour list"] < work_per_step(large)
    assert job_threads(small, None) == 1
    assert job_threads(large, None) == default_threads()
    assert job_threads(small, 3) == 3 and job_threads(large, 1) == 1


def test_run_records_the_threads_it_chose_and_the_bits_do_not_change(tmp_path: Path) -> None:
    scene = str(SCENES / "lj_nvt.yaml")
    chosen = simrun("run", scene, "--steps", "60", "--no-render", "--out", "a", cwd=tmp_path)
    told = simrun("run", scene, "--steps", "60", "--no-render", "--threads", "2", "--out", "b",
                  cwd=tmp_path)
    assert chosen.returncode == 0 and told.returncode == 0, chosen.stderr + told.stderr
    assert json.loads((tmp_path / "a" / "run.json").read_text())["threads"] == 1
    assert json.loads((tmp_path / "b" / "run.json").read_text())["threads"] == 2
    with np.load(tmp_path / "a" / "frames.npz") as a, np.load(tmp_path / "b" / "frames.npz") as b:
        for name in ("x", "v"):
            np.testing.assert_array_equal(a[name], b[name])


def test_small_bond_scenes_get_one_thread() -> None:
    """molecule and fit_spring (32 particles, 528 interactions per step) ran every CPU under
    the first, load-measured threshold of 500; on idle cores two threads gain nothing below
    about 10,000 all-pairs interactions (bench/README.md, "Threads from the work")."""
    for name in ("molecule.yaml", "fit_spring.yaml"):
        scene = load_scene(SCENES / name)
        assert work_per_step(scene) < ONE_THREAD_BELOW["all pairs"]
        assert job_threads(scene, None) == 1
    busy = load_scene(SCENES / "gravity_1024.yaml")
    assert job_threads(busy, None) == default_threads()
