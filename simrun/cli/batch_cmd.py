"""``simrun batch SCENE --sweep KEY=V1,V2``: a parameter sweep of run | grad | optimize on Dask."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from simrun.cli import common
from simrun.cli.common import EXIT_FAILED, SceneArg, SetOpt, ThreadsOpt, err, exit_codes, out
from simrun.jobs.options import parse_size
from simrun.outputs.resumable import how_to_continue
from simrun.scene import SceneError

Opt = typer.Option


def _engine(workers: int | None, scheduler: str | None, cluster: str | None,
            cluster_opts: dict[str, Any]):
    from simrun.batch import ClusterSpec, Engine  # start-up: dask

    if scheduler and cluster:
        raise SceneError("--scheduler and --cluster: give one (an existing scheduler, or a "
                         "batch system to start workers on)")
    spec = ClusterSpec(kind=cluster, **cluster_opts) if cluster else None
    return Engine(workers=workers, scheduler=scheduler, cluster=spec)


def _job_options(wrt: list[str] | None, threads: int | None, no_render: bool,
                 steps: int | None, checkpoints: int | None, memory: str | None,
                 iterations: int | None, grad: dict[str, Any]) -> dict:
    """The jobs' options, those left at their defaults left out (so that a batch that
    does not use an option keeps the hash that skips its finished jobs)."""
    defaults = {"mode": "reverse", "check": False, "method": "trajectory"}
    options: dict[str, Any] = {"wrt": list(wrt or []) or None, "threads": threads,
                               "no_render": no_render or None, "steps": steps,
                               "checkpoints": checkpoints, "iterations": iterations,
                               "memory": parse_size(memory) if memory else None,
                               **{k: v for k, v in grad.items() if v != defaults.get(k)}}
    return {k: v for k, v in options.items() if v is not None}


class _Reporter:
    """Failures as they happen (stderr), and a bar over jobs on a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.bar, self.task = quiet, None, None
        self.out_dir: Path | None = None  # known once the first event comes

    def __call__(self, kind: str, row, result) -> None:
        self.out_dir = result.out_dir
        if kind in ("failed", "retry"):
            again = " (retrying)" if kind == "retry" else ""
            err.print(f"job {row.folder} {row.point} failed{again}: {row.error}",
                      markup=False, highlight=False)
        if self.quiet or not err.is_terminal:
            return
        if self.bar is None:
            # start-up: rich.progress only to draw a bar
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(TextColumn("[bold]jobs"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[counts]}"), console=err)
            self.bar.start()
            self.task = self.bar.add_task("jobs", total=len(result.rows), counts="")
        self.bar.update(self.task, completed=result.count("done") + result.count("failed"),
                        counts=f"{result.count('failed')} failed, {result.count('running')} "
                               f"running, {result.count('queued')} queued")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def batch(
    scene_path: SceneArg,
    sweep: Annotated[list[str] | None, Opt(
        "--sweep", metavar="KEY=VALUES", help="Values of a scene KEY (as in --set): V1,V2,... "
        "(YAML, split on commas outside brackets), range(a,b,step) (stop excluded), "
        "linspace(a,b,n) or logspace(a,b,n) (10^a..10^b). Several --sweep: their Cartesian "
        "product.")] = None,
    sweep_file: Annotated[Path | None, Opt("--sweep-file", metavar="FILE", help="A YAML file "
                          "with 'sweep: {KEY: [values] | \"linspace(a,b,n)\"}' (and optionally "
                          "'samples:', 'sample_seed:').")] = None,
    samples: Annotated[int | None, Opt("--samples", min=1, metavar="N", help="N random points "
                       "from the sweep's ranges instead of the full grid.")] = None,
    sample_seed: Annotated[int | None, Opt("--sample-seed", metavar="S", help="Seed of "
                           "--samples (default 0).")] = None,
    job: Annotated[str, Opt("--job", metavar="run|grad|optimize", help="What each point runs.")
                   ] = "run",
    wrt: Annotated[list[str] | None, Opt("--wrt", metavar="KEY", help="grad/optimize: the "
                   "KEYs (repeatable).")] = None,
    sets: SetOpt = None,
    out_dir: Annotated[Path | None, Opt("--out", metavar="DIR", help="Batch folder (default: "
                       "outputs/<scene>/batch-<job>-<hash of the command>).")] = None,
    workers: Annotated[int | None, Opt("--workers", min=1, metavar="N", help="Local worker "
                       "processes (default: the usable CPUs).")] = None,
    scheduler: Annotated[str | None, Opt("--scheduler", metavar="ADDRESS", help="Use a running "
                         "dask scheduler, e.g. tcp://10.0.0.5:8786.")] = None,
    cluster: Annotated[str | None, Opt("--cluster", metavar="slurm|pbs|sge|lsf", help="Start "
                       "workers as batch jobs (dask-jobqueue).")] = None,
    cluster_jobs: Annotated[int, Opt("--cluster-jobs", "--jobs", min=1, metavar="N",
                            help="Batch jobs (one worker each).")] = 1,
    cluster_cores: Annotated[int, Opt("--cluster-cores", min=1, metavar="C", help="Cores per "
                             "batch job.")] = 1,
    cluster_memory: Annotated[str, Opt("--cluster-memory", metavar="M", help="Memory per "
                              "batch job, e.g. 4GB.")] = "2GB",
    walltime: Annotated[str, Opt("--walltime", metavar="HH:MM:SS", help="Per batch job; "
                        "workers retire (staggered) before it ends.")] = "01:00:00",
    queue: Annotated[str | None, Opt("--queue", metavar="Q", help="Batch queue (partition) "
                     "of the worker jobs (default: the batch system's).")] = None,
    account: Annotated[str | None, Opt("--account", metavar="A", help="Account the worker "
                       "jobs are charged to.")] = None,
    cluster_host: Annotated[str | None, Opt("--cluster-host", metavar="HOST", help="Address "
                            "the scheduler listens on for batch-job workers.")] = None,
    retries: Annotated[int, Opt("--retries", min=0, metavar="R", help="Run a failed job up "
                       "to R more times (it resumes from its saved state).")] = 0,
    fail_fast: Annotated[bool, Opt("--fail-fast", help="Stop at the first job that fails "
                         "after its retries.")] = False,
    steps: Annotated[int | None, Opt("--steps", min=1, metavar="N", help="Steps of every "
                     "job (the scene's 'steps'; run, grad and optimize); not with --set or "
                     "--sweep steps=.")] = None,
    checkpoints: Annotated[int | None, Opt("--checkpoints", min=0, metavar="N", help="grad: "
                           "store at most N states (binomial checkpointing).")] = None,
    memory: Annotated[str | None, Opt("--memory", metavar="SIZE", help="grad: memory for "
                      "stored states.")] = None,
    iterations: Annotated[int | None, Opt("--iterations", min=1, metavar="N", help="optimize: "
                          "iterations (default: the scene's).")] = None,
    mode: Annotated[str, Opt("--mode", metavar="reverse|forward", help="grad: reverse or "
                    "forward mode, as simrun grad --mode.")] = "reverse",
    check: Annotated[bool, Opt("--check", help="grad: also compare with central differences "
                     "and a Taylor test, as simrun grad --check; a job whose check is not "
                     "'ok' fails (its folder keeps the check).")] = False,
    method: Annotated[str, Opt("--method", metavar="trajectory|ensemble", help="grad: the "
                      "trajectory's derivative or the canonical average's, as simrun grad "
                      "--method.")] = "trajectory",
    equilibrate: Annotated[int | None, Opt("--equilibrate", min=0, metavar="STEPS",
                           help="grad --method ensemble: steps discarded before averaging."
                           )] = None,
    sample_every: Annotated[int | None, Opt("--sample-every", min=1, metavar="N", help="grad "
                            "--method ensemble: a frame every N steps.")] = None,
    no_render: Annotated[bool, Opt("--no-render", help="run: skip the pictures.")] = False,
    quiet: common.QuietOpt = False,
    threads: ThreadsOpt = None,
    allow_outside: common.AllowOutsideOpt = False,
    device: common.DeviceOpt = common.Device.cpu,
    debug: common.DebugOpt = False, reproducible: common.ReproducibleOpt = True,
) -> None:
    """Run `run`, `grad` or `optimize` at every point of a sweep, on Dask.

    DIR gets one folder per job (what `simrun run/grad --out` writes), summary.csv (one row
    per job: swept values, status done/failed/running, folder, error, results), batch.log
    and plots. Running the same command again skips jobs done with the same scene and kernel
    sources (content hash), retries failed ones and resumes interrupted runs.

    \b
    Examples:
      simrun batch scenes/gravity.yaml --sweep dt=1e-5,2e-5 --sweep energy.0.params.softening="logspace(-3,-1,3)"
      simrun batch scenes/gravity.yaml --sweep "dt=linspace(1e-5,4e-5,8)" --scheduler tcp://127.0.0.1:8786
      simrun batch scenes/gravity.yaml --sweep dt=1e-5,2e-5 --cluster slurm --cluster-jobs 4 --walltime 01:00:00

    Exit status: 0 every job done, 1 a job failed after its retries, 2 bad input (nothing
    was submitted), 130 interrupted (summary.csv and finished folders stay valid).
    """
    common.require_device(device)  # before anything is submitted
    options = _job_options(wrt, threads, no_render, steps, checkpoints, memory, iterations,
                           {"mode": mode, "check": check, "method": method,
                            "equilibrate": equilibrate, "sample_every": sample_every})
    if device is common.Device.cuda:
        options["device"] = "cuda"  # each job runs under it (batch/task.py)
    if debug:
        options["debug"] = True  # each job bounds-checks its kernels (batch/task.py)
    if not reproducible:
        options["reproducible"] = False  # each job's threads add floats as they arrive
    batch_job(dict(scene=scene_path, sweeps=list(sweep or []), sweep_file=sweep_file,
                   samples=samples, sample_seed=sample_seed, job=job, sets=list(sets or []),
                   options=options,
                   out_dir=out_dir, retries=retries, fail_fast=fail_fast,
                   allow_outside=allow_outside),
              lambda: _engine(workers, scheduler, cluster, dict(
                  jobs=cluster_jobs, cores=cluster_cores, memory=cluster_memory,
                  walltime=walltime, queue=queue, account=account, host=cluster_host)),
              quiet)


def batch_job(arguments: dict[str, Any], engine: Callable[[], Any], quiet: bool) -> None:
    """`simrun batch` and `simrun resume` of a batch folder: ``run_batch(**arguments)`` on
    ``engine()``, reported as it goes; Ctrl-C names the command that continues it."""
    from simrun.batch import run_batch  # start-up: dask

    reporter = _Reporter(quiet)

    def interrupted() -> str:
        where = reporter.out_dir
        if where is None or not (where / "summary.csv").is_file():
            return "no job had finished; run the same command again to start the batch"
        return (f"the finished jobs and {where / 'summary.csv'} are kept; "
                f"{how_to_continue(where)}")

    with exit_codes(interrupted, lambda: reporter.out_dir):
        try:
            result = run_batch(**arguments, engine=engine(), on_event=reporter)
        finally:
            reporter.close()
    done, failed = result.count("done"), result.count("failed")
    out.print(f"{done} of {len(result.rows)} jobs done ({result.skipped} already done before), "
              f"{failed} failed, in {result.wall_s:.1f} s on {result.engine}")
    out.print(f"  summary   {result.summary}")
    for path in result.plots:
        out.print(f"  plot      {path}")
    if not result.ok:
        raise typer.Exit(EXIT_FAILED)
