"""Where the jobs run: a ``distributed.LocalCluster`` of processes (the default), an existing
scheduler by address, or a batch system through dask-jobqueue. Nothing home-made: Dask
schedules, moves tasks off lost workers and reports results."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from simrun.scene import SceneError

CLUSTERS = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster",
            "lsf": "LSFCluster"}


@dataclass(frozen=True)
class ClusterSpec:
    """A batch-system cluster: ``jobs`` batch jobs of ``cores`` CPUs each, one Dask worker
    per job, each retiring (``--lifetime``, staggered) before its walltime ends."""

    kind: str
    jobs: int = 1
    cores: int = 1
    memory: str = "2GB"
    walltime: str = "01:00:00"
    queue: str | None = None
    account: str | None = None
    host: str | None = None  # the address the scheduler listens on (default: dask-jobqueue's)
    log_directory: str | None = None


def usable_cpus() -> int:
    from simrun.lang.runtime.parallel import default_threads  # start-up: loads simrun.lang

    return default_threads()


def seconds(walltime: str) -> int:
    """``HH:MM:SS``, ``MM:SS`` or ``D-HH:MM:SS`` -> seconds."""
    days, _, rest = walltime.rpartition("-")
    try:
        parts = [int(p) for p in rest.split(":")]
        if not 1 <= len(parts) <= 3 or any(p < 0 for p in parts):
            raise ValueError
    except ValueError:
        raise SceneError(f"--walltime {walltime!r}: write HH:MM:SS, e.g. 01:00:00") from None
    h, m, s = ([0, 0] + parts)[-3:]
    return (int(days) if days else 0) * 86400 + h * 3600 + m * 60 + s


def lifetime(walltime: str) -> tuple[int, int]:
    """A worker's ``--lifetime`` and ``--lifetime-stagger`` in seconds: it leaves (its tasks
    move elsewhere) a margin before the batch system would kill it, and workers started
    together do not all leave at once."""
    total = seconds(walltime)
    margin = min(300, max(10, total // 10))
    return max(10, total - margin), min(240, max(1, total // 20))


def cluster_object(spec: ClusterSpec):
    try:
        import dask_jobqueue  # optional dependency: dask-jobqueue (simrun[cluster])
    except ImportError:
        raise SceneError(f"--cluster {spec.kind} needs dask-jobqueue: pip install "
                         "'simrun[cluster]' (or pip install dask-jobqueue)") from None
    if spec.kind not in CLUSTERS:
        raise SceneError(f"--cluster {spec.kind!r}: use one of {', '.join(CLUSTERS)}")
    life, stagger = lifetime(spec.walltime)
    kwargs = dict(cores=spec.cores, processes=1, memory=spec.memory, walltime=spec.walltime,
                  queue=spec.queue, account=spec.account, log_directory=spec.log_directory,
                  worker_extra_args=["--lifetime", f"{life}s", "--lifetime-stagger",
                                     f"{stagger}s"])
    if spec.host:
        kwargs["scheduler_options"] = {"host": spec.host}
    if spec.kind == "sge":
        kwargs.pop("account")
    return getattr(dask_jobqueue, CLUSTERS[spec.kind])(**kwargs)


@dataclass(frozen=True)
class Engine:
    workers: int | None = None
    scheduler: str | None = None
    cluster: ClusterSpec | None = None

    def job_threads(self) -> int | None:
        """Kernel threads per job: the worker's share of the CPUs, so nothing oversubscribes."""
        if self.cluster is not None:
            return self.cluster.cores
        if self.scheduler is not None:
            return None  # each worker's engine uses the CPUs its process may use
        return max(1, usable_cpus() // self.local_workers())

    def local_workers(self) -> int:
        return self.workers or usable_cpus()

    def describe(self) -> str:
        if self.cluster is not None:
            c = self.cluster
            return (f"{c.kind} cluster: {c.jobs} job{'s' if c.jobs != 1 else ''} x {c.cores} "
                    f"core{'s' if c.cores != 1 else ''}, walltime {c.walltime}")
        if self.scheduler is not None:
            return f"scheduler {self.scheduler}"
        count = self.local_workers()
        return f"local cluster: {count} worker process{'es' if count != 1 else ''}"


@contextmanager
def open_client(engine: Engine) -> Iterator[object]:
    """A ``distributed.Client`` on the engine's cluster; the cluster we started is closed
    on exit (an existing scheduler is left running)."""
    from distributed import Client, LocalCluster  # start-up: dask.distributed

    quiet = logging.ERROR
    if engine.scheduler is not None:
        with Client(engine.scheduler, timeout="30s") as client:
            yield client
        return
    if engine.cluster is not None:
        cluster = cluster_object(engine.cluster)
        # adapt, not scale: a batch job that ends (walltime, scancel) is replaced by a new one
        cluster.adapt(minimum_jobs=engine.cluster.jobs, maximum_jobs=engine.cluster.jobs)
    else:
        cluster = LocalCluster(n_workers=engine.local_workers(), threads_per_worker=1,
                               processes=True, host="127.0.0.1", dashboard_address=None,
                               silence_logs=quiet)
    try:
        with Client(cluster) as client:
            yield client
    finally:
        cluster.close()

