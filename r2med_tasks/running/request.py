"""A run request, and the one function that executes it. Every entry point (``r2med-run``,
``evaluate``, ``r2med sweep``, ``r2med reproduce``) describes a run once, as a :class:`RunRequest`,
and hands it to :func:`execute`; from there the description is carried, never re-parsed.
``r2med-run``'s arguments have one parser, :func:`parse_run_args`, which the command line, sweep
files and stored commands go through alike, so a command means the same thing wherever it is read.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import UserError
from ..results.layout import DEFAULT_OUTPUT
from ..scoring.runs import DEFAULT_TOP_K

if TYPE_CHECKING:
    from rich.console import Console

    from ..components.context import Context
    from ..results.outcomes import RunOutcome
    from .pipelines import Pipeline
    from .registry import Registry
    from ..tasks.specs import TaskSpec

class PathOption(click.Path):
    """A path option's value: never empty (``--output ""`` would write into the current folder)."""

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("empty; give a folder (for the current one, write .)", param, ctx)
        return super().convert(value, param, ctx)


# r2med-run's parameters: the command line's, and the one parser of every stored or swept command.
RUN_PARAMS: list[click.Parameter] = [
    click.Option(["--plugin", "-p", "plugin_names"], multiple=True, required=True, metavar="NAME",
                 help="Component to use (retriever, rewriter or reranker); repeat for a pipeline. "
                      "KIND:NAME picks one kind when names clash."),
    click.Option(["--tasks", "-t", "task_names"], multiple=True, metavar="TASKS",
                 help="Task names, aliases (Biology, PMC-Clinical, sample), groups (qa-reference, clinical-evidence, "
                      "clinical-case) or r2med; comma-separated or repeated. Default: the folders found in "
                      "--data-dir, else all eight R2MED tasks."),
    click.Option(["--data-dir"], type=PathOption(), metavar="DIR",
                 help="Read tasks from DIR/<Name>/{corpus,query,qrels}.jsonl instead of the hub."),
    click.Option(["--output"], type=PathOption(), default=DEFAULT_OUTPUT, show_default=True,
                 help="Results folder (mteb's layout: OUTPUT/<org__model>/<revision>/; results on local data "
                      "under OUTPUT/local-data/)."),
    click.Option(["-o", "options"], multiple=True, metavar="KEY=VALUE",
                 help="Component option; NAME.KEY=VALUE sends it to one component. `r2med plugins NAME` lists a "
                      "component's options, their types, bounds and defaults."),
    click.Option(["--top-k"], type=click.IntRange(1), default=DEFAULT_TOP_K, show_default=True,
                 help="Documents kept per query (the published runs keep 100)."),
    click.Option(["--device"], metavar="DEVICE",
                 help="cpu, cuda, cuda:N, or cuda:0,cuda:1 for several GPUs: sets the device of every selected "
                      "component that runs models (same as -o device=...)."),
    click.Option(["--cache-dir"], type=PathOption(), metavar="DIR", envvar="R2MED_CACHE_DIR",
                 help="Where components keep indexes, embeddings and LLM answers "
                      "(default: $R2MED_CACHE_DIR, else $XDG_CACHE_HOME/r2med or ~/.cache/r2med)."),
    click.Option(["--overwrite"], is_flag=True, help="Recompute tasks that already have results."),
    click.Option(["--dry-run"], is_flag=True,
                 help="Check plugins, options and tasks, and show the results folder and which tasks would be "
                      "computed; loads no data and downloads nothing."),
    click.Option(["--json", "as_json"], is_flag=True, help="Print the summary (or the --dry-run plan) as JSON."),
]


