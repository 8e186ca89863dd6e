"""Issue 20's findings through the real CLI: inputs that gave tracebacks where the CLI promises
exit 2 and one paragraph, a full disk, a kill while drawing the pictures."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from gate_helpers import gated_scene, open_gate, wait_until_held
from PIL import Image
from run_outputs import PICTURES
from test_cli import GRAVITY, simrun

from simrun.scene.limits import machine_memory

KERNEL = "import simrun.lang as ti\n\n\n@ti.kernel\ndef k(x: ti.template(), U: ti.template()):\n" \
         "    for i in x:\n        U[None] += x[i].norm_sqr()\n"
SCENE = "version: 1\nparticles: {count: 3}\ndt: 1e-3\nsteps: 5\nenergy: [{kernel: k.py:k}]\n"


def one_paragraph(done: subprocess.CompletedProcess, code: int = 2, limit: int = 600) -> str:
    """The promise: exit ``code``, one short line on stderr, no traceback."""
    assert done.returncode == code, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr[-3000:]
    assert len(done.stderr) < limit, done.stderr[:limit]
    return done.stderr


@pytest.fixture()
def scene_dir(tmp_path: Path) -> Path:
    (tmp_path / "k.py").write_text(KERNEL)
    return tmp_path


BAD_TEXT = {
    # case: (scene text, expected start of the message after "error: ")
    "control_character": (SCENE.replace("steps: 5", "steps: 5\x01"), "s.yaml:4:9: character "
                          "#x0001 is not allowed in YAML"),
    "nul": (SCENE + "description: a\x00b\n", "s.yaml:6:15: character #x0000 is not allowed"),
    "deep_nesting": (SCENE + "description: " + "[" * 3000 + "]" * 3000 + "\n",
                     "s.yaml:6:77: the YAML is nested more than 64 levels deep"),
    "5000_digits": (SCENE.replace("steps: 5", "steps: " + "9" * 5000),
                    "s.yaml:4:8: this integer has 5,000 characters"),
    "int_beyond_float": (SCENE + "initial: {high: [1" + "0" * 400 + ", 1]}\n",
                         "s.yaml:6:18: this integer has 401 characters"),
    "count_beyond_memory": (SCENE.replace("count: 3", "count: 100000000000"),
                            "s.yaml:2:20: 'particles.count' is 100,000,000,000: a run of that "
                            "many 2-D particles needs at least 7,600.0 GB of memory"),
    "count_10_to_12": (SCENE.replace("count: 3", "count: 1000000000000"),
                       "s.yaml:2:20: 'particles.count' is 1,000,000,000,000"),
    "frames_beyond_memory": (SCENE.replace("steps: 5", "steps: 1000000000000\n"
                                           "outputs: {every: 1}"),
                             "s.yaml:5:18: saving 1,000,000,000,001 frames of 3 particles "
                             "needs at least"),
}


@pytest.mark.parametrize("case", sorted(BAD_TEXT))
def test_unreadable_or_oversized_scene_exits_2(scene_dir: Path, case: str) -> None:
    text, expected = BAD_TEXT[case]
    if "memory" in case and (machine_memory() or 0) > 7e12:
        pytest.skip("this machine has more than 7 TB of memory")
    (scene_dir / "s.yaml").write_bytes(text.encode())
    started = time.perf_counter()
    done = simrun("check", "s.yaml", cwd=scene_dir)
    assert one_paragraph(done).startswith(f"error: {expected}")
    assert time.perf_counter() - started < 30  # bounded up front, not after allocating


def _broken_npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=np.zeros((3, 2)))
    data = bytearray(buf.getvalue())
    data[60:90] = b"x" * 30  # inside x.npy's bytes: the CRC no longer matches
    return bytes(data)


@pytest.mark.parametrize(("content", "expected"), [
    (b"PK\x03\x04" + b"\0" * 100, "File is not a zip file"),  # zipfile.BadZipFile
    (_broken_npz(), "Bad CRC-32 for file 'x.npy'"),  # also BadZipFile
])
def test_corrupt_initial_state_file_exits_2(scene_dir: Path, content: bytes,
                                            expected: str) -> None:
    (scene_dir / "start.npz").write_bytes(content)
    (scene_dir / "s.yaml").write_text(SCENE + "initial: {type: file, path: start.npz}\n")
    message = one_paragraph(simrun("check", "s.yaml", cwd=scene_dir))
    assert message.startswith("error: s.yaml:6:29: cannot read initial state from 'start.npz'")
    assert expected in message


def test_single_npy_array_as_initial_state_exits_2(scene_dir: Path) -> None:
    np.save(scene_dir / "start.npy", np.zeros((3, 2)))
    (scene_dir / "start.npy").rename(scene_dir / "start.npz")
    (scene_dir / "s.yaml").write_text(SCENE + "initial: {type: file, path: start.npz}\n")
    message = one_paragraph(simrun("check", "s.yaml", cwd=scene_dir))
    assert "it is a single .npy array, not an .npz archive" in message


HUGE = "x" * 100_000


@pytest.mark.parametrize("override", [
    f"precision={HUGE}", f"name={HUGE}", f"energy.0.kernel={HUGE}.py:k",
    f"energy.0.kernel=k.py:{HUGE}",
    f"initial={{type: file, path: {HUGE}.npz}}", f"{HUGE}=1", f"description=[{HUGE}",
    f"energy.0.params.{HUGE}=1", f"initial.type={HUGE}", "particles.count=" + "9" * 4000,
])
def test_messages_do_not_echo_huge_values(scene_dir: Path, override: str) -> None:
    (scene_dir / "s.yaml").write_text(SCENE)
    one_paragraph(simrun("check", "s.yaml", "--set", override, cwd=scene_dir), limit=800)


def test_huge_value_in_the_file_is_not_echoed(scene_dir: Path) -> None:
    (scene_dir / "s.yaml").write_text(SCENE + f"precision: {HUGE}\n")
    message = one_paragraph(simrun("check", "s.yaml", cwd=scene_dir), limit=800)
    assert message.startswith("error: s.yaml:6:12: 'precision' is 'xxxx")
    assert "(100,000 characters)" in message


# --- a full disk --------------------------------------------------------------------------

def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here to fill a disk: {done.stderr.strip()}")


@pytest.fixture()
def small_disk(tmp_path: Path):
    """A folder on its own tmpfs (needs root and mount; the test is skipped elsewhere);
    yields a function that resizes it."""
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("needs root on Linux to mount a small tmpfs (a full disk)")
    mnt = tmp_path / "mnt"
    _mount_tmpfs(mnt, "8k")

    def resize(size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mnt)], check=True)

    yield mnt, resize
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("size", ["16k", "28k"])  # full at the first flush; at a later one
def test_disk_full_exits_1_and_resumes_once_there_is_room(tmp_path: Path, small_disk,
                                                          size: str) -> None:
    mnt, resize = small_disk
    resize(size)  # tmpfs counts whole 4 KB pages: 16k holds scene.yaml, run.json and the
    # kernel copy with its twin in .sources/ only
    out = mnt / "o"
    args = ["run", GRAVITY, "--steps", "600", "--set", "outputs.every=1", "--threads", "1",
            "--out", str(out)]
    message = one_paragraph(simrun(*args, "--no-render", "-q", cwd=tmp_path), code=1)
    assert message.startswith(f"error: {out}: cannot write ")
    assert "(No space left on device)" in message
    assert f"continue with 'simrun resume {out}'" in message
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "error" and "No space left on device" in info["error"]
    if info["saved_step"] is None:  # nothing saved: no frame files that claim otherwise
        assert not (out / "state.npz").exists()
    else:  # what is there is valid and agrees with run.json
        with np.load(out / "state.npz") as state, np.load(out / "frames.npz") as frames:
            assert int(state["step"]) == info["saved_step"]
            assert frames["step"][-1] >= info["saved_step"]
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]

    resize("16m")
    resumed = simrun(*args, "--resume", "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    whole = tmp_path / "whole"
    assert simrun(*args[:-1], str(whole), "--no-render", "-q", cwd=tmp_path).returncode == 0
    with np.load(out / "frames.npz") as a, np.load(whole / "frames.npz") as b:
        assert a["step"].tolist() == list(range(601))
        assert np.array_equal(a["x"], b["x"]) and np.array_equal(a["v"], b["v"])
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "ok" and info["error"] is None and info["saved_step"] == 600
    assert info["pictures"] == "done"


# --- killed while drawing the pictures ----------------------------------------------------

def test_kill_while_drawing_pictures_is_recorded_and_render_finishes_them(
        tmp_path: Path) -> None:
    # the run's pictures wait at a closed gate (tests/gate_helpers.py): it is provably
    # drawing when it is killed, on any machine
    gate = tmp_path / "gate"
    scene = str(gated_scene("gravity", tmp_path, gate, hold_after=10**9))
    Path(f"{gate}.draw").touch()
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.Popen([sys.executable, "-m", "simrun.cli", "run", scene, "--steps",
                             "2000", "--set", "outputs.every=10", "--out", "o", "-q"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until_held(Path(f"{gate}.draw"), proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    open_gate(Path(f"{gate}.draw"))
    assert proc.returncode == -signal.SIGKILL
    info = json.loads((tmp_path / "o" / "run.json").read_text())
    assert info["status"] == "ok" and info["steps_done"] == 2000  # the simulation finished
    assert info["pictures"] == "drawing"  # ... and its pictures did not

    done = simrun("render", "o", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = {p.name for p in (tmp_path / "o").iterdir()}
    assert PICTURES <= names and not [n for n in names if ".tmp" in n]
    with Image.open(tmp_path / "o" / "animation.gif") as gif:
        assert gif.n_frames == 60
    info = json.loads((tmp_path / "o" / "run.json").read_text())
    assert info["pictures"] == "done" and info["timings"]["render_s"] > 0
    assert info["status"] == "ok"


def test_run_json_says_pictures_were_skipped_or_done(tmp_path: Path) -> None:
    skipped = simrun("run", GRAVITY, "--steps", "20", "--out", "a", "-q", "--no-render",
                     cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    assert json.loads((tmp_path / "a" / "run.json").read_text())["pictures"] == "pending"
    assert simrun("render", "a", cwd=tmp_path).returncode == 0
    assert json.loads((tmp_path / "a" / "run.json").read_text())["pictures"] == "done"


# --- trust: a scene runs its kernel modules' Python -----------------------------------------

MARKING_KERNEL = KERNEL.replace("import simrun.lang as ti\n", "import pathlib\n\nimport "
                                "simrun.lang as ti\n\npathlib.Path('imported').touch()\n")


@pytest.mark.parametrize("reference", ["../../x.py:k", "ABSOLUTE/x.py:k"])
def test_kernel_module_outside_the_scene_folder_is_refused(tmp_path: Path,
                                                           reference: str) -> None:
    (tmp_path / "x.py").write_text(MARKING_KERNEL)  # would touch ./imported when imported
    scenes = tmp_path / "project" / "scenes"
    scenes.mkdir(parents=True)
    reference = reference.replace("ABSOLUTE", str(tmp_path))
    (scenes / "s.yaml").write_text(SCENE.replace("k.py:k", reference))
    for command in (["check", "s.yaml"], ["run", "s.yaml", "--out", "o"]):
        message = one_paragraph(simrun(*command, cwd=scenes))
        assert message.startswith(f"error: s.yaml:5:19: kernel module {tmp_path / 'x.py'} "
                                  f"lies outside the scene's folder ({scenes})")
        assert "add --allow-outside if you trust it" in message
    assert sorted(p.name for p in scenes.iterdir()) == ["s.yaml"]  # not imported, no output

    done = simrun("check", "s.yaml", "--allow-outside", cwd=scenes)
    assert done.returncode == 0, done.stderr
    assert f"kernel code   {tmp_path / 'x.py'} (outside the scene's folder)" in done.stdout
    assert (scenes / "imported").exists()


def test_kernels_folder_beside_the_scenes_folder_is_trusted(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "x.py").write_text(KERNEL)
    (tmp_path / "scenes").mkdir()
    (tmp_path / "scenes" / "s.yaml").write_text(SCENE.replace("k.py:k", "kernels/x.py:k"))
    done = simrun("check", "scenes/s.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"kernel code   {tmp_path / 'kernels' / 'x.py'}\n" in done.stdout


def test_help_says_scenes_are_code(tmp_path: Path) -> None:
    text = " ".join(simrun("--help", cwd=tmp_path).stdout.split())
    assert "a scene runs the Python of its kernel modules" in text
    for command in ("run", "check", "grad"):
        text = " ".join(simrun(command, "--help", cwd=tmp_path).stdout.split())
        assert "--allow-outside" in text and "Python" in text


@pytest.mark.parametrize("module", [
    KERNEL.replace("x[i].norm_sqr()", "x[i].nrm()  # " + "x" * 100_000),  # does not compile
    KERNEL.replace("x[i].norm_sqr()", "x[i].norm_sqr() * " + "y" * 100_000),  # undefined name
    "import simrun.lang as ti\n\nraise ValueError('" + "z" * 100_000 + "')\n",  # no load
])
def test_kernel_errors_do_not_echo_huge_source_lines(scene_dir: Path, module: str) -> None:
    (scene_dir / "k.py").write_text(module)
    (scene_dir / "s.yaml").write_text(SCENE)
    done = simrun("check", "s.yaml", cwd=scene_dir)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(done.stderr) < 1200, done.stderr[:1500]
    assert f"{scene_dir.resolve() / 'k.py'}:" in done.stderr.splitlines()[0]
    kept = re.search(r"The whole message: (\S+)\.", done.stderr)  # a cut message is kept
    if kept:
        Path(kept.group(1)).unlink()  # in the temporary folder: tidy up


def test_objective_kernel_outside_the_scene_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "loss.py").write_text(MARKING_KERNEL.replace("U", "L"))  # adds to L
    scenes = tmp_path / "scenes"
    scenes.mkdir()
    (scenes / "k.py").write_text(KERNEL)
    (scenes / "s.yaml").write_text(SCENE + "objective: {kernel: ../loss.py:k}\n")
    message = one_paragraph(simrun("check", "s.yaml", cwd=scenes))
    assert message.startswith(f"error: s.yaml:6:21: kernel module {tmp_path / 'loss.py'} lies "
                              "outside the scene's folder")
    done = simrun("check", "s.yaml", "--allow-outside", cwd=scenes)
    assert done.returncode == 0, done.stderr
    assert f"{tmp_path / 'loss.py'} (outside the scene's folder)" in done.stdout
