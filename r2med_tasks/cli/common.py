"""What every command shares: the two consoles, the error boundary (one line and exit status 2
for what a user can fix, exit 130 on Ctrl-C), the registry."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from ..errors import UserError
from ..terminal import printable

out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
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


_ADVICE = {
    errno.ENOSPC: "no space left on the device; free space or write elsewhere",
    errno.EDQUOT: "disk quota exceeded; free space or write elsewhere",
    errno.EACCES: "permission denied; choose a location you can write (or read), or fix its permissions",
    errno.EPERM: "operation not permitted; choose a location you can write, or fix its permissions",
    errno.EROFS: "read-only file system; choose a writable location",
    errno.EISDIR: "is a folder where a file is expected; name a file, or replace the folder with one",
    errno.ENOENT: "no such file or folder",
    errno.ENAMETOOLONG: "file name too long; choose a shorter path",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n) and run again",
}


def os_message(e: OSError) -> str:
    """An OSError as "path: what happened; what to do", naming the path the user chose (not the
    hidden temp file beside it) and, for a path under a file, that file."""
    raw = e.filename2 if e.filename2 is not None and e.errno in (errno.EISDIR, errno.ENOTDIR) else e.filename
    path = _shown(raw) if raw is not None else None
    what = _ADVICE.get(e.errno, f"{e.strerror or type(e).__name__}")
    if e.errno in (errno.ENOTDIR, errno.EEXIST) and raw is not None:  # EEXIST: mkdir where a file is
        blocker = next((p for p in (Path(os.fsdecode(raw)), *Path(os.fsdecode(raw)).parents) if p.is_file()), None)
        if blocker:
            return f"{blocker} is a file, not a folder; choose another path"
        what = "not a folder; choose a folder"
    option = _output_option()
    if option and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):  # only ever writing
        what += f" (e.g. another {option})"
    return f"{path}: {what}" if path else what


def _shown(name) -> str:
    """A path as the user knows it: ``dir/.name.abc123.tmp`` (an atomic write's temp file) is ``dir/name``."""
    path = Path(os.fsdecode(name))
    match = re.fullmatch(r"\.(.+)\.[A-Za-z0-9_]{6,16}\.tmp", path.name)
    return str(path.with_name(match.group(1)) if match else path)


def _output_option() -> str | None:
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if "output" in ctx.params:
            return "--output"
        ctx = ctx.parent
    return None


class _InsideBoundary:
    """Parsing and running inside the error boundary: usage errors and Ctrl-C too."""

    def make_context(self, *args, **kwargs) -> click.Context:
        with user_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context):
        with user_errors():
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


def registry():
    from ..plugins import get_plugins
    from ..registry import build_registry

    plugins = get_plugins()
    reg = build_registry(plugins)
    return plugins, reg


def warn_broken(plugins) -> None:
    for b in plugins.broken:
        err.print("[yellow]warning:[/] " + escape(printable(
            f"plugin {b.name} {b.version or ''} ({b.module}) is broken and was skipped: {b.error}. "
            "Set R2MED_LOAD_PLUGINS to load only the packages you name.")), soft_wrap=True)