@dataclass(frozen=True)
class RunRequest:
    """One run, as plain data: ``components`` and ``options`` as ``--plugin`` and ``-o`` give them;
    ``tasks`` as ``--tasks`` names them (None: the folders of ``data_dir``, else all eight).
    ``given``: for a request parsed from words (:func:`parse_run_args`), the parameters the words
    set themselves (not defaults, not the environment), which a sweep's own options leave alone."""

    components: tuple[str, ...]
    options: tuple[str, ...] = ()
    tasks: tuple[str, ...] | None = None
    data_dir: Path | None = None
    output: Path = DEFAULT_OUTPUT
    cache_dir: Path | None = None
    overwrite: bool = False
    top_k: int = DEFAULT_TOP_K
    device: str | None = None
    given: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def arguments(self) -> list[str]:
        """The ``r2med-run`` arguments of this request (:func:`parse_run_args` gives it back)."""
        words = [w for c in self.components for w in ("--plugin", c)]
        words += [w for o in self.options for w in ("-o", o)]
        words += [w for t in self.tasks or () for w in ("--tasks", t)]
        if self.top_k != DEFAULT_TOP_K:
            words += ["--top-k", str(self.top_k)]
        words += [w for flag, value in (("--device", self.device), ("--data-dir", self.data_dir),
                                        ("--cache-dir", self.cache_dir)) if value is not None
                  for w in (flag, str(value))]
        if self.output != DEFAULT_OUTPUT:
            words += ["--output", str(self.output)]
        return words + (["--overwrite"] if self.overwrite else [])


def request_from_params(params: dict[str, Any], given: frozenset[str] = frozenset()) -> RunRequest:
    """The request of ``r2med-run``'s parsed parameters (``given``: those the words set)."""
    return RunRequest(components=tuple(params["plugin_names"]), options=tuple(params["options"]),
                      tasks=tuple(params["task_names"]) or None, data_dir=params["data_dir"],
                      output=params["output"], cache_dir=params["cache_dir"], overwrite=params["overwrite"],
                      top_k=params["top_k"], device=params["device"], given=given)


_PARSER = click.Command("r2med-run", params=RUN_PARAMS, add_help_option=True)


def parse_run_args(words: Sequence[str]) -> RunRequest:
    """``r2med-run`` arguments (without the program name) as ``r2med-run`` parses them; a mistake
    is a one-line :class:`UserError`. The display flags (``--dry-run``, ``--json``) are the
    command line's, not the run's: a caller that refuses them finds them in ``given``."""
    from click.core import ParameterSource

    try:
        ctx = _PARSER.make_context("r2med-run", list(words))
    except click.exceptions.Exit:
        raise UserError("--help: not a run") from None
    except click.ClickException as e:
        raise UserError(e.format_message()) from None
    given = frozenset(n for n in ctx.params if ctx.get_parameter_source(n) is ParameterSource.COMMANDLINE)
    return request_from_params(ctx.params, given)


def parse_command(command: Sequence[str] | str) -> RunRequest:
    """A stored or printed ``r2med-run`` command (words, or one shell line), parsed: a published
    row's, one ``r2med reproduce`` runs; never a run's own, which carries its request."""
    words = shlex.split(command) if isinstance(command, str) else list(command)
    if words and Path(words[0]).name in ("r2med-run", "r2med"):
        words = words[2:] if Path(words[0]).name == "r2med" and words[1:2] == ["run"] else words[1:]
    return parse_run_args(words)


def command_line(words: Sequence[str], *, tasks: Sequence[str] | None = None, data_dir: Path | None = None,
                 output: Path | None = None) -> str:
    """A pipeline's command (``Pipeline.command()``'s words) as one shell line, with the tasks,
    data and output that make it the command of a run."""
    words = list(words)
    if tasks:
        words += ["--tasks", ",".join(tasks)]
    if data_dir is not None:
        words += ["--data-dir", str(data_dir)]
    if output is not None and output != DEFAULT_OUTPUT:
        words += ["--output", str(output)]
    return shlex.join(words)


