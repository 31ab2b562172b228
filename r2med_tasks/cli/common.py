"""What every command shares: the two consoles, one-line errors with exit status 2, the registry."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import click
from rich.console import Console
from rich.markup import escape

from ..errors import UserError

out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class CommandError(click.ClickException):
    exit_code = 2

    def show(self, file=None) -> None:
        err.print(f"[bold red]Error:[/] {escape(self.message)}", soft_wrap=True)


@contextmanager
def user_errors(debug: bool = False):
    """User mistakes become one line and exit status 2; ``--debug`` keeps the traceback."""
    try:
        yield
    except UserError as e:
        if debug:
            raise
        raise CommandError(str(e)) from None


def registry():
    from ..plugins import get_plugins
    from ..registry import build_registry

    plugins = get_plugins()
    reg = build_registry(plugins)
    return plugins, reg


def warn_broken(plugins) -> None:
    for b in plugins.broken:
        err.print("[yellow]warning:[/] " + escape(f"plugin {b.name} {b.version or ''} ({b.module}) is broken and "
                  f"was skipped: {b.error}. Set R2MED_LOAD_PLUGINS to load only the packages you name."),
                  soft_wrap=True)


