"""Issue 19, items 8 and 10, through the real CLI: an output folder that cannot be written
is one paragraph and exit 2 (run, resume, render), and `--debug` turns on the engine's bounds
checks so an out-of-range read in a scene's kernel is exit 2 naming kernel, field, index
and line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import GRAVITY, simrun
from test_cli_reliability import one_paragraph


@pytest.fixture()
def read_only(tmp_path: Path):
    """A function that makes a folder read-only: as root (which ignores permissions) a
    tmpfs mounted read-only over it, else chmod 555. Returns the reason shown by the OS."""
    mounted: list[Path] = []

    def make(folder: Path) -> str:
        if os.geteuid() != 0:
            for path in [folder, *folder.rglob("*")]:
                path.chmod(0o555 if path.is_dir() else 0o444)
            return "Permission denied"
        if sys.platform != "linux":
            pytest.skip("needs Linux to mount a read-only tmpfs as root")
        keep = folder.with_name(folder.name + ".keep")
        shutil.copytree(folder, keep)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        shutil.copytree(keep, folder, dirs_exist_ok=True)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        return "Read-only file system"

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_unwritable_output_folders_are_exit_2_with_one_paragraph(tmp_path: Path,
                                                                  read_only) -> None:
    ro = tmp_path / "ro"
    (ro / "empty").mkdir(parents=True)
    made = simrun("run", GRAVITY, "--steps", "100", "--out", str(ro / "run"), "-q",
                  cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    reason = read_only(ro)

    fresh = one_paragraph(simrun("run", GRAVITY, "--steps", "100", "--out", "ro/empty", "-q",
                                 cwd=tmp_path))
    assert fresh.startswith("error: ro/empty: cannot write in this folder") and reason in fresh
    assert "--out" in fresh and "space" not in fresh  # not a full disk
    for resume in (["resume", "ro/run", "--steps", "200"],
                   ["run", GRAVITY, "--steps", "200", "--resume", "--out", "ro/run"]):
        message = one_paragraph(simrun(*resume, cwd=tmp_path))
        assert message.startswith("error: ro/run: cannot write in this folder"), message
        assert reason in message and "space" not in message
    drawn = one_paragraph(simrun("render", "ro/run", cwd=tmp_path))
    assert reason in drawn and "not what 'simrun run' writes" not in drawn
    (tmp_path / "rocwd").mkdir()
    read_only(tmp_path / "rocwd")
    default = one_paragraph(simrun("run", GRAVITY, "--steps", "100", cwd=tmp_path / "rocwd"))
    assert default.startswith("error: outputs/gravity: cannot use this folder") and \
        reason in default


CHAIN = """import simrun.lang as ti


@ti.kernel
def chain(x: ti.template(), U: ti.template()):
    for i in x:
        if i >= 0:  # under an if: for --debug to find (unguarded, it does not compile)
            U[None] += 0.5 * (x[i + 1] - x[i]).norm_sqr()
"""


@pytest.mark.parametrize("command", ["check", "run"])
def test_debug_finds_an_out_of_range_read_in_a_scene_kernel(tmp_path: Path,
                                                             command: str) -> None:
    # x[i + 1] reads past the last particle: without --debug that is other memory (here it
    # can corrupt the heap); with --debug it is exit 2 naming kernel, field, index and line
    (tmp_path / "k.py").write_text(CHAIN)
    (tmp_path / "s.yaml").write_text("version: 1\nparticles: {count: 4}\ndt: 1e-3\nsteps: 20\n"
                                     "energy: [{kernel: k.py:chain}]\n")
    done = simrun(command, "s.yaml", "--debug", *(["--out", "o"] if command == "run" else []),
                  cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    first, source = done.stderr.strip().splitlines()
    assert first.startswith(f"error: {tmp_path / 'k.py'}:8: in kernel 'chain': index (4,) is "
                            "out of range for field 'x' of shape (4,)"), first
    assert "x[i + 1]" in source
    assert not (tmp_path / "o").exists()  # found before anything was written


SHIFT = """import simrun.lang as ti


