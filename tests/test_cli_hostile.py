"""Issue 29's findings through the real CLI: numbers beyond the scene's precision, sizes that
underflow or explode, hostile .npz headers, huge sweeps, usage errors, long --wrt keys and
a full disk in every job: exit 2 (bad input) or 1 (a full disk), one paragraph, no
traceback, and advice that works."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from cli_helpers import simrun_measured
from hostile_files import claimed_size, deflate_bomb, forged_npz
from test_cli import GRAVITY, REPO, simrun
from test_cli_reliability import KERNEL, SCENE, one_paragraph, small_disk  # noqa: F401

LJ_MELT = str(REPO / "scenes" / "lj_melt.yaml")
PROJECTILE = str(REPO / "scenes" / "projectile.yaml")
PERIODIC = "boundary={type: periodic, low: [0, 0], high: [1e-300, 1e-300]}"


@pytest.fixture()
def scene_dir(tmp_path: Path) -> Path:
    (tmp_path / "k.py").write_text(KERNEL.replace("U: ti.template()", "U: ti.template(), "
                                                  "s: float").replace("+= x", "+= s * x"))
    (tmp_path / "s.yaml").write_text(SCENE.replace("k.py:k}", "k.py:k, params: {s: 1.0}}"))
    return tmp_path


PRECISION = {
    # case: (--set overrides, the start of the message after "error: ")
    "param_beyond_f32": (["precision=f32", "energy.0.params.s=1e300"],
                         "--set energy.0.params.s=1e300 (command line): parameter 's' does "
                         "not fit its kernel argument: kernel 'k' argument 's' (f32) got "
                         "1e+300, beyond the largest f32"),
    "dt_beyond_f32": (["precision=f32", "dt=1e39"], "--set dt=1e39 (command line): 'dt' is "
                      "1e+39, beyond the largest number of the scene's precision f32"),
    "dt_rounds_to_0": (["precision=f32", "dt=1e-50"], "--set dt=1e-50 (command line): 'dt' "
                       "is 1e-50, which the scene's precision f32 rounds to 0"),
    "mass_beyond_f32": (["precision=f32", "particles.mass=[1, 1e39, 1]"],
                        "--set particles.mass=[1, 1e39, 1] (command line): 'particles.mass.1'"
                        " is 1e+39"),
    "subnormal_mass": (["precision=f32", "particles.mass=1e-40"], "--set particles.mass=1e-40 "
                       "(command line): 'particles.mass' is 1e-40, outside the range f32 "
                       "holds for a size"),
    "box_underflows_f32": (["precision=f32", PERIODIC], f"--set {PERIODIC} (command line): "
                           "'boundary.high.0' is 1e-300, which the scene's precision f32 "
                           "rounds to 0"),
    "box_volume_underflows_f64": ([PERIODIC], f"--set {PERIODIC} (command line): the box's "
                                  "volume (the product of its sides, which the pressure "
                                  "divides by) is 0 in f64"),
    "initial_box_overflows": (["initial={low: [-1e308, 0], high: [1e308, 1]}"],
                              "--set initial={low: [-1e308, 0], high: [1e308, 1]} (command "
                              "line): the initial positions reach inf"),
    "neighbor_reach_squared_beyond_f32": (["precision=f32", "neighbors={cutoff: 1e20}"],
                                          "--set neighbors={cutoff: 1e20} (command line): "
                                          "(cutoff + skin)^2 = (1e+20)^2 is 1e+40, outside "
                                          "the range f32 holds for a size"),
    "temperature_beyond_f32": (["precision=f32", "initial.temperature=1e39"],
                               "--set initial.temperature=1e39 (command line): "
                               "'initial.temperature' is 1e+39"),
}


@pytest.mark.parametrize("case", sorted(PRECISION))
def test_values_beyond_the_precision_or_underflowing_sizes_exit_2_at_check(
        scene_dir: Path, case: str) -> None:
    sets, expected = PRECISION[case]
    args = [a for s in sets for a in ("--set", s)]
    message = one_paragraph(simrun("check", "s.yaml", *args, cwd=scene_dir))
    assert message.startswith(f"error: {expected}"), message


@pytest.mark.parametrize(("override", "expected"), [
    ("boundary.high=1e308", "the box's volume (the product of its sides, which the pressure "
                            "divides by) is inf in f64"),
    ("boundary.high=1e100", "the periodic box makes 4.56e+298 cells of side cutoff + skin = "
                            "2.8 for the neighbour list, more than its i32 index holds"),
    ("energy.0.params.sigma=2147483648", "parameter 'sigma' of kernel 'lj' (lj.py) must "
                                         "satisfy sigma < cutoff"),
])
def test_absurd_sizes_are_bad_input_not_out_of_memory(tmp_path: Path, override: str,
                                                      expected: str) -> None:
    """Refused as the scene loads, before any kernel is compiled (`check` compiles every
    kernel of a scene it accepts: lj_melt's seven objects land in a fresh cache)."""
    cache = tmp_path / "cache"
    done, _ = simrun_measured("check", LJ_MELT, "--set", override, cwd=tmp_path,
                              env={"SIMRUN_CACHE_DIR": str(cache), "SIMRUN_NO_DISK_CACHE": ""})
    message = one_paragraph(done)
    assert message.startswith(f"error: --set {override} (command line): {expected}"), message
    assert "memory" not in message
    assert not [*cache.rglob("*.o"), *cache.rglob("*.ptx")], "a kernel was compiled first"


def test_dt_beyond_f32_is_exit_2_in_run_too(tmp_path: Path) -> None:
    message = one_paragraph(simrun("run", GRAVITY, "--set", "dt=1e39", "--out", "o",
                                   cwd=tmp_path))
    assert "'dt' is 1e+39" in message and not (tmp_path / "o").exists()


# --- hostile initial-state files ----------------------------------------------------------

def _state_scene(folder: Path, extra: str = "") -> None:
    (folder / "s.yaml").write_text(SCENE.replace("k.py:k}", "k.py:k, params: {s: 1.0}}")
                                   + f"initial: {{type: file, path: start.npz{extra}}}\n")


def test_a_lying_npz_header_is_refused_without_reading(scene_dir: Path) -> None:
    forged_npz(scene_dir / "start.npz", (10**12, 2), stored=128)
    _state_scene(scene_dir)
    message = one_paragraph(simrun("check", "s.yaml", cwd=scene_dir))
    assert message.startswith("error: s.yaml:6:29: cannot read initial state from "
                              "'start.npz': its array 'x.npy' claims shape (1000000000000, 2) "
                              "of float64 (16,000,000,000,000 bytes) but the archive stores "
                              "128 bytes for it"), message


def test_a_bomb_header_is_refused_before_inflating(scene_dir: Path) -> None:
    """The member declares the 1.6 GB its header claims but holds 16 bytes: anything that
    inflated it would fail on the stream (EOF, CRC), so the shape message proves that only
    the header was read."""
    shape = (10**8, 2)
    forged_npz(scene_dir / "start.npz", shape, stored=16, declared=claimed_size(shape))
    _state_scene(scene_dir)
    message = one_paragraph(simrun("check", "s.yaml", cwd=scene_dir))
    assert message.startswith("error: s.yaml:6:29: 'start.npz' holds positions of shape "
                              "(100000000, 2) but the scene needs 3 particles in 2-D"), message


def test_a_real_deflate_bomb_is_refused_at_once(scene_dir: Path) -> None:
    deflate_bomb(scene_dir / "start.npz", 4_000_000)  # 64 MB inflated, ~60 KB on disk
    assert (scene_dir / "start.npz").stat().st_size < 200_000
    _state_scene(scene_dir)
    message = one_paragraph(simrun("check", "s.yaml", cwd=scene_dir))
    assert "holds positions of shape (4000000, 2) but the scene needs 3" in message


@pytest.mark.parametrize(("shape", "frame", "expected"), [
    ((3, 2), 5, "'initial.frame' is 5 but 'start.npz' holds 1 frame. Use 0 (or -1)"),
    ((4, 3, 2), 5, "'initial.frame' is 5 but 'start.npz' holds 4 frames. Use 0 to 3"),
    ((4, 3, 2), -5, "'initial.frame' is -5 but 'start.npz' holds 4 frames"),
])
def test_a_frame_the_file_does_not_hold_exits_2(scene_dir: Path, shape, frame: int,
                                                expected: str) -> None:
    import numpy as np

    np.savez(scene_dir / "start.npz", x=np.random.default_rng(0).random(shape))
    _state_scene(scene_dir, f", frame: {frame}")
    message = one_paragraph(simrun("check", "s.yaml", cwd=scene_dir))
    assert message.startswith(f"error: s.yaml:6:47: {expected}"), message


@pytest.mark.parametrize(("declared", "expected"), [
    (True, "'fields.cue_v' has shape (100000000,) but the module allocates shape (2,)"),
    (False, "cannot read 'cue.npz': its array 'cue_v.npy' claims shape (100000000,)"),
])
def test_a_fields_file_is_read_header_first(tmp_path: Path, declared: bool,
                                            expected: str) -> None:
    """The billiards cue's start velocity from a bomb (honest about the 800 MB it claims,
    holding 8 bytes) or a lying file: refused from the header, naming the scene's line."""
    shape = (10**8,)
    forged_npz(tmp_path / "cue.npz", shape, stored=8, name="cue_v",
               declared=claimed_size(shape) if declared else None)
    scenes = REPO / "scenes"
    text = (scenes / "billiards.yaml").read_text().replace(
        "initial: {type: file, path: billiards_rack.xyz}",
        f"initial: {{type: file, path: {scenes}/billiards_rack.xyz}}\nfields: {{cue_v: cue.npz}}")
    (tmp_path / "b.yaml").write_text(text.replace("kernels/billiards.py",
                                                  f"{REPO}/kernels/billiards.py"))
    message = one_paragraph(simrun("check", "b.yaml", "--allow-outside", cwd=tmp_path))
    assert message.startswith("error: b.yaml:13:") and expected in message, message


def test_a_device_is_not_a_regular_file(scene_dir: Path) -> None:
    (scene_dir / "s.yaml").write_text(SCENE.replace("k.py:k}", "k.py:k, params: {s: 1.0}}")
                                      + "initial: {type: file, path: /dev/zero}\n")
    message = one_paragraph(simrun("check", "s.yaml", cwd=scene_dir))
    assert "initial state file '/dev/zero' is not a regular file" in message
    assert "does not exist" not in message


# --- sweeps, usage errors, long keys ---------------------------------------------------------

@pytest.mark.parametrize(("args", "count"), [
    (["--sweep", "dt=logspace(0,1,100000000)"], 100_000_000),
    (["--sweep", "dt=range(0,1,1e-9)"], 1_000_000_000),
    (["--sweep", "dt=linspace(1e-5,2e-5,100000)", "--sweep", "seed=range(1000)"],
     100_000_000),
    (["--sweep", "dt=1e-5,2e-5", "--samples", "100000000"], 100_000_000),
])
def test_a_huge_sweep_is_counted_and_refused_at_once(tmp_path: Path, args: list[str],
                                                      count: int) -> None:
    """Counted before a point is made: the points alone would take at least an empty dict
    each (count x 64 bytes: 6.4 GB here), and the refusing process peaks at an eighth of
    that at most (about 63 MB on Linux)."""
    done, peak = simrun_measured("batch", GRAVITY, *args, "--out", "b", cwd=tmp_path)
    message = one_paragraph(done)
    assert f"the sweep makes {count:,} jobs, more than a batch runs" in message
    assert peak < count * sys.getsizeof({}) / 8, f"peak memory {peak:,} bytes"
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(("args", "expected"), [
    (["batch", GRAVITY, "--sweep", "dt=1e-5", "--retries", "-1"],
     "error: --retries -1: must be at least 0. See 'simrun batch --help'."),
    (["batch", GRAVITY, "--sweep", "dt=1e-5", "--samples", "-1"],
     "error: --samples -1: must be at least 1. See 'simrun batch --help'."),
    (["grad", PROJECTILE, "--wrt", "dt", "--checkpoints", "-1"],
     "error: --checkpoints -1: must be at least 0. See 'simrun grad --help'."),
    (["run", GRAVITY, "--threads=0"], "error: --threads 0: must be at least 1. See 'simrun "
                                      "run --help'."),
    (["run", GRAVITY, "--max-drift", "-1"], "error: --max-drift -1: must be at least 0"),
    (["run", GRAVITY, "--steps", "many"], "error: --steps many: must be a whole number."),
    (["run", GRAVITY, "--stepz", "3"], "error: No such option: --stepz"),
])
def test_usage_errors_are_one_paragraph(tmp_path: Path, args: list[str], expected: str) -> None:
    assert one_paragraph(simrun(*args, cwd=tmp_path)).startswith(expected)


@pytest.mark.parametrize("command", ["grad", "check"])
def test_a_long_wrt_key_is_not_echoed(tmp_path: Path, command: str) -> None:
    key = "energy.0.params." + "x" * 5000
    message = one_paragraph(simrun(command, PROJECTILE, "--wrt", key, cwd=tmp_path))
    assert "(5,016 characters): not a differentiable key of this scene" in message


# --- a full disk in every job ---------------------------------------------------------------

JOBS = {
    # case: (tmpfs size, the command's arguments before --out DIR)
    "optimize_no_record": ("8k", ["optimize", PROJECTILE, "--iterations", "3", "--no-render"]),
    "optimize_best_yaml": ("20k", ["optimize", PROJECTILE, "--iterations", "3",
                                   "--no-render"]),
    "optimize_pictures": ("64k", ["optimize", PROJECTILE, "--iterations", "3"]),
    "grad_no_record": ("8k", ["grad", PROJECTILE, "--wrt", "dt"]),
    "grad_scene_yaml": ("20k", ["grad", PROJECTILE, "--wrt", "dt"]),
    "grad_pictures": ("28k", ["grad", PROJECTILE, "--wrt", "dt"]),
    "run_no_record": ("8k", ["run", GRAVITY, "--steps", "50", "-q", "--no-render"]),
    "batch_summary": ("64k", ["batch", GRAVITY, "--sweep", "dt=1e-5,2e-5", "--set", "steps=50",
                              "--workers", "1", "-q", "--no-render"]),
}


def _follow(message: str, args: list[str], cwd: Path) -> None:
    """Do what the message says once there is room: resume, or delete and run again."""
    resume = re.search(r"continue with 'simrun resume (\S+)'", message)
    delete = re.search(r"delete (\S+) \(it holds no job that can be resumed\) and run the "
                       r"same command again", message)
    assert resume or delete or "run the same command again" in message, message
    if resume:
        done = simrun("resume", resume.group(1), cwd=cwd)
    else:
        if delete:
            shutil.rmtree(delete.group(1))
        done = simrun(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("case", sorted(JOBS))
def test_a_full_disk_is_one_paragraph_exit_1_and_the_advice_works(
        tmp_path: Path, small_disk, case: str) -> None:  # noqa: F811
    mnt, resize = small_disk
    size, args = JOBS[case]
    resize(size)
    args = [*args, "--out", str(mnt / "o")]
    done = simrun(*args, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]  # a batch first lists its failed jobs
    assert last.startswith("error: ") and "(No space left on device)" in last, last
    assert len(last) < 600 and "Free some space, then " in last
    others = done.stderr.strip().splitlines()[:-1]  # progress notes, a batch's failed jobs
    assert not [line for line in others if line.startswith("error")], done.stderr
    resize("16m")
    _follow(last, args, tmp_path)


def test_a_value_an_optimiser_pushes_past_the_precision_is_one_paragraph(tmp_path: Path) -> None:
    """Scene values are checked at load; one the job computes (here an SGD step of 1e60 on
    dt, in f32) reaches a kernel argument mid-run: exit 1 with one paragraph, no traceback."""
    (tmp_path / "s.yaml").write_text(
        "version: 2\nprecision: f32\nparticles: {count: 3, dim: 2}\n"
        "initial: {type: random, low: [0, 0], high: [1, 1]}\n"
        f"energy: [{{kernel: {REPO}/kernels/gravity.py:gravity, "
        "params: {strength: 1.0, softening: 0.1}}]\ndt: 1e-3\nsteps: 20\n"
        "objective: {builtin: kinetic, at: end}\n"
        "optimize: {parameters: [dt], optimizer: sgd, lr: 1e60, iterations: 3}\n")
    done = simrun("optimize", "s.yaml", "--out", "o", "--no-render", "--allow-outside", "-q",
                  cwd=tmp_path)
    message = one_paragraph(done, code=1)
    assert "argument 'h' (f32)" in message and "beyond the largest f32" in message
    assert "precision: f64" in message
