"""Issue 31, "Reproducible by default", through the CLI: every shipped scene gives the same
bits on 1, 2 and 3 threads and from run to run; a run stopped by Ctrl-C at a random moment
and resumed ends with the uninterrupted run's bits at the default thread count; and `grad`'s
forward sweep is exactly `run`'s frames (the same System build, the same determinism).

Before this issue the float scatters of gravity_1024's and lj_melt's force gradients added
in an order the scheduler chose: positions 1e-12 apart after a few steps, and chaos grew that.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from gate_helpers import gated_scene
from test_cli import simrun
from test_cli_resume import _interrupt

from simrun.jobs.grad import _begin, _start, _trajectory
from simrun.scene import load_scene

REPO = Path(__file__).resolve().parents[1]
SCENES = sorted(p.name for p in (REPO / "scenes").glob("*.yaml"))
STEPS, EVERY = 10, 5
SHOW_ALL = ["--set", "outputs.positions=true", "--set", "outputs.velocities=true"]
REPEAT = "gravity_1024.yaml"  # its gradient scatters on every thread (so does lj_melt's)
LJ_4000 = ["--set", "particles.count=4000", "--set", "initial.shape=[10,10,10]",
           "--set", "boundary.high=[16.795961913825074,16.795961913825074,16.795961913825074]"]


def _run(scene: str, out: Path, *options: str) -> None:
    done = simrun("run", str(REPO / "scenes" / scene), "--steps", str(STEPS), "--set",
                  f"outputs.every={EVERY}", *SHOW_ALL, "--no-render", "-q", "--out",
                  str(out), *options, cwd=out.parent)
    assert done.returncode == 0, done.stderr


def _same_bits(a: Path, b: Path) -> None:
    with np.load(a / "frames.npz") as fa, np.load(b / "frames.npz") as fb:
        assert sorted(fa.files) == sorted(fb.files)
        for key in fa.files:
            assert fa[key].tobytes() == fb[key].tobytes(), f"{a.name} vs {b.name}: {key}"
    assert (a / "energy.csv").read_bytes() == (b / "energy.csv").read_bytes()


def _grad_forward_matches(scene_name: str, out: Path) -> None:
    """Step grad's trajectory (the model and stepper `simrun grad` builds) and compare every
    frame step's x and v with run's frames, bit for bit."""
    overrides = [f"steps={STEPS}", "outputs.positions=true", "outputs.velocities=true"]
    scene = load_scene(REPO / "scenes" / scene_name, overrides)
    if scene.objective is None:  # grad needs one; the trajectory does not depend on it
        scene = load_scene(REPO / "scenes" / scene_name,
                           [*overrides, "objective={builtin: total}"])
    x0, v0 = _start(scene, {})
    traj = _trajectory(scene, [], None, x0)
    state = _begin(traj, x0, v0, {})
    with np.load(out / "frames.npz") as frames:
        for k in range(STEPS + 1):
            if k % EVERY == 0:
                i = k // EVERY
                assert frames["step"][i] == state.step == k
                assert frames["x"][i].tobytes() == state.x.tobytes(), (scene_name, k)
                assert frames["v"][i].tobytes() == state.v.tobytes(), (scene_name, k)
            if k < STEPS:
                state = traj.advance(state, k)


@pytest.mark.parametrize("scene", SCENES)
def test_same_bits_at_any_thread_count_and_in_grads_forward_sweep(scene: str,
                                                                 tmp_path: Path) -> None:
    runs = [(tmp_path / f"t{threads}", ["--threads", str(threads)]) for threads in (1, 2, 3)]
    if scene == REPEAT:  # from run to run, at the default thread count
        runs += [(tmp_path / "again", []), (tmp_path / "default", [])]
    for out, options in runs:
        _run(scene, out, *options)
    for out, _ in runs[1:]:
        _same_bits(runs[0][0], out)
    _grad_forward_matches(scene, runs[0][0])


@pytest.mark.parametrize("scene, steps, options", [
    ("gravity_1024", 300, []),
    ("lj_melt", 200, LJ_4000),
])
def test_ctrl_c_at_a_random_moment_then_resume_gives_the_uninterrupted_bits(
        scene: str, steps: int, options: list[str], tmp_path: Path) -> None:
    """The moment is a random energy evaluation (tests/gate_helpers.py holds the run there,
    then Ctrl-C), so the run is provably mid-way on any machine, however fast."""
    seed = random.SystemRandom().randrange(2**32)
    print(f"moment's seed {seed}")  # pytest shows it when the test fails
    hold_after = random.Random(seed).randrange(1, steps)
    gated = gated_scene(scene, tmp_path, tmp_path / "gate", hold_after)
    common = [str(gated), "--steps", str(steps), "--set", "outputs.every=7",
              *SHOW_ALL, *options, "--no-render", "-q"]
    _interrupt(["run", *common, "--out", "cut"], tmp_path)
    resumed = simrun("resume", "cut", "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    whole = simrun("run", *common, "--out", "whole", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    _same_bits(tmp_path / "cut", tmp_path / "whole")


def test_no_reproducible_reaches_the_engine_and_is_kept_by_resume(tmp_path: Path) -> None:
    """--no-reproducible: every System of the job inits the engine with deterministic=False
    (a GPU's scatters then run on every thread); run.json records it, and a resume keeps
    it. Without the flag, and for a plain System, the engine orders its float adds."""
    from simrun.lang import api
    from simrun.lang.config import ordered_floats
    from simrun.scene.initial import initial_state
    from simrun.stepper.system import System

    scene = load_scene(REPO / "scenes" / "gravity.yaml")
    x0 = initial_state(scene)[0]
    for on in (True, False):
        with ordered_floats(on):
            System(scene, x0)
            assert api.runtime().deterministic is on
    System(scene, x0)
    assert api.runtime().deterministic is True
    out = tmp_path / "run"
    _run("gravity.yaml", out, "--no-reproducible")
    record = out / "run.json"
    assert json.loads(record.read_text())["options"]["reproducible"] is False
    done = simrun("resume", str(out), "--steps", str(2 * STEPS), "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    info = json.loads(record.read_text())
    assert info["options"]["reproducible"] is False and info["steps_done"] == 2 * STEPS
    assert info["resumed_from_step"] == STEPS


def test_resume_goes_on_where_the_job_ran_or_where_told(tmp_path: Path) -> None:
    """run.json records the device; a resume uses it (a GPU job's folder on a machine
    without one is bad input that names --device cpu) unless --device says otherwise."""
    from simrun.lang.runtime.cuda import device_status

    out = tmp_path / "run"
    _run("gravity.yaml", out)
    record = out / "run.json"
    info = json.loads(record.read_text())
    assert info["options"]["device"] == "cpu"
    if device_status() is not None:  # no GPU here: as if the job had run on one
        info["options"]["device"] = "cuda"
        record.write_text(json.dumps(info))
        done = simrun("resume", str(out), "--steps", str(2 * STEPS), "-q", cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "--device cuda" in done.stderr and "--device cpu" in done.stderr
    done = simrun("resume", str(out), "--steps", str(2 * STEPS), "--device", "cpu", "-q",
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    info = json.loads(record.read_text())
    assert info["options"]["device"] == "cpu" and info["steps_done"] == 2 * STEPS
    info["options"]["device"] = "tpu"
    record.write_text(json.dumps(info))
    done = simrun("resume", str(out), "-q", cwd=tmp_path)
    assert done.returncode == 2 and "'tpu'" in done.stderr and "Traceback" not in done.stderr
