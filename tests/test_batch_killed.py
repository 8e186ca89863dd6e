"""A batch killed outright (SIGKILL) at the worst moment, then 'simrun resume DIR': a job
whose folder says it finished is done (not run again, not failed), and summary.csv keeps
its columns in the same order across the resume."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.batch_helpers import scene_copy, simrun, summary

# `simrun batch` in one process (a threaded Dask client, so the worker is this process),
# killed by SIGKILL the moment a job's record is about to say done: its run folder is
# complete, the batch's record of it still says running.
KILLED_WHEN_A_JOB_ENDS = r"""
import os, signal, sys
from contextlib import contextmanager
from distributed import Client
from simrun.batch import runner, task

@contextmanager
def threaded_client(engine):
    with Client(processes=False, n_workers=1, threads_per_worker=1,
                dashboard_address=None) as client:
        yield client

real_write = task.write_record

def write_or_die(path, record):
    if record.get("status") == "done":
        os.kill(os.getpid(), signal.SIGKILL)
    real_write(path, record)

runner.open_client, task.write_record = threaded_client, write_or_die
from simrun.cli import main
sys.argv = ["simrun", *sys.argv[1:]]
main()
"""


def _header(out: Path) -> list[str]:
    with open(out / "summary.csv", newline="") as f:
        return next(csv.reader(f))


def test_a_job_finished_before_the_batch_was_killed_is_done_on_resume(tmp_path):
    scene = scene_copy(tmp_path, steps=300)
    out = tmp_path / "b"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WHEN_A_JOB_ENDS, "batch", str(scene), "--sweep",
         "dt=1e-5", "--out", str(out), "--no-render", "--threads", "1"],
        capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    folder = out / "run-000"
    run_json = (folder / "run.json").read_text()
    assert json.loads(run_json)["status"] == "ok"  # finished ...
    assert json.loads((out / ".batch" / "run-000.json").read_text())["status"] == "running"

    for _ in range(2):  # ... so done, and stays done
        proc = simrun("resume", str(out), "--workers", "1")
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stdout + stderr
        assert "already reached" not in stdout + stderr
        [row] = summary(out)
        assert row["status"] == "done" and row["error"] == "", row
    assert (folder / "run.json").read_text() == run_json  # not run again
    with open(folder / "energy.csv", newline="") as f:
        energies = list(csv.DictReader(f))
    assert float(row["energy_last"]) == float(energies[-1]["total"])
    assert float(row["energy_first"]) == float(energies[0]["total"])
    assert int(row["steps"]) == 300


def test_summary_columns_keep_their_order_across_a_resume(tmp_path):
    """Rows read back from the job records and rows just run give the same header."""
    scene = scene_copy(tmp_path, steps=50)
    out = tmp_path / "b"
    first = simrun("batch", str(scene), "--sweep", "dt=1e-5", "--out", str(out),
                   "--no-render", "--threads", "1", "--workers", "1")
    stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    header = _header(out)
    again = simrun("resume", str(out), "--workers", "1")
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr
    assert _header(out) == header
