"""Parameter sweeps on Dask: a sweep spec becomes one task per point, each one ``run``,
``grad`` or ``optimize`` in its own folder, and a summary table kept current.

``run_batch(scene, ["dt=1e-4,2e-4"], job="run")`` is the entry point (``simrun batch`` is its
command-line adapter); ``Engine`` picks where jobs run (a local cluster of processes, a
scheduler address, or a batch system through dask-jobqueue).
"""

from simrun.batch.engine import ClusterSpec, Engine
from simrun.batch.jobs import JOBS, Job, register
from simrun.batch.runner import BatchResult, run_batch
from simrun.batch.summary import Row, read_summary

__all__ = ["JOBS", "BatchResult", "ClusterSpec", "Engine", "Job", "Row", "read_summary",
           "register", "run_batch"]
