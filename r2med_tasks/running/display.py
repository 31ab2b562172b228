"""What a run shows on the console: its progress bars and the lines it prints beside them. Kept apart
from the runner, which says what happens and never how it looks: rich is used here only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..llm.endpoint import RetryLine
from ..tasks.specs import TaskSpec


class SubProgress:
    """The bars a component asks for through ``context.progress(description, total)``, which
    returns ``advance(n)``; they vanish when the call that asked for them returns."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.bars = progress, []

    def __call__(self, description: str, total: int):
        bar = self.progress.add_task(f"  {description}", total=total)
        self.bars.append(bar)
        return lambda n: self.progress.advance(bar, n)

    def clear(self) -> None:
        for bar in self.bars:
            self.progress.remove_task(bar)
        self.bars.clear()


def retry_row(progress: Progress) -> RetryLine:
    """The run's API retries (``Context.retries``) as one row of the progress display, replaced by
    each retry and hidden while none waits: not a printed line per retry. Where the display is off
    (no terminal: a CI log), a line at least every ``WAITING_LINE_S`` seconds while requests wait
    says what for instead."""
    row = progress.add_task("", total=None, visible=False)
    console = progress.console
    say = None if console.is_terminal else lambda line: console.print(f"[yellow]{escape(line)}[/]", soft_wrap=True)
    return RetryLine(lambda line: progress.update(row, description=f"  [yellow]{escape(line or '')}[/]",
                                                  visible=line is not None), say=say)


class TaskBars:
    """The bar over a run's tasks, saying what the current one is doing (``step(task)``), and what
    its component calls get: their own bars (``components``) and the retries row (``retries``)."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.bar = progress.add_task("", total=total)
        self.components = SubProgress(progress)
        self.retries = retry_row(progress)

    def step(self, task: TaskSpec) -> Callable[[str], None]:
        """What a task's steps call with their description."""
        return lambda text: self.progress.update(self.bar, description=f"{task.short_name}: {text}")

    def advance(self) -> None:
        self.progress.advance(self.bar)


class RunDisplay:
    """A run's ``console``: the lines it prints, and the bars of its tasks (:meth:`tasks`)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def waiting(self, message: str) -> None:
        self.console.print(f"[yellow]waiting:[/] {escape(message)}", soft_wrap=True)

    def recomputing(self, task: TaskSpec, reason: str) -> None:
        self.console.print(f"{escape(task.short_name)}: recomputing, {escape(reason)}", soft_wrap=True)

    def data_warning(self, warning: str) -> None:
        self.console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)

    def no_documents(self, task: TaskSpec, queries: int) -> None:
        self.console.print(f"[yellow]warning:[/] {task.name}: {queries} queries got no documents; "
                           "they score 0 in the averages")

    @contextmanager
    def tasks(self, total: int) -> Iterator[TaskBars]:
        """The bars while ``total`` tasks are evaluated; only on a terminal: elsewhere (a log file,
        a pipe) they would leave blank lines."""
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=True, disable=not self.console.is_terminal) \
                as progress:
            yield TaskBars(progress, total)
