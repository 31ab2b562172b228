"""Errors a user can fix. The CLI prints them as one line and exits with status 2."""


class UserError(Exception):
    """A mistake in input, options or installed plugins; the message says what and where."""


class PluginError(UserError):
    """A plugin misbehaved (bad output, failed to load); the message names the plugin."""


def reason(e: BaseException, limit: int = 200) -> str:
    """An exception as one short line, "Type: first line of its message", for a UserError to quote."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:limit]}" if first else type(e).__name__
