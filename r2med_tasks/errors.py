"""Errors a user can fix. The CLI prints them as one line and exits with status 2."""


class UserError(Exception):
    """A mistake in input, options or installed plugins; the message says what and where."""


class PluginError(UserError):
    """A plugin misbehaved (bad output, failed to load); the message names the plugin."""
