"""One job on a worker: lock its folder, skip it if an earlier attempt finished it, resume or
start it, and record the outcome in ``DIR/.batch/<folder>.json``.

Dask may run a task twice (a worker presumed dead that was only slow, a retry after a lost
worker): an exclusive ``flock`` on ``DIR/.batch/<folder>.lock`` serialises the attempts, and
the second one finds the first one's record and returns it. The lock dies with its process, so
a killed worker never leaves a folder locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simrun.batch.engine import usable_cpus
from simrun.batch.jobs import get_job
from simrun.lang.config import job_policy, on_device
from simrun.outputs.atomic import atomic_write_text
from simrun.outputs.resumable import is_no_room, no_room_message
from simrun.scene import load_scene

STATE = ".batch"  # DIR/.batch/: records and locks, so job folders hold only what jobs write


@dataclass(frozen=True)
class JobSpec:
    """Everything a worker needs to run one point (plain data: it travels by pickle)."""

    index: int
    folder: Path
    scene_path: str
    overrides: tuple[str, ...]
    job: str
    digest: str
    options: dict[str, Any] = field(default_factory=dict)
    allow_outside: bool = False

    @property
    def record_path(self) -> Path:
        return self.folder.parent / STATE / f"{self.folder.name}.json"


def read_record(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


@contextmanager
def folder_lock(spec: JobSpec):
    lock_path = spec.record_path.with_suffix(".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _prepare_folder(spec: JobSpec, resumable: bool) -> bool:
    """Whether to resume: an earlier attempt of this same point (same digest) left a saved
    state. Otherwise whatever an earlier attempt or another scene or kernel left in the
    folder is cleared first, so the folder holds exactly what this job writes."""
    old = read_record(spec.record_path)
    if resumable and old is not None and old.get("digest") == spec.digest and \
            (spec.folder / "state.npz").is_file():
        return True
    if spec.folder.exists():
        shutil.rmtree(spec.folder)
    return False


def execute(spec: JobSpec) -> dict[str, Any]:
    """Run one job; never raises for the job's own failure (it is the returned record's
    ``error``), only for interruption."""
    with folder_lock(spec):
        old = read_record(spec.record_path)
        if old and old.get("status") == "done" and old.get("digest") == spec.digest:
            return old  # another attempt of this task finished it
        job = get_job(spec.job)
        resume = _prepare_folder(spec, job.resumable)
        started = time.time()
        record: dict[str, Any] = {
            "index": spec.index, "digest": spec.digest, "status": "running",
            "folder": spec.folder.name, "host": socket.gethostname(), "pid": os.getpid(),
            "attempts": int((old or {}).get("attempts", 0)) + 1, "resumed": resume}
        try:
            write_record(spec.record_path, record)
            scene = load_scene(spec.scene_path, list(spec.overrides),
                               allow_outside=spec.allow_outside)
            options = {**spec.options, "threads": job_threads(spec)}
            finished = job.finished(scene, spec.folder, options) \
                if resume and job.finished is not None else None
            if finished is not None:  # the job ended, its record did not say so yet
                record["results"] = finished
            else:
                with on_device(options.get("device", "cpu")), job_policy(options):
                    record["results"] = job.fn(scene, spec.folder, options, resume)
            record["status"] = "done"
        except KeyboardInterrupt:
            record["status"] = "interrupted"
            raise
        except Exception as exc:  # noqa: BLE001 - the job's failure is its result
            record["status"], record["error"] = "failed", _message(exc)
        finally:
            record["seconds"] = round(time.time() - started, 3)
            _write_last_record(spec, record)
    return record


def _write_last_record(spec: JobSpec, record: dict[str, Any]) -> None:
    """The outcome on disk; a full disk is then the job's failure (the batch reports it in
    one line), not a traceback on the worker."""
    try:
        write_record(spec.record_path, record)
    except OSError as exc:
        if not is_no_room(exc):
            raise
        if record["status"] != "failed":
            record["status"], record["error"] = "failed", _message(exc)


def _message(exc: BaseException) -> str:
    if is_no_room(exc):
        return no_room_message(exc, None)  # the batch, not this folder, is what resumes
    text = " ".join(str(exc).split()) or type(exc).__name__
    if type(exc).__name__ in ("SceneError", "SimulationError", "OutputError", "CompileError",
                              "JobFailed"):
        return text
    return f"{type(exc).__name__}: {text} ({traceback.extract_tb(exc.__traceback__)[-1].name})"


def tasks_per_host(info: dict[str, Any]) -> dict[str, int]:
    """host -> how many tasks the scheduler's workers there run at once (their threads)."""
    share: dict[str, int] = {}
    for address, worker in info.get("workers", {}).items():
        host = worker.get("host") or address.rsplit(":", 1)[0].split("//")[-1]
        share[host] = share.get(host, 0) + int(worker.get("nthreads", 1))
    return share


def job_threads(spec: JobSpec) -> int | None:
    """The job's kernel threads: as given, else this worker's share of the CPUs of its host
    (an existing scheduler's workers: the CPUs this process may use over the tasks that run
    beside it), so jobs on one host do not oversubscribe it."""
    threads, share = spec.options.get("threads"), spec.options.get("share")
    if threads or not share:
        return threads
    try:
        from distributed import get_worker  # start-up: dask.distributed

        host = get_worker().address.rsplit(":", 1)[0].split("//")[-1]
    except (ImportError, ValueError):
        return None

    return max(1, usable_cpus() // share.get(host, 1))


def warm_up(spec: JobSpec) -> bool:
    """Compile one point's kernels into the shared disk cache before the sweep fans out, so
    that workers do not all compile the same kernels at once. Failures are the jobs' to
    report."""
    try:
        from simrun.stepper import check_scene  # start-up: loads the compiler

        scene = load_scene(spec.scene_path, list(spec.overrides),
                           allow_outside=spec.allow_outside)
        check_scene(scene, threads=job_threads(spec))
        return True
    except Exception:  # noqa: BLE001
        return False
