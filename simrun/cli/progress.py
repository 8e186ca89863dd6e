"""A rich progress bar with steps/s, fed by the stepper's progress callback."""

from __future__ import annotations

from collections.abc import Iterator
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
    """Yield a callback ``(done, total)`` that drives a bar on stderr (None when disabled)."""
    if not enabled:
        yield None
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               StepsPerSecond(), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
