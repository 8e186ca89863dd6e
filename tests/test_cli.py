"""The command line through a real subprocess: outputs, exit codes, messages, interrupt+resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gate_helpers import gated_scene, open_gate, wait_until_held
from PIL import Image
from run_outputs import PICTURES, check_run_dir

REPO = Path(__file__).resolve().parents[1]
GRAVITY = str(REPO / "scenes" / "gravity.yaml")


def simrun(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_version_and_help(tmp_path: Path) -> None:
    version = simrun("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == "simrun 0.1.0"
    helped = simrun("--help", cwd=tmp_path)
    assert helped.returncode == 0
    for text in ("run", "check", "render", "scenes/gravity.yaml", "Exit status"):
        assert text in helped.stdout
    bare = simrun(cwd=tmp_path)  # no command: the same help, exit 2
    assert bare.returncode == 2 and "Commands" in bare.stdout + bare.stderr
    run_help = simrun("run", "--help", cwd=tmp_path)
    for text in ("--resume", "--set", "--steps N", "--out DIR", "--seed S", "energy.csv",
                 "animation.gif", "Examples"):
        assert text in run_help.stdout, text


def test_run_gravity_writes_everything(tmp_path: Path) -> None:
    done = simrun("run", GRAVITY, "--steps", "400", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    info = check_run_dir(out, name="gravity", steps=400, every=100, n=8, dim=2, max_drift=1e-4)
    assert info["seed"] == 0
    # the summary: steps, wall time, energy drift, where the outputs are
    summary = done.stdout
    assert re.search(r"done gravity: 400 steps in \d+\.\d\d s", summary), summary
    assert re.search(r"relative drift [+-]\d\.\d{3}e[+-]\d\d", summary), summary
    assert f"outputs   out{os.sep}" in summary and "animation.gif" in summary
    assert "pictures  drawn in" in summary
    assert "steps/s" not in done.stderr  # no bar without a terminal: progress.log has it
    assert "400/400 steps (100%)" in (out / "progress.log").read_text()


def test_summary_says_when_energy_is_not_conserved(tmp_path: Path) -> None:
    done = simrun("run", GRAVITY, "--steps", "50", "--set", "integrator.damping=5",
                  "--out", "o", "--no-render", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "not expected to be conserved" in done.stdout
    assert "pictures" not in done.stdout


def test_default_output_folders_are_numbered(tmp_path: Path) -> None:
    for expected in ("run-001", "run-002"):
        done = simrun("run", GRAVITY, "--steps", "50", "--quiet", "--no-render", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(Path("outputs") / "gravity" / expected)
    assert (tmp_path / "outputs" / "gravity" / "run-002" / "frames.npz").is_file()
    resumed = simrun("run", GRAVITY, "--steps", "80", "--resume", "-q", "--no-render",
                     cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == str(Path("outputs") / "gravity" / "run-002")


def test_existing_output_needs_overwrite(tmp_path: Path) -> None:
    args = ("run", GRAVITY, "--steps", "20", "--out", "o", "-q", "--no-render")
    assert simrun(*args, cwd=tmp_path).returncode == 0
    again = simrun(*args, cwd=tmp_path)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    assert simrun(*args, "--overwrite", cwd=tmp_path).returncode == 0


BAD_SCENES = {
    "unknown_key": ("version: 1\nparticles: {count: 2}\ndt: 1e-3\nsteps: 1\nsteps_: 2\n",
                    "bad.yaml:5:1: unknown key 'steps_'"),
    "wrong_type": ("version: 1\nparticles: {count: two}\n", "bad.yaml:2:20: 'particles.count' "
                                                            "must be an integer"),
    "out_of_range": ("version: 1\nparticles: {count: 2}\ndt: 0\n", "bad.yaml:3:5: 'dt' is 0"),
    "missing_module": ("version: 1\nparticles: {count: 2}\ndt: 1e-3\nsteps: 1\n"
                       "energy: [{kernel: kernels/none.py:k}]\n",
                       "bad.yaml:5:19: kernel module 'kernels/none.py' was not found"),
    "syntax": ("version: 1\nparticles: [count: 2\n", "bad.yaml:3:1: YAML syntax error"),
    "missing_state_file": ("version: 1\nparticles: {count: 2}\ndt: 1e-3\nsteps: 1\n"
                           "initial: {type: file, path: start.npz}\n",
                           "bad.yaml:5:29: initial state file"),
    "unknown_kernel_param": ("version: 1\nparticles: {count: 2}\ndt: 1e-3\nsteps: 1\nenergy:\n"
                             f"  - kernel: {REPO / 'kernels' / 'gravity.py'}:gravity\n"
                             "    params: {sofening: 1}\n",
                             "bad.yaml:7:14: parameter 'sofening' is not an argument"),
}
HINTS = {"unknown_key": "Did you mean 'steps'?", "unknown_kernel_param": "Did you mean 'softening'?"}


@pytest.mark.parametrize("case", sorted(BAD_SCENES))
def test_bad_scene_exits_2_with_location(tmp_path: Path, case: str) -> None:
    text, expected = BAD_SCENES[case]
    (tmp_path / "bad.yaml").write_text(text)
    for command in ("run", "check"):
        done = simrun(command, "bad.yaml", "--allow-outside", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"error: {expected}")
        assert HINTS.get(case, "") in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1  # one paragraph, no traceback
    assert not (tmp_path / "outputs").exists()  # validated before anything is written


def test_missing_scene_file_exits_2(tmp_path: Path) -> None:
    done = simrun("run", "nope.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "nope.yaml: scene file not found" in done.stderr


def test_bad_override_exits_2(tmp_path: Path) -> None:
    done = simrun("run", GRAVITY, "--set", "dt=-1", cwd=tmp_path)
    assert done.returncode == 2 and "--set dt=-1 (command line): 'dt' is -1" in done.stderr
    assert "Traceback" not in done.stderr


def test_kernel_compile_error_exits_2_at_the_kernel_line(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(
        "import simrun.lang as ti\n\n\n@ti.kernel\n"
        "def bad(x: ti.template(), U: ti.template()):\n"
        "    for i in x:\n"
        "        U[None] += no_such_function(x[i])\n")
    (tmp_path / "s.yaml").write_text("version: 1\nparticles: {count: 2}\ndt: 1e-3\nsteps: 2\n"
                                     "energy: [{kernel: k.py:bad}]\n")
    done = simrun("check", "s.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "k.py:7" in done.stderr and "Traceback" not in done.stderr


def test_nan_exits_1_naming_the_step(tmp_path: Path) -> None:
    scene = str(REPO / "scenes" / "molecule.yaml")
    done = simrun("run", scene, "--set", "dt=0.5", "--steps", "3000", "--out", "o",
                  "--no-render", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "simulation failed: step " in done.stderr and "NaN or infinite" in done.stderr
    assert "Traceback" not in done.stderr
    info = json.loads((tmp_path / "o" / "run.json").read_text())
    assert info["status"] == "failed"
    with np.load(tmp_path / "o" / "frames.npz") as frames:
        assert np.isfinite(frames["x"]).all()


def test_check_compiles_without_writing(tmp_path: Path) -> None:
    done = simrun("check", str(REPO / "scenes" / "mpm.yaml"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout and "p2g" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_exits_130_and_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    # The run waits at a closed gate from its 2000th energy evaluation (tests/gate_helpers.py):
    # mid-way at Ctrl-C on any machine. The resumed and the uninterrupted run then both stop
    # at a total a little past the interruption.
    scene = str(gated_scene("gravity", tmp_path, tmp_path / "gate", hold_after=2000))
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.Popen([sys.executable, "-m", "simrun.cli", "run", scene, "--steps",
                             "100000", "--no-render", "--out", "cut", "-q"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_held(tmp_path / "gate", proc)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "continue with 'simrun resume cut'" in err
    assert "Traceback" not in err
    info = json.loads((tmp_path / "cut" / "run.json").read_text())
    assert info["status"] == "interrupted" and 0 < info["steps_done"] < 100000
    with np.load(tmp_path / "cut" / "frames.npz") as frames:
        assert len(frames["step"]) >= 1 and frames["step"][-1] <= info["steps_done"]
    open_gate(tmp_path / "gate")
    total = str(info["steps_done"] + 1050)  # not on the output cadence: the last frame too
    steps = ("--steps", total, "--no-render")
    resumed = simrun("run", scene, *steps, "--out", "cut", "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    whole = simrun("run", scene, *steps, "--out", "whole", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    with np.load(tmp_path / "cut" / "frames.npz") as a, \
            np.load(tmp_path / "whole" / "frames.npz") as b:
        assert a["step"][-1] == int(total)
        for key in ("step", "time", "x", "v"):
            assert np.array_equal(a[key], b[key]), key
    for name in ("energy.csv", "trajectory.xyz", "state.npz"):
        assert (tmp_path / "cut" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


def test_render_command(tmp_path: Path) -> None:
    missing = simrun("render", "nowhere", cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere: not found" in missing.stderr
    assert simrun("run", GRAVITY, "--steps", "200", "--out", "r", "--no-render",
                  cwd=tmp_path).returncode == 0
    assert not PICTURES & {p.name for p in (tmp_path / "r").iterdir()}
    done = simrun("render", "r", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(Path(line).name for line in done.stdout.split()) == sorted(PICTURES)
    for name in PICTURES:
        with Image.open(tmp_path / "r" / name) as im:
            assert im.width >= 300 and im.height >= 300
