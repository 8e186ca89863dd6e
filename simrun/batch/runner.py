"""``run_batch``: a sweep's jobs on Dask, the summary kept current as they finish.

Failures are reported (``on_event``) the moment they happen and retried up to ``retries``
times; a retried job resumes from its own saved state. Dask itself moves the tasks of a lost
worker elsewhere. The summary is rewritten atomically after every change, and once more when
the batch stops for any reason (Ctrl-C included), so it always describes the folders on disk.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simrun.batch.engine import Engine, open_client
from simrun.batch.plan import Plan, make_plan, make_points
from simrun.batch.summary import Row, write_summary
from simrun.batch.task import JobSpec, execute, read_record, tasks_per_host, warm_up
from simrun.outputs.atomic import atomic_write_text
from simrun.scene.shipped import find_scene

EventFn = Callable[[str, Row, "BatchResult"], None]  # kind: skipped|start|done|failed|retry


@dataclass
class BatchResult:
    out_dir: Path
    rows: list[Row]
    keys: list[str]
    skipped: int = 0
    engine: str = ""
    wall_s: float = 0.0
    plots: list[Path] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    @property
    def ok(self) -> bool:
        return all(r.status == "done" for r in self.rows)

    @property
    def summary(self) -> Path:
        return self.out_dir / "summary.csv"


def run_batch(scene: str | Path, sweeps: list[str] = (), *, sweep_file: str | Path | None = None,
              samples: int | None = None, sample_seed: int | None = None, job: str = "run",
              sets: list[str] = (), options: dict[str, Any] | None = None,
              out_dir: str | Path | None = None, engine: Engine | None = None,
              retries: int = 0, fail_fast: bool = False, allow_outside: bool = False,
              on_event: EventFn | None = None, plots: bool = True) -> BatchResult:
    """Run ``job`` (run | grad | optimize) at every point of the sweep; one folder per job
    under ``out_dir`` and ``out_dir/summary.csv``. Jobs already done with the same scene and
    kernel sources (by content hash) are skipped. Raises SceneError for a bad sweep, KEY or
    value before anything is submitted, and KeyboardInterrupt after saving the summary."""
    started = time.perf_counter()
    engine = engine or Engine()
    options = dict(options or {})
    points = make_points(list(sweeps), sweep_file, samples, sample_seed)
    plan = make_plan(scene, points, job=job, sets=list(sets), options=options,
                     out_dir=Path(out_dir) if out_dir else None, allow_outside=allow_outside)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    _write_command(plan.out_dir, dict(
        scene=str(find_scene(scene).resolve()), sweeps=list(sweeps),
        sweep_file=str(Path(sweep_file).resolve()) if sweep_file else None, samples=samples,
        sample_seed=sample_seed, job=job, sets=list(sets), options=options,
        retries=retries, fail_fast=fail_fast, allow_outside=allow_outside))
    result = BatchResult(plan.out_dir, plan.rows, plan.keys, len(plan.skipped),
                         engine.describe())
    log = _Log(plan.out_dir / "batch.log", on_event, result)
    for i in plan.skipped:
        log.event("skipped", plan.rows[i])
    write_summary(plan.out_dir, plan.rows)
    try:
        todo = [i for i, r in enumerate(plan.rows) if r.status != "done"]
        if todo:
            _dispatch(plan, todo, engine, options, retries, fail_fast, log)
        _settle(plan)  # after --fail-fast: jobs cancelled or finished meanwhile
    except BaseException:
        _settle(plan)
        raise
    finally:
        write_summary(plan.out_dir, plan.rows)
        result.wall_s = time.perf_counter() - started
        log.close()
    if plots:
        from simrun.batch.plots import draw_plots  # start-up: matplotlib

        result.plots = draw_plots(plan.out_dir, plan.rows, plan.keys)
    return result


def _write_command(out_dir: Path, arguments: dict[str, Any]) -> None:
    """batch.json: ``run_batch``'s arguments (the engine aside), from which 'simrun resume
    DIR' runs the same batch again: jobs done are skipped, the others run or resume."""
    arguments = {k: v for k, v in arguments.items() if k != "options"} | {
        "options": {k: v for k, v in arguments["options"].items() if k != "share"}}
    atomic_write_text(out_dir / "batch.json", json.dumps(arguments, indent=1) + "\n")


