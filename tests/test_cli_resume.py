"""Issue 19, items 2-4, through the real CLI: `simrun resume DIR` continues a job from its
folder alone (the command Ctrl-C prints, run as printed), a folder keeps the kernel sources
that ran (hashed; a resume with edited physics is refused and says what changed), and a
folder moved away from its checkout resumes and re-renders."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gate_helpers import open_gate, term, wait_until_held, write_gate
from test_cli import simrun

# A harmonic trap plus a tiny term whose inner loop makes a step cost the same on any
# stepper, so that a run is still going when the test stops it (and a resume is short).
KERNEL = '''import simrun.lang as ti


@ti.kernel
def trap(x: ti.template(), U: ti.template(), work: ti.i32):
    for i in x:
        s = 0.0
        for k in range(work):
            s += ti.cos(x[i][0] * 1e-3 * k)
        U[None] += 0.5 * x[i].norm_sqr() + 1e-9 * s
'''
SCENE = """version: 1
particles: {count: 2}
initial: {type: file, path: start.npz}
dt: 1e-3
steps: 100
energy: [{kernel: kernels/slow.py:trap, params: {work: 4000}}]
objective: {builtin: total, at: end}
outputs: {every: 25}
"""
STOP_LINE = re.compile(r"continue with '([^']+(?:'[^']*'[^']*)*)'")


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """tmp/src/{slow.yaml, kernels/slow.py, start.npz}: a scene outside the repository."""
    src = tmp_path / "src"
    (src / "kernels").mkdir(parents=True)
    (src / "kernels" / "slow.py").write_text(KERNEL)
    (src / "slow.yaml").write_text(SCENE)
    np.savez(src / "start.npz", x=np.array([[0.3, 0.1], [-0.2, 0.4]]),
             v=np.array([[0.0, 0.5], [0.1, 0.0]]))
    return src


def _interrupt(args: list[str], cwd: Path) -> str:
    """Start `simrun ARGS` on a gated scene (``_gated``), send Ctrl-C once it waits at the
    gate, so provably mid-way; open the gate; return stderr (exit 130)."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.Popen([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until_held(cwd / "gate", proc)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    open_gate(cwd / "gate")
    return err


def _gated(project: Path, hold_after: int) -> str:
    """project/gated.yaml: slow.yaml plus the gate term of tests/gate_helpers.py (energy.1),
    waiting from its ``hold_after + 1``-th evaluation while project/gate exists."""
    write_gate(project / "kernels", project / "gate")
    (project / "gated.yaml").write_text(SCENE.replace(
        "params: {work: 4000}}]", f"params: {{work: 4000}}}}, {term('kernels/gate.py', hold_after)}]"))
    return str(project / "gated.yaml")


def _printed_command(err: str) -> list[str]:
    match = STOP_LINE.search(err)
    assert match, err
    argv = shlex.split(match.group(1))
    assert argv[0] == "simrun", argv
    return argv[1:]


def _same_frames(a: Path, b: Path) -> None:
    with np.load(a / "frames.npz") as fa, np.load(b / "frames.npz") as fb:
        for key in ("step", "time", "x", "v"):
            assert np.array_equal(fa[key], fb[key]), key
    assert (a / "energy.csv").read_bytes() == (b / "energy.csv").read_bytes()


def test_ctrl_c_prints_a_resume_command_that_works_with_steps_and_set(project: Path) -> None:
    # --steps and --set dt differ from the scene: the old printed command ('simrun run SCENE
    # --resume --out DIR') failed with "the scene differs ... dt" / "already reached step"
    scene = _gated(project, hold_after=1000)  # held past step 500 of 1200
    options = ["--steps", "1200", "--set", "dt=2e-3", "--no-render", "-q"]
    err = _interrupt(["run", scene, *options, "--out", "cut"], project)
    info = json.loads((project / "cut" / "run.json").read_text())
    assert info["status"] == "interrupted" and info["steps_done"] < 1200
    again = simrun(*_printed_command(err), cwd=project)
    assert again.returncode == 0, again.stderr
    whole = simrun("run", scene, *options, "--out", "whole", cwd=project)
    assert whole.returncode == 0, whole.stderr
    _same_frames(project / "cut", project / "whole")
    assert not {"first.png", "animation.gif"} & {p.name for p in (project / "cut").iterdir()}
    # --resume on the command stays; a finished run is extended with --steps
    more = simrun("run", scene, "--steps", "1600", "--set", "dt=2e-3", "--no-render", "-q",
                  "--resume", "--out", "whole", cwd=project)
    assert more.returncode == 0, more.stderr
    extended = simrun("resume", "cut", "--steps", "1600", "-q", cwd=project)
    assert extended.returncode == 0, extended.stderr
    _same_frames(project / "cut", project / "whole")


