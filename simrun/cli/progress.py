"""A rich progress bar with steps/s, fed by the stepper's progress callback; where stderr is
not a terminal (nohup, cron, a batch scheduler), lines in the job folder's progress.log."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from simrun.cli.common import err

if TYPE_CHECKING:  # the stepper loads the compiler: a command that fails early needs neither
    from simrun.stepper.run import ProgressFn


class StepsPerSecond(ProgressColumn):
    """The rate between the reports of the last 30 s (rich's estimate): "recent". The
    summary's rate, "overall", counts the whole job after set-up, the first steps and the
    outputs written at the end too, so it is lower (lj_melt: 288 against 149)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} steps/s recent" if speed else "- steps/s recent",
                    style="cyan")


LOG_NAME = "progress.log"


class ProgressLog:
    """Appends a line to FOLDER/progress.log at most every `every` seconds, and the last
    state when closed: `tail -f` shows how far a job without a terminal got. `folder` is
    called on each report, since `run` picks its folder only once the kernels compiled."""

    def __init__(self, label: str, folder: Callable[[], Path | None], every: float = 1.0):
        self.label, self.folder, self.every = label, folder, every
        self.start = time.perf_counter()
        self.next_line = 0.0
        self.pending: str | None = None
        self.first: tuple[str, int, float] | None = None

    def report(self, text: str) -> None:
        self.pending = text
        now = time.perf_counter()
        if now >= self.next_line:
            self.next_line = now + self.every
            self.flush()

    def steps(self, done: int, total: int, phase: str = "") -> None:
        now = time.perf_counter()
        if self.first is None or self.first[0] != phase or done < self.first[1]:
            self.first = (phase, done, now)  # the rate from this phase's first report on
        rate = (done - self.first[1]) / (now - self.first[2]) if now > self.first[2] else 0.0
        speed = f", {rate:,.0f} steps/s" if rate > 0 else ""
        self.report(f"{phase + ' ' if phase else ''}{done}/{total} steps "
                    f"({100 * done / max(total, 1):.0f}%){speed}")

    def flush(self) -> None:
        folder = self.folder()
        if self.pending is None or folder is None or not Path(folder).is_dir():
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        elapsed = time.perf_counter() - self.start
        try:
            with open(Path(folder) / LOG_NAME, "a") as log:
                log.write(f"{stamp} {self.label}: {self.pending}, {elapsed:.1f} s\n")
        except OSError:  # progress is a courtesy: a full disk must not stop the job
            pass
        self.pending = None


@contextmanager
def step_bar(label: str, enabled: bool = True,
             folder: Callable[[], Path | None] | None = None) -> Iterator[ProgressFn | None]:
    """Yield a callback ``(done, total)`` that drives a bar on stderr (None when disabled).

    The bar appears with the first step, so a scene that fails while its kernels compile
    prints only its error; on a terminal a transient "compiling" line shows until then.
    Where stderr is not a terminal and `folder` names the job's folder, the callback writes
    progress.log there instead."""
    if folder is not None and not err.is_terminal:
        log = ProgressLog(label, folder)
        with _bar(label, enabled) as bar:
            def both(done: int, total: int, phase: str = "") -> None:
                log.steps(done, total, phase)
                if bar is not None:
                    bar(done, total, phase)
            try:
                yield both
            finally:
                log.flush()
        return
    with _bar(label, enabled) as bar:
        yield bar


@contextmanager
def _bar(label: str, enabled: bool) -> Iterator[ProgressFn | None]:
    """The rich bar, on a terminal only: elsewhere (a log file, cron's mail) it would be a
    line of box-drawing characters written once at the end."""
    if not enabled or not err.is_terminal:
        yield None
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               StepsPerSecond(), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    status = err.status(f"{label}: compiling kernels") if err.is_terminal else None
    bar: Progress | None = None
    task = None
    if status is not None:
        status.start()

    def update(done: int, total: int, phase: str = "") -> None:
        nonlocal bar, task
        if bar is None:
            if status is not None:
                status.stop()
            bar = Progress(*columns, console=err, transient=False)
            bar.start()
            task = bar.add_task(label, total=total)
        bar.update(task, completed=done, total=total,
                   description=f"{label} {phase}" if phase else label)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()
        elif status is not None:
            status.stop()


@contextmanager
def iteration_bar(label: str, enabled: bool = True, folder: Path | None = None
                  ) -> Iterator[Callable[[int, int, float, float], None] | None]:
    """Yield a callback ``(iteration, iterations, loss, gradient norm)`` for `optimize`'s bar
    on stderr (None when disabled); without a terminal, lines in `folder`/progress.log."""
    if folder is not None and not err.is_terminal:
        log = ProgressLog(label, lambda: folder)
        try:
            yield lambda it, total, loss, grad: log.report(
                f"iteration {it}/{total}, loss {loss:.6g}, |g| {grad:.3g}")
        finally:
            log.flush()
        return
    if not enabled or not err.is_terminal:
        yield None
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]}  |g| {task.fields[grad]}", style="cyan"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task(label, total=None, loss="-", grad="-")

        def update(it: int, total: int, loss: float, grad: float) -> None:
            bar.update(task, completed=it, total=total, loss=f"{loss:.4g}", grad=f"{grad:.3g}")

        yield update
