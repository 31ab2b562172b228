"""Command line: ``r2med`` and ``r2med-run`` (= ``r2med run``), one module per command group, each a
thin shell over the library. Start-up stays light: these modules import click, rich and the plugin
registry only; torch, mteb and models load when a command needs them.
"""

from __future__ import annotations

import click

from .common import Group, closed_streams_to_nowhere, exit_after_interrupt, tolerant_streams
from .fuse import fuse_command
from .generations import export_generations_command
from .leaderboard import compare_command, export_first_stage_command, export_mteb_command, leaderboard_command
from .listing import list_command, plugins_command
from .reproduce import reproduce_command
from .run import run_command
from .scaffold import new_plugin_command
from .show import show_command
from .sweep import sweep_command


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="r2med")
def cli():
    """R2MED evaluation harness: MTEB-compatible tasks, pluggable retrievers, rewriters, rerankers."""


for command in (run_command, plugins_command, list_command, leaderboard_command, compare_command, fuse_command,
                export_mteb_command, export_first_stage_command, export_generations_command, reproduce_command):
    cli.add_command(command)
cli.add_command(show_command)
cli.add_command(sweep_command)
cli.add_command(new_plugin_command)


def main() -> None:
    _process(lambda: cli(prog_name="r2med"))


def run_main() -> None:
    _process(lambda: run_command(prog_name="r2med-run"))


def _process(command) -> None:
    """Run the command as this process's whole work: a stream the shell closed goes nowhere, output
    the terminal cannot encode is replaced, and after a Ctrl-C the process's exit is the command's own.
    (Done here, not at import: importing the commands changes nothing.)"""
    closed_streams_to_nowhere()
    tolerant_streams()
    try:
        command()
    except SystemExit as e:
        exit_after_interrupt(e.code)
        raise
