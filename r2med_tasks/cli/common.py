"""What every command shares: the two consoles, the error boundary (one line and exit status 2
for what a user can fix, exit 130 on Ctrl-C), the registry."""

from __future__ import annotations

import atexit
import errno
import json
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from ..errors import UserError, os_problem
from ..terminal import printable


out = Console(highlight=False, width=None if sys.stdout is not None and sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DEBUG = "r2med_debug"  # ctx.meta key: --debug was given (meta is shared by a group and its commands)


class CommandError(click.ClickException):
    exit_code = 2

    def show(self, file=None) -> None:
        # printable: file names, ids and plugin messages reach the terminal; it also keeps the message one line
        err.print(f"[bold red]Error:[/] {escape(printable(self.message))}", soft_wrap=True)


def _remember_debug(ctx: click.Context, param, value: bool) -> None:
    if value:
        ctx.meta[DEBUG] = True


def debug_option():
    """``--debug`` on a command: tracebacks instead of one-line errors."""
    return click.Option(["--debug"], is_flag=True, expose_value=False, is_eager=True, callback=_remember_debug,
                        help="Show tracebacks instead of one-line errors.")


def _debugging() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(DEBUG))


@contextmanager
def user_errors(debug: bool | None = None):
    """The error boundary: a failure the user can fix (a :class:`UserError`, a file that cannot be
    read or written, text that is not UTF-8, a corrupt JSON file) becomes one line and exit status
    2; Ctrl-C exits with 130, quietly. Anything else is a bug and keeps its traceback, as every
    failure does under ``--debug`` (default: whether the command line gave it)."""
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        raise
    except click.UsageError as e:
        raise CommandError(usage_line(e)) from None
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except KeyboardInterrupt:
        err.print("Interrupted.")
        raise click.exceptions.Exit(130) from None
    except Exception as e:
        message = user_message(e)
        if message is None or debug or (debug is None and _debugging()):
            raise
        raise CommandError(message) from None


def usage_line(e: click.UsageError) -> str:
    """click's three-line usage error as one line."""
    return " ".join(e.format_message().split()) + (f" (see `{e.ctx.command_path} --help`)" if e.ctx else "")


def user_message(e: BaseException) -> str | None:
    """One line saying what went wrong and what to do, or None when ``e`` is not the user's to fix."""
    if isinstance(e, UserError):
        return str(e)
    if isinstance(e, OSError):
        return None if e.errno == errno.EPIPE else os_message(e)  # EPIPE (`| head`): click exits quietly
    # The readers of r2med's own files name the file; these are the ones that slipped through.
    if isinstance(e, UnicodeDecodeError):
        return (f"not UTF-8 text ({e.reason} at byte {e.start}); re-encode the file as UTF-8 or pass another one")
    if isinstance(e, json.JSONDecodeError):
        return (f"line {e.lineno}: not valid JSON ({e.msg} at column {e.colno}); the file is corrupt or not the "
                "file meant: fix, delete or replace it")
    if isinstance(e, ValidationError):  # a file's content as pydantic models (mteb's TaskResult) read it
        first = (e.errors(include_url=False) or [{"loc": (), "msg": str(e)}])[0]
        field = ".".join(map(str, first["loc"]))
        return (f"{e.title}{' field ' + field if field else ''}: {first['msg']}; the file is corrupt or not the "
                "file meant: fix, delete or replace it")
    return None


def os_message(e: OSError) -> str:
    """An OSError as one line (``r2med_tasks.errors.os_problem``), suggesting the option that chose
    where the failing file was written (``--cache-dir`` for a cache file, else ``--output``)."""
    return os_problem(e, _option_of(e.filename))


def _option_of(filename) -> str | None:
    """The path option of the running command whose folder holds ``filename`` (the cache folder's
    default counts for ``--cache-dir``), else ``--output`` when the command has one."""
    from ..components.context import default_cache_dir

    ctx = click.get_current_context(silent=True)
    params: dict = {}
    while ctx is not None:
        params = {**ctx.params, **params}
        ctx = ctx.parent
    if filename is not None:
        target = os.path.abspath(os.fsdecode(filename))
        places = {"--cache-dir": params.get("cache_dir") or (default_cache_dir() if "cache_dir" in params else None),
                  "--output": params.get("output")}
        for option, folder in places.items():
            if folder is not None and target.startswith(os.path.abspath(folder) + os.sep):
                return option
    return "--output" if "output" in params else None


