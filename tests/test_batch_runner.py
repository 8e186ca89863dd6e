"""run_batch's bookkeeping on a long sweep of tiny jobs, in one process (a threaded Dask
client, so that a job registered here is what the workers run): every job recorded, and
watching which queued jobs have started costs the same per job however long the sweep."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest

from simrun.batch import Engine, run_batch
from simrun.batch import runner as batch_runner
from simrun.batch.jobs import JOBS, Job, register
from tests.batch_helpers import scene_copy, summary

THREADS = 2


def _tiny_job(scene, folder, options, resume):
    """Writes one file and returns a number that depends on the point."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dt.txt").write_text(repr(scene.dt))
    return {"dt_over_1e-6": scene.dt / 1e-6}


@pytest.fixture
def in_process(monkeypatch):
    """run_batch on a threaded client in this process; the runner's record reads counted."""
    from distributed import Client

    @contextmanager
    def threaded_client(engine):
        with Client(processes=False, n_workers=1, threads_per_worker=THREADS,
                    dashboard_address=None) as client:
            yield client

    reads = []
    real_read = batch_runner.read_record

    def counted(path):
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(batch_runner, "open_client", threaded_client)
    monkeypatch.setattr(batch_runner, "read_record", counted)
    register(Job("tiny", _tiny_job, resumable=False))
    yield reads
    JOBS.pop("tiny")


def test_a_long_sweep_records_every_job_and_reads_linearly(tmp_path, in_process):
    reads = in_process
    scene = scene_copy(tmp_path, steps=2)
    n = 300
    values = ",".join(f"{(k + 1) * 1e-6:g}" for k in range(n))
    out = tmp_path / "b"
    result = run_batch(scene, [f"dt={values}"], job="tiny", out_dir=out,
                       engine=Engine(workers=1), options={"threads": 1}, plots=False)
    assert result.ok and len(result.rows) == n
    rows = summary(out)
    assert [r["status"] for r in rows] == ["done"] * n
    for k, r in enumerate(rows):  # each row holds its own job's result and folder
        assert float(r["dt_over_1e-6"]) == pytest.approx(k + 1, rel=1e-12)
        assert float((out / r["folder"] / "dt.txt").read_text()) == float(r["dt"])
        record = json.loads((out / ".batch" / f"{r['folder']}.json").read_text())
        assert record["status"] == "done" and record["index"] == k
    # one read per submission, one per job when the batch settles, and per finished job
    # only the records of the jobs the scheduler had handed out (a few per thread): linear
    # in n. Reading every queued record per finished job would be about n * n / 2 = 45000.
    assert len(reads) <= 2 * n + 4 * THREADS * n, len(reads)