def _settle(plan: Plan) -> None:
    """After an interruption or --fail-fast: the rows of jobs still in flight take what
    their workers recorded (a job may have finished while the cluster shut down), else
    ``interrupted``."""
    for row, spec in zip(plan.rows, plan.specs):
        if row.status not in ("running", "queued", "pending"):
            continue
        record = read_record(spec.record_path) or {}
        if record.get("status") == "done" and record.get("digest") == spec.digest:
            row.status, row.results = "done", dict(record.get("results") or {})
            row.seconds = record.get("seconds")
        else:
            row.status = "interrupted"


class _Log:
    """batch.log (one line per event, for runs without a terminal) and the caller's hook."""

    def __init__(self, path: Path, hook: EventFn | None, result: BatchResult) -> None:
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self.hook, self.result = hook, result

    def event(self, kind: str, row: Row) -> None:
        n = len(self.result.rows)
        counts = (f"[{self.result.count('done')}/{n} done, {self.result.count('failed')} "
                  f"failed, {self.result.count('running')} running, "
                  f"{self.result.count('queued')} queued]")
        detail = f": {row.error}" if kind in ("failed", "retry") and row.error else ""
        self.file.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {kind:7s} {row.folder} "
                        f"{row.point} {counts}{detail}\n")
        self.file.flush()
        if self.hook is not None:
            self.hook(kind, row, self.result)

    def close(self) -> None:
        self.file.close()


def _dispatch(plan: Plan, todo: list[int], engine: Engine, options: dict[str, Any],
              retries: int, fail_fast: bool, log: _Log) -> None:
    from distributed import as_completed  # start-up: dask.distributed

    threads = options.get("threads") or engine.job_threads()
    if engine.cluster is not None and engine.cluster.log_directory is None:
        logs = plan.out_dir.resolve() / ".batch" / "logs"  # the batch jobs' own output
        engine = replace(engine, cluster=replace(engine.cluster, log_directory=str(logs)))
    with open_client(engine) as client:
        share = None if threads else tasks_per_host(client.scheduler_info())
        specs = {i: _with_threads(plan.specs[i], threads, share) for i in todo}
        first = specs[todo[0]]
        client.submit(warm_up, first, pure=False).result()
        futures = as_completed()
        owner: dict[str, tuple[int, Any]] = {}
        before: dict[int, dict | None] = {}  # each queued job's record when it was submitted

        def submit(i: int) -> None:
            row = plan.rows[i]
            row.status, row.attempts = "queued", row.attempts + 1
            before[i] = read_record(plan.specs[i].record_path)
            future = client.submit(execute, specs[i], pure=False,
                                   key=f"simrun-{row.folder}-{row.attempts}-{time.time_ns()}")
            owner[future.key] = (i, future)
            futures.add(future)

        for i in todo:
            submit(i)
            log.event("start", plan.rows[i])
        write_summary(plan.out_dir, plan.rows)
        for future in futures:
            i, _ = owner.pop(future.key)
            _mark_started(plan, before, _handed_out(client, owner))
            row = plan.rows[i]
            record = _outcome(future)
            row.seconds, row.error = record.get("seconds"), record.get("error", "")
            row.results = dict(record.get("results") or {})
            if record.get("status") == "done":
                row.status = "done"
                log.event("done", row)
            elif row.attempts <= retries:
                log.event("retry", row)
                submit(i)
            else:
                row.status = "failed"
                log.event("failed", row)
                if fail_fast:  # the rest: what their workers recorded, see _settle
                    client.cancel([other for _j, other in owner.values()])
                    return
            write_summary(plan.out_dir, plan.rows)


def _handed_out(client, owner: dict[str, tuple[int, Any]]) -> list[int]:
    """The jobs the scheduler has handed to a worker (a few per worker, however long the
    sweep), in no particular order."""
    return [owner[key][0] for keys in client.processing().values() for key in keys
            if key in owner]


def _mark_started(plan: Plan, before: dict[int, dict | None], handed_out: list[int]) -> None:
    """Queued jobs whose worker has started them (their record, rewritten at the start of
    the task, says running): what the log and summary count as running, never more jobs
    than the workers run at once. Only the jobs handed to a worker can have started, so only
    their records are read: each finished job costs the same, however long the sweep."""
    for i in handed_out:
        row = plan.rows[i]
        if row.status == "queued":
            record = read_record(plan.specs[i].record_path)
            if record and record != before.get(i) and record.get("status") == "running":
                row.status = "running"


def _with_threads(spec: JobSpec, threads: int | None, share: dict[str, int] | None
                  ) -> JobSpec:
    return replace(spec, options={**spec.options, "threads": threads, "share": share})


def _outcome(future) -> dict[str, Any]:
    """The task's record, or a failed one when Dask could not run it (e.g. KilledWorker:
    its workers kept dying)."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