def choose_tasks(reg: Registry, names: Sequence[str] | None, data_dir: Path | None) -> list[TaskSpec]:
    """The tasks ``names`` picks; without names, the task folders found in ``data_dir``, else all
    eight R2MED tasks."""
    if names is not None:
        chosen = reg.tasks(list(names))
        if not chosen:
            raise UserError(f"--tasks {','.join(names)!r}: names no task; give task names, aliases, groups or r2med "
                            "(see `r2med list tasks`)")
        return chosen
    if data_dir is None:
        return reg.tasks(["r2med"])
    if not data_dir.is_dir():
        raise UserError(f"--data-dir {data_dir}: not a folder")
    found = []
    for entry in reg.entries["task"]:
        try:
            entry.spec.find_folder(data_dir, only_task=False)
            found.append(entry.spec)
        except UserError:
            pass
    if not found:
        raise UserError(f"--data-dir {data_dir}: no task folders found (expected e.g. {data_dir}/Biology/corpus.jsonl); "
                        "name the task with --tasks for a flat folder")
    return found


@dataclass
class Prepared:
    """What a request becomes once checked, once per invocation: its pipeline (components created),
    its tasks and the context every component call gets."""

    pipeline: Pipeline
    tasks: list[TaskSpec]
    context: Context


def prepare(request: RunRequest, *, pipeline: Pipeline | None = None, registry: Registry | None = None,
            log: Callable[[str], None] = lambda line: None) -> Prepared:
    """Check a request whole and create its components (cheap: models load on first use);
    ``pipeline``: one built by the caller from Python objects."""
    from ..results.folder import check_output_folder
    from ..components.model_refs import fingerprints_in
    from .pipelines import base_context, build_pipeline, instantiate

    if registry is None:
        from .discovery import get_plugins
        from .registry import build_registry

        registry = build_registry(get_plugins())
    cache_dir = _run_cache_dir(request)
    with fingerprints_in(cache_dir):
        if pipeline is None:
            pipeline = build_pipeline(registry, list(request.components), list(request.options),
                                      top_k=request.top_k, device=request.device)
        tasks = choose_tasks(registry, request.tasks, request.data_dir)
        check_output_folder(request.output, create=False)
        check_output_folder(cache_dir, create=False, option="--cache-dir")
        instantiate(pipeline, registry)
    return Prepared(pipeline, tasks, base_context(registry, cache_dir=cache_dir, log=log))


def _run_cache_dir(request: RunRequest) -> Path:
    """The cache folder a request's run uses (its ``Context.cache_dir``): ``--cache-dir``, else the
    user's cache folder."""
    from ..components.context import default_cache_dir

    return request.cache_dir or default_cache_dir()


def execute(request: RunRequest, *, console: Console, log: Callable[[str], None] = lambda line: None,
            pipeline: Pipeline | None = None, registry: Registry | None = None) -> RunOutcome:
    """Run a request: evaluate its pipeline on its tasks, reusing every task whose stored identity
    matches, and write the results; ``console`` shows progress and warnings, ``log`` gets the
    components' lines."""
    from ..results.folder import check_output_folder
    from ..components.model_refs import fingerprints_in
    from .runner import run_pipeline

    ready = prepare(request, pipeline=pipeline, registry=registry, log=log)
    check_output_folder(request.output, create=True)
    with fingerprints_in(ready.context.cache_dir):
        outcome = run_pipeline(ready.pipeline, ready.tasks, output=request.output, data_dir=request.data_dir,
                               overwrite=request.overwrite, context=ready.context, console=console)
    usages = [stage.llm_calls.usage for stage in ready.pipeline.ordered()]
    outcome.summaries = [usage.describe(usage.model) for usage in usages if usage is not None]  # LLM calls' cost
    if outcome.spec.command is not None:  # the words the run's identity carries, not built again
        outcome.command = command_line(outcome.spec.command,
                                       tasks=[t.short_name for t in ready.tasks] if request.tasks else None,
                                       data_dir=request.data_dir, output=request.output)
    return outcome


def plan_request(request: RunRequest, *, registry: Registry | None = None) -> dict[str, Any]:
    """What :func:`execute` would do, without loading data or models or downloading anything (a hub
    model resolves from the local cache only)."""
    from ..components.model_refs import fingerprints_in, hub_offline
    from .runner import plan

    with hub_offline(), fingerprints_in(_run_cache_dir(request)):
        ready = prepare(request, registry=registry)
        return plan(ready.pipeline, ready.tasks, output=request.output, data_dir=request.data_dir,
                    overwrite=request.overwrite, context=ready.context)
