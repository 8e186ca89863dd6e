"""What the CLI prints, where it goes and what it says (issue 44, item 19): no progress bar
drawn into a log file, the two rates named apart, one spelling of "error:", counts in the
singular, and a folder given where a scene file belongs named as a folder."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simrun.batch.engine import Engine

REPO = Path(__file__).resolve().parents[1]
GRAVITY = str(REPO / "scenes" / "gravity.yaml")
BOX_DRAWING = re.compile("[\u2500-\u259f]")  # rich's bar: ━ ╸ ╺ and the blocks


def simrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_no_bar_is_drawn_into_stderr_that_is_not_a_terminal(tmp_path: Path) -> None:
    """cron and nohup logs got a line of box-drawing characters; progress.log has the steps."""
    done = simrun("run", GRAVITY, "--steps", "200", "--no-render", "--out", "r", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not BOX_DRAWING.search(done.stderr) and "steps/s" not in done.stderr, done.stderr
    assert "200/200 steps (100%)" in (tmp_path / "r" / "progress.log").read_text()
    optimized = simrun("optimize", str(REPO / "scenes" / "projectile.yaml"), "--iterations",
                       "2", "--no-render", "--out", "o", cwd=tmp_path)
    assert optimized.returncode == 0, optimized.stderr
    assert not BOX_DRAWING.search(optimized.stderr), optimized.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_on_a_terminal_the_bar_and_the_summary_say_which_rate_they_give(tmp_path: Path
                                                                         ) -> None:
    """The bar's rate is over its recent reports, the summary's over the whole job after
    set-up (lj_melt: 288 and 149 steps/s, unlabelled): each says which it is."""
    leader, follower = pty.openpty()
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "160"}
    with subprocess.Popen([sys.executable, "-m", "simrun.cli", "run", GRAVITY, "--steps",
                           "2000", "--no-render", "--out", "r"], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=follower, text=True) as proc:
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        stdout = proc.stdout.read()
    os.close(leader)
    assert proc.returncode == 0, drawn.decode(errors="replace")
    assert re.search(r"[\d,]+ steps/s recent", drawn.decode(errors="replace")), drawn
    assert re.search(r"then [\d,]+ steps/s overall: from the first step to the last file "
                     r"written\)", stdout), stdout


def test_errors_are_spelled_error_colon_by_every_command(tmp_path: Path) -> None:
    """One spelling: 'error:' at the start of the paragraph, never 'Error:'."""
    cases = [("run", "--bogus"), ("run", "missing.yaml"), ("grad", GRAVITY),
             ("render", "."), ("resume", "."), ("batch", GRAVITY, "--sweep", "nokey=1,2"),
             ("check", "missing.yaml")]
    for args in cases:
        done = simrun(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("error: ") and "Error:" not in done.stderr, (
            args, done.stderr)


def test_a_folder_given_as_the_scene_is_named_as_a_folder(tmp_path: Path) -> None:
    """`simrun grad DIR` said "error: .: is not a file"; a job folder's own scene.yaml and
    `simrun resume` are named."""
    ran = simrun("run", GRAVITY, "--steps", "20", "--no-render", "--out", "r", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    grad = simrun("grad", ".", "--wrt", "dt", cwd=tmp_path / "r")
    assert grad.returncode == 2 and "is the current directory, not a scene file" in grad.stderr
    assert "'scene.yaml'" in grad.stderr and "simrun resume ." in grad.stderr, grad.stderr
    run = simrun("run", str(REPO / "scenes"), cwd=tmp_path)
    assert run.returncode == 2 and "is a folder, not a scene file (it holds" in run.stderr
    assert "Traceback" not in grad.stderr + run.stderr


def test_a_count_of_one_is_singular() -> None:
    assert Engine(workers=1).describe() == "local cluster: 1 worker process"
    assert Engine(workers=3).describe() == "local cluster: 3 worker processes"


def test_check_reports_the_step_0_energy_that_run_records(tmp_path: Path) -> None:
    """mass_spring: check said U(step 0) = -2397.10 (after the controller's first action),
    energy.csv's first row -2422.68 (before it): check gives run's, the other labelled."""
    scene = str(REPO / "scenes" / "mass_spring.yaml")
    checked = simrun("check", scene, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    shown = re.search(r"potential energy at step 0 = (\S+) \(energy.csv's first row: before "
                      r"the controller acts; after its step-0 action, which the first step's "
                      r"forces use: (\S+)\)", checked.stdout)
    assert shown, checked.stdout
    ran = simrun("run", scene, "--steps", "4", "--no-render", "--out", "r", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    first = (tmp_path / "r" / "energy.csv").read_text().splitlines()[1].split(",")
    assert float(shown.group(1)) == float(f"{float(first[3]):.9g}")  # to the printed digits
    assert float(shown.group(2)) != float(shown.group(1))  # the controller moves rest lengths
