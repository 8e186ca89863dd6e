"""simrun batch on real clusters: a `dask scheduler` with `dask worker` processes on
127.0.0.1 (one worker SIGKILLed mid-sweep), and a one-node Slurm through dask-jobqueue (one
worker's batch job scancelled mid-sweep). No job may be lost; the summary must be complete."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.batch_helpers import ROOT, count, gated_scene_copy, run_ok, simrun, wait_for
from tests.gate_helpers import held, open_gate, wait_until_held

DASK = str(Path(sys.executable).with_name("dask"))
# Job run-001 waits at a closed gate (tests/gate_helpers.py) from its first step: it is
# provably running when its worker is killed, on any machine, and the test opens the gate
# after the kill so that its rerun finishes. The other five jobs pass the gate.
SWEEP = "energy.1.params.hold_after=1000000000,0,1000000001,1000000002,1000000003,1000000004"
STEPS = 200  # the gate, not the length, holds run-001; the gated scene steps launch by launch
HELD = "run-001"


def running_pids(out: Path) -> dict[int, str]:
    """pid -> job folder, for the jobs whose records say they are running now."""
    found = {}
    for path in (out / ".batch").glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except ValueError:
            continue
        if record.get("status") == "running":
            found[int(record["pid"])] = record["folder"]
    return found


@pytest.fixture
def dask_cluster(tmp_path):
    """A real `dask scheduler` and two `dask worker` processes (no nanny: a killed worker
    stays dead), all on 127.0.0.1."""
    file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_for(file.exists, 60, "the scheduler file")
        workers = [subprocess.Popen([DASK, "worker", "--scheduler-file", str(file), "--host",
                                     "127.0.0.1", "--nthreads", "1", "--no-nanny",
                                     "--no-dashboard"], cwd=tmp_path,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for _ in range(2)]
        procs += workers
        address = json.loads(file.read_text())["address"]
        yield address, workers
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_scheduler_worker_killed_mid_sweep(tmp_path, dask_cluster):
    address, workers = dask_cluster
    scene = gated_scene_copy(tmp_path, steps=STEPS)
    out = tmp_path / "b"
    proc = simrun("batch", str(scene), "--sweep", SWEEP, "--scheduler", address, "--threads",
                  "1", "--no-render", "--out", str(out))
    worker_pids = {w.pid for w in workers}
    wait_until_held(tmp_path / "gate", proc)
    wait_for(lambda: count(out, "done") >= 1 or proc.poll() is not None, 180, "a finished job")
    [victim] = held(tmp_path / "gate")
    folder = running_pids(out)[victim]
    assert victim in worker_pids and folder.startswith(HELD), (victim, folder)
    os.kill(victim, signal.SIGKILL)
    open_gate(tmp_path / "gate")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "6 of 6 jobs done" in stdout
    run_ok(out)
    record = json.loads((out / ".batch" / f"{folder}.json").read_text())
    assert record["attempts"] >= 2 and record["pid"] != victim  # rerun on the other worker


# ---------------------------------------------------------------- Slurm, for real

def _slurm_idle(env: dict[str, str]) -> bool:
    try:
        state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True,
                               text=True, timeout=10).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "idle" in state or "mixed" in state


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """The Slurm that .ci/run started (SLURM_CONF), or one started here with
    .ci/slurm-up.sh (as root, installing slurm-wlm and munge with apt-get if needed)."""
    if os.environ.get("SLURM_CONF") and shutil.which("sinfo") and _slurm_idle(dict(os.environ)):
        yield os.environ["SLURM_CONF"]
        return
    state = tmp_path_factory.mktemp("slurm")
    up = subprocess.run(["bash", str(ROOT / ".ci" / "slurm-up.sh"), str(state)],
                        capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        subprocess.run(["bash", str(ROOT / ".ci" / "slurm-down.sh"), str(state)])
        pytest.skip(f"cannot install or start Slurm here: {up.stderr.strip()[-300:]}")
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(state / "slurm.conf")
    try:
        yield os.environ["SLURM_CONF"]
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF")
        else:
            os.environ["SLURM_CONF"] = previous
        down = subprocess.run(["bash", str(ROOT / ".ci" / "slurm-down.sh"), str(state)],
                              capture_output=True, text=True)
        assert down.returncode == 0, down.stderr


def squeue() -> list[str]:
    return subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True,
                          check=True).stdout.split("\n")


def slurm_job_of(pid: int) -> str | None:
    """The Slurm job a process runs in (its SLURM_JOB_ID), or None (gone, or not Slurm's)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    found = [v.split(b"=", 1)[1].decode() for v in environ if v.startswith(b"SLURM_JOB_ID=")]
    return found[0] if found else None


def test_slurm_sweep_with_a_worker_job_cancelled(tmp_path, slurm):
    scene = gated_scene_copy(tmp_path, steps=STEPS)
    out = tmp_path / "b"
    proc = simrun("batch", str(scene), "--sweep", SWEEP, "--cluster", "slurm",
                  "--cluster-jobs", "2", "--cluster-cores", "1", "--cluster-memory", "1GB",
                  "--walltime", "00:10:00", "--cluster-host", "127.0.0.1", "--no-render",
                  "--out", str(out), cwd=tmp_path)
    wait_until_held(tmp_path / "gate", proc, limit=240)
    wait_for(lambda: count(out, "done") >= 1 or proc.poll() is not None, 240, "a finished job")
    # the victim is the Slurm job whose worker waits at the gate with job run-001, not
    # whichever job squeue lists first (a worker between tasks, whose loss retries nothing)
    [pid] = held(tmp_path / "gate")
    victim, folder = slurm_job_of(pid), running_pids(out)[pid]
    assert victim is not None and folder.startswith(HELD), (pid, folder)
    assert f"{victim} RUNNING" in squeue(), squeue()
    subprocess.run(["scancel", victim], check=True)
    open_gate(tmp_path / "gate")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "6 of 6 jobs done" in stdout and "slurm cluster" in stdout
    run_ok(out)
    record = json.loads((out / ".batch" / f"{folder}.json").read_text())
    assert record["attempts"] >= 2  # the cancelled worker's task ran again elsewhere
    wait_for(lambda: not [x for x in squeue() if x.strip()], 60, "the batch jobs to end")
    logs = list((out / ".batch" / "logs").glob("*"))
    assert logs  # the workers' batch-job output