def test_grad_stopped_by_ctrl_c_resumes_from_its_folder(project: Path) -> None:
    scene = _gated(project, hold_after=1000)  # held in the sweeps (1200 steps)
    options = ["--wrt", "dt", "--wrt", "state.x0", "--steps", "1200", "--set", "dt=2e-3"]
    err = _interrupt(["grad", scene, *options, "--out", "g"], project)
    assert json.loads((project / "g" / "gradients.json").read_text())["status"] == "running"
    again = simrun(*_printed_command(err), cwd=project)
    assert again.returncode == 0, again.stderr
    whole = simrun("grad", scene, *options, "--out", "w", cwd=project)
    assert whole.returncode == 0, whole.stderr
    got, want = (json.loads((project / d / "gradients.json").read_text()) for d in "gw")
    assert got["status"] == "done" and got["gradients"] == want["gradients"]
    assert got["objective"] == want["objective"] and got["steps"] == 1200
    digest = hashlib.sha256((project / "kernels" / "slow.py").read_bytes()).hexdigest()
    assert [s["sha256"] for s in got["sources"] if s["copy"] == "kernels/slow.py"] == [digest]
    done = simrun("resume", "g", cwd=project)
    assert done.returncode == 0 and "complete" in done.stdout, done.stderr
    copy = project / "g" / "kernels" / "slow.py"
    copy.write_text(copy.read_text().replace("0.5 * x[i]", "0.6 * x[i]"))
    edited = simrun("resume", "g", "--steps", "1200", cwd=project)
    assert edited.returncode == 2, edited.stderr
    assert "g/kernels/slow.py: line 10 changed (in kernel 'trap')" in edited.stderr
    assert "'simrun resume g --allow-changed'" in edited.stderr