def _again(signum, frame) -> None:
    os.write(2, b"\nInterrupted again: quitting now.\n")
    os._exit(130)


@contextmanager
def interrupts():
    """Ctrl-C while a command runs: the first press stops it (a KeyboardInterrupt: finished work is
    kept, exit 130); from then on another press quits at once with one line, exit 130: no wait for
    work in flight, no traceback from exit handlers, no abort from native threads."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def first(signum, frame) -> None:
        signal.signal(signal.SIGINT, _again)  # for the rest of the process
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is first:  # never pressed: as it was
            signal.signal(signal.SIGINT, previous)


def closed_streams_to_nowhere() -> None:
    """A stream the shell closed (``>&-``, ``2>&-``): Python has None there. What would be written
    to it goes nowhere, and the command still does its work (a run still writes its results)."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (the process's stream)


def tolerant_streams() -> None:
    """Output a terminal cannot encode (``PYTHONIOENCODING=ascii``, a latin-1 locale) is shown with
    replacements rather than failing: names from files and the tables' symbols (×, ⊕, Δ)."""
    for stream, errors in ((sys.stdout, "replace"), (sys.stderr, "backslashreplace")):
        try:
            stream.reconfigure(errors=errors)
        except (AttributeError, ValueError, OSError):
            pass


INTERRUPT_GRACE_S = 3.0
"""How long a process a Ctrl-C stopped waits for its work in flight: what finishes in time is kept
(an LLM answer, a batch), the rest is abandoned (a request to a server that does not answer), so a
first Ctrl-C ends the process within seconds, never a request's timeout later."""


def work_in_flight() -> list[threading.Thread]:
    """The threads still working (an LLM request, a batch) besides the main one."""
    return [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]


def exit_after_interrupt(code) -> None:
    """The end of a process whose command a Ctrl-C stopped: wait at most ``INTERRUPT_GRACE_S`` for
    the work in flight (so what finishes is stored) and run the exit handlers while another Ctrl-C
    still quits at once, then exit. Python's own exit would wait for every thread, and restore the
    default handler first, so that a second press during it would print a traceback or abort."""
    if signal.getsignal(signal.SIGINT) is not _again:
        return
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    for thread in work_in_flight():
        thread.join(max(0.0, deadline - time.monotonic()))
    if not work_in_flight():  # else abandoned: their answers are not stored, and the process exits now
        threading._shutdown()  # tells thread pools to stop, as exit does
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else 130)


class _InsideBoundary:
    """Parsing and running inside the error boundary: usage errors and Ctrl-C too."""

    def make_context(self, *args, **kwargs) -> click.Context:
        with user_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context):
        with interrupts(), user_errors():
            return super().invoke(ctx)


class Command(_InsideBoundary, click.Command):
    """A command inside the error boundary, with ``--debug``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        add_debug_option(self)


class Group(_InsideBoundary, click.Group):
    """A group whose commands (its own and any added later) run inside the error boundary, each with
    ``--debug``; Ctrl-C while a command starts up exits with 130 as it does later."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        add_debug_option(cmd)
        super().add_command(cmd, name)


def add_debug_option(cmd: click.Command) -> None:
    if not any(p.name == "debug" for p in cmd.params):
        cmd.params.append(debug_option())


def installed_plugins():
    """The installed plugins (``warn_broken`` tells of those that failed to load) and the registry
    of what they register (``r2med_tasks.api.registry``)."""
    from ..api import registry
    from ..running.discovery import get_plugins

    return get_plugins(), registry()


def warn_broken(plugins) -> None:
    for b in plugins.broken:
        err.print("[yellow]warning:[/] " + escape(printable(
            f"plugin {b.name} {b.version or ''} ({b.module}) is broken and was skipped: {b.error}. "
            "Set R2MED_LOAD_PLUGINS to load only the packages you name.")), soft_wrap=True)
