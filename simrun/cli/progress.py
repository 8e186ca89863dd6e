"""A rich progress bar with steps/s, fed by the stepper's progress callback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
from simrun.stepper.run import ProgressFn


class StepsPerSecond(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} steps/s" if speed else "- steps/s", style="cyan")


@contextmanager
def step_bar(label: str, enabled: bool = True) -> Iterator[ProgressFn | None]:
    """Yield a callback ``(done, total)`` that drives a bar on stderr (None when disabled).

    The bar appears with the first step, so a scene that fails while its kernels compile
    prints only its error; on a terminal a transient "compiling" line shows until then."""
    if not enabled:
        yield None
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               StepsPerSecond(), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    status = err.status(f"{label}: compiling kernels") if err.is_terminal else None
    bar: Progress | None = None
    task = None
    if status is not None:
        status.start()

    def update(done: int, total: int) -> None:
        nonlocal bar, task
        if bar is None:
            if status is not None:
                status.stop()
            bar = Progress(*columns, console=err, transient=False)
            bar.start()
            task = bar.add_task(label, total=total)
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()
        elif status is not None:
            status.stop()


@contextmanager
def iteration_bar(label: str, enabled: bool = True
                  ) -> Iterator[Callable[[int, int, float, float], None] | None]:
    """Yield a callback ``(iteration, iterations, loss, gradient norm)`` for `optimize`'s bar
    on stderr (None when disabled)."""
    if not enabled:
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