def test_optimize_and_batch_folders_resume(project: Path, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[1]
    for folder in ("scenes", "kernels"):  # a copy, to edit a kernel below
        shutil.copytree(repo / folder, tmp_path / "repo" / folder)
    scene = str(tmp_path / "repo" / "scenes" / "projectile.yaml")
    common = ["--set", "optimize.tolerance=0", "--no-render"]
    short = simrun("optimize", scene, "--iterations", "3", *common, "--out", "o", cwd=tmp_path)
    assert short.returncode == 0, short.stderr
    resumed = simrun("resume", "o", "--iterations", "6", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "replayed" in resumed.stdout
    whole = simrun("optimize", scene, "--iterations", "6", *common, "--out", "w", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    got, want = (np.loadtxt(tmp_path / d / "loss.csv", delimiter=",", skiprows=1)[:, :3]
                 for d in "ow")
    assert np.array_equal(got, want)
    recorded = json.loads((tmp_path / "o" / "optimize.json").read_text())
    assert recorded["options"]["no_render"] is True and recorded["sources"]
    assert not (tmp_path / "o" / "episode").exists()  # --no-render was kept
    targets = tmp_path / "repo" / "kernels" / "targets.py"
    targets.write_text(targets.read_text().replace("0.5 * ((x[p][0]", "0.7 * ((x[p][0]"))
    changed = simrun("optimize", scene, "--iterations", "7", *common, "--out", "o", "--resume",
                     cwd=tmp_path)
    assert changed.returncode == 2 and "targets.py: line 14 changed (in kernel 'miss')" in \
        changed.stderr, changed.stderr

    batch = simrun("batch", str(project / "slow.yaml"), "--sweep", "dt=1e-3,2e-3", "--set",
                   "steps=50", "--set", "energy.0.params.work=10", "--workers", "1",
                   "--no-render", "--out", "b", "-q", cwd=tmp_path, timeout=300)
    assert batch.returncode == 0, batch.stderr
    shutil.rmtree(tmp_path / "b" / "run-001")  # as if the batch had stopped before it
    (tmp_path / "b" / ".batch" / "run-001.json").unlink()
    again = simrun("resume", "b", "--workers", "1", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "2 of 2 jobs done (1 already done before)" in again.stdout
    assert (tmp_path / "b" / "run-001" / "frames.npz").is_file()


def test_resume_refuses_edited_physics_and_says_what_changed(project: Path) -> None:
    scene, module = str(project / "slow.yaml"), project / "kernels" / "slow.py"
    first = simrun("run", scene, "--steps", "50", "--set", "energy.0.params.work=10", "--out",
                   "r", "--no-render", "-q", cwd=project)
    assert first.returncode == 0, first.stderr
    run = project / "r"
    info = json.loads((run / "run.json").read_text())
    digest = hashlib.sha256(module.read_bytes()).hexdigest()
    assert info["sources"][0] == {"copy": "kernels/slow.py", "original": str(module),
                                  "sha256": digest}
    assert (run / "kernels" / "slow.py").read_text() == KERNEL
    module.write_text(KERNEL.replace("0.5 * x[i]", "0.6 * x[i]"))  # line 10, in trap
    more = ["--steps", "100", "--set", "energy.0.params.work=10", "--out", "r", "--no-render"]
    refused = simrun("run", scene, *more, "--resume", cwd=project)
    assert refused.returncode == 2, refused.stderr
    assert "physics changed" in refused.stderr and "slow.py: line 10 changed (in kernel 'trap')" \
        in refused.stderr and "--allow-changed" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert json.loads((run / "run.json").read_text())["steps_done"] == 50  # untouched
    # the folder's own copy is the physics that ran: resume uses it, the edit does not matter
    (project / "keep").mkdir()
    shutil.copytree(run, project / "keep" / "r")
    kept = simrun("resume", "keep/r", "--steps", "100", "-q", cwd=project)
    assert kept.returncode == 0, kept.stderr
    # --allow-changed continues with the new code and records the change
    allowed = simrun("run", scene, *more, "--resume", "--allow-changed", "-q", cwd=project)
    assert allowed.returncode == 0, allowed.stderr
    info = json.loads((run / "run.json").read_text())
    assert "line 10 changed" in info["resumes"][-1]["changed"][0]
    assert info["sources"][0]["sha256"] == hashlib.sha256(module.read_bytes()).hexdigest()
    assert (run / "kernels" / "slow.py").read_text() == module.read_text()
    # an edited copy in the folder is refused too, naming its line and kernel (the text
    # that ran is kept in .sources/) and the way on, not the command that was refused
    copy = project / "keep" / "r" / "kernels" / "slow.py"
    copy.write_text(copy.read_text().replace("0.5 * x[i]", "0.7 * x[i]"))
    edited = simrun("resume", "keep/r", "--steps", "150", cwd=project)
    assert edited.returncode == 2, edited.stderr
    assert "keep/r/kernels/slow.py: line 10 changed (in kernel 'trap')" in edited.stderr
    assert "'simrun resume keep/r --allow-changed'" in edited.stderr
    assert "('simrun resume keep/r')" not in edited.stderr
    onward = simrun("resume", "keep/r", "--steps", "150", "--allow-changed", "-q", cwd=project)
    assert onward.returncode == 0, onward.stderr
    info = json.loads((project / "keep" / "r" / "run.json").read_text())
    assert "line 10 changed (in kernel 'trap')" in info["resumes"][-1]["changed"][0]


def test_a_moved_folder_resumes_and_renders_without_its_checkout(project: Path,
                                                                tmp_path: Path) -> None:
    scene = str(project / "slow.yaml")
    args = ["--set", "energy.0.params.work=10", "--no-render", "-q"]
    for out, steps in (("first", "40"), ("whole", "80")):
        done = simrun("run", scene, "--steps", steps, *args, "--out", out, cwd=project)
        assert done.returncode == 0, done.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(project / "first", elsewhere / "run")
    shutil.copytree(project / "first", elsewhere / "run2")
    shutil.copytree(project / "whole", elsewhere / "whole")
    shutil.rmtree(project)  # the checkout, its kernels and its start file are gone
    by_option = simrun("run", "run2/scene.yaml", "--steps", "80", "--resume", "--out", "run2",
                       "-q", "--no-render", cwd=elsewhere)
    assert by_option.returncode == 0, by_option.stderr
    resumed = simrun("resume", "run", "--steps", "80", cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    _same_frames(elsewhere / "run", elsewhere / "whole")
    _same_frames(elsewhere / "run2", elsewhere / "whole")
    saved = (elsewhere / "run" / "scene.yaml").read_text()
    assert "kernel: kernels/slow.py:trap" in saved and "path: inputs/start.npz" in saved
    drawn = simrun("render", "run", cwd=elsewhere)
    assert drawn.returncode == 0, drawn.stderr
    assert (elsewhere / "run" / "animation.gif").is_file()
    again = simrun("run", "run/scene.yaml", "--steps", "10", "--out", "fresh", "-q",
                   "--no-render", cwd=elsewhere)
    assert again.returncode == 0, again.stderr


def test_resume_of_a_folder_with_no_job(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for folder in ("empty", "missing"):
        done = simrun("resume", folder, cwd=tmp_path)
        assert done.returncode == 2 and "nothing to resume" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_an_unreadable_record_is_one_clear_error_and_not_advised(tmp_path: Path) -> None:
    from simrun.outputs.resumable import how_to_continue

    folder = tmp_path / "run-001"
    folder.mkdir()
    (folder / "scene.yaml").write_text("version: 1\n")
    (folder / "run.json").write_text('{"status": "ru')  # cut short
    (folder / "batch.json").write_text("{}")  # readable, but not the record resume reads
    done = simrun("resume", "run-001", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "run.json: cannot resume: the record cannot be read" in done.stderr
    # the advice a full disk prints never names a command that then fails like this
    assert "simrun resume" not in how_to_continue(folder)
    (folder / "run.json").write_text('{"status": "interrupted"}')
    assert "simrun resume" in how_to_continue(folder)