@ti.kernel
def shift(x: ti.template(), v: ti.template(), dt: float):
    for i in x:
        x[i] += dt * v[i]
        if i >= 0:  # under an if: for --debug to find (unguarded, it does not compile)
            v[i + 2] = v[i]
"""


def test_debug_finds_an_out_of_range_write_in_a_step_kernel(tmp_path: Path) -> None:
    # v[i + 2] writes past the last particle from i = 2: unchecked, that is other memory
    # (another field's values, or the heap); with --debug, exit 2 at the kernel's line
    (tmp_path / "k.py").write_text(SHIFT)
    (tmp_path / "e.py").write_text(CHAIN.replace("x[i + 1]", "x[i]"))  # in range
    (tmp_path / "s.yaml").write_text(
        "version: 1\nparticles: {count: 4}\ndt: 1e-3\nsteps: 20\n"
        "energy: [{kernel: e.py:chain}]\nstep_kernels: {kernels: [k.py:shift]}\n")
    done = simrun("run", "s.yaml", "--debug", "--out", "o", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    first, source = done.stderr.strip().splitlines()[-2:]  # after the progress bar
    assert first.startswith(f"error: {tmp_path / 'k.py'}:9: in kernel 'shift': index (4,) "), first
    assert "is out of range for field 'v' of shape (4,)" in first
    assert "v[i + 2] = v[i]" in source


@pytest.mark.parametrize("command", ["grad", "optimize", "batch"])
def test_debug_bounds_checks_grad_optimize_and_batch_too(tmp_path: Path, command: str) -> None:
    # the same out-of-range read as above, met by every other job's System under --debug
    (tmp_path / "k.py").write_text(CHAIN)
    (tmp_path / "s.yaml").write_text(
        "version: 1\nparticles: {count: 4}\ndt: 1e-3\nsteps: 20\n"
        "energy: [{kernel: k.py:chain}]\nobjective: {builtin: total, at: end}\n"
        "optimize: {parameters: [dt], iterations: 2}\n")
    extra = {"grad": ["--wrt", "dt"], "optimize": [], "batch": ["--sweep", "dt=1e-3",
                                                                  "--job", "grad", "--wrt", "dt",
                                                                  "--workers", "1"]}[command]
    done = simrun(command, "s.yaml", "--debug", "--out", "o", *extra, cwd=tmp_path)
    where = f"{tmp_path / 'k.py'}:8: in kernel 'chain': index (4,) is out of range"
    if command == "batch":  # a job's failure is its result: exit 1, the error in the summary
        assert done.returncode == 1, done.stderr
        assert where in (tmp_path / "o" / "summary.csv").read_text()
    else:
        assert done.returncode == 2, done.stderr
        assert where in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["check", "run"])
def test_an_unchecked_out_of_range_write_fails_the_job_and_never_records_ok(
        tmp_path: Path, command: str) -> None:
    # without --debug, v[i + 2] wrote past v into the C heap: run.json said "ok", then the
    # process died of heap corruption. The guard zone around each field takes the write,
    # and the job fails (exit 1) naming the field and --debug. check bounds-checks its
    # launches whatever --debug says: exit 2 at the kernel's line
    (tmp_path / "k.py").write_text(SHIFT)
    (tmp_path / "e.py").write_text(CHAIN.replace("x[i + 1]", "x[i]"))
    (tmp_path / "s.yaml").write_text(
        "version: 1\nparticles: {count: 4}\ndt: 1e-3\nsteps: 20\n"
        "energy: [{kernel: e.py:chain}]\nstep_kernels: {kernels: [k.py:shift]}\n")
    done = simrun(command, "s.yaml", *(["--out", "o", "-q"] if command == "run" else []),
                  cwd=tmp_path)
    if command == "check":
        assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
        assert f"{tmp_path / 'k.py'}:9: in kernel 'shift': index (4,) is out of range for " \
            "field 'v' of shape (4,)" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and "ok" not in done.stdout
        return
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    message = done.stderr.strip().splitlines()[-1]
    assert "a kernel wrote outside field 'v'" in message and "--debug" in message, message
    if command == "run":
        record = json.loads((tmp_path / "o" / "run.json").read_text())
        assert record["status"] == "failed" and "outside field 'v'" in record["error"]
