"""Issue 20's findings through the real CLI: inputs that gave tracebacks where the CLI promises
exit 2 and one paragraph, a full disk, a kill while drawing the pictures."""

from __future__ import annotations

import io
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from test_cli import simrun

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
