"""The Python API: evaluate a retriever or a pipeline on R2MED as ``mteb.evaluate`` evaluates a model.

    import r2med_tasks as r2med
    res = r2med.evaluate("bm25", tasks="qa-reference", data_dir="~/r2med-data")
    res = r2med.evaluate(SentenceTransformer("BAAI/bge-large-en-v1.5"), tasks=["Biology"])
    res = r2med.evaluate(r2med.pipeline("hyde", "bm25", llm="openai:gpt-4o"), tasks="r2med")
    res["R2MEDBiologyRetrieval"].ndcg_at_10

Each function is what a command does (``evaluate``: ``r2med-run``, with the same results folders,
identities, resume and errors); each command parses its options, calls one and shows what it returns.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UserError
from .scoring.fusion import DEFAULT_DEPTH, DEFAULT_METHOD, DEFAULT_RRF_K
from .results.layout import DEFAULT_OUTPUT, MTEB_RESULTS
from .scoring.runs import DEFAULT_TOP_K

MAX_TRIALS = 1_000_000  # compare --trials: bounded (one trial resamples every query of a task)

if TYPE_CHECKING:
    from .board.leaderboard import Leaderboard
    from .results.outcomes import RunOutcome
    from .results.perquery import QueryDifferences, QueryView
    from .running.pipelines import Pipeline
    from .running.registry import Registry
    from .scoring.significance import Comparison

OBJECT = "python-object"  # the component name of a retriever object passed to evaluate()


def registry() -> Registry:
    """The components and tasks of the installed plugins."""
    from .running.discovery import get_plugins
    from .running.registry import build_registry

    return build_registry(get_plugins())


def pipeline(*components: str, top_k: int = DEFAULT_TOP_K, device: str | None = None,
             options: Mapping[str, Any] | None = None, **shared: Any) -> Pipeline:
    """A pipeline ``[rewriter] -> retriever -> [reranker]`` from component names, as ``--plugin``
    names them. Keyword options go to every selected component that accepts them (``-o key=value``);
    ``options={"bm25.k1": 1.2}`` addresses one component (``-o name.key=value``)."""
    from .components.options import option_text
    from .running.pipelines import build_pipeline, instantiate

    reg = registry()
    tokens = [f"{key}={option_text(value)}" for key, value in {**shared, **(options or {})}.items()]
    built = build_pipeline(reg, list(components), tokens, top_k=top_k, device=device)
    instantiate(built, reg)
    return built


def evaluate(model: Any, tasks: str | Sequence[str] | None = None, *, data_dir: str | Path | None = None,
             output: str | Path = DEFAULT_OUTPUT, cache_dir: str | Path | None = None, overwrite: bool = False,
             top_k: int = DEFAULT_TOP_K, device: str | None = None, progress: bool = False,
             on_message: Callable[[str], None] | None = None) -> RunOutcome:
    """Evaluate ``model`` on ``tasks`` as ``r2med-run`` does and return the scores; results are
    written under ``output``. ``model``: a component name, a :func:`pipeline`, a sentence-transformers
    model, or any object with the retriever protocol. The lines ``r2med-run`` prints beside its
    progress go to standard error when ``progress``, or to ``on_message``, one call per line;
    otherwise nowhere."""
    from rich.console import Console

    from .running.request import RunRequest, execute

    request = RunRequest(components=(model,) if isinstance(model, str) else (),
                         tasks=_names(tasks),
                         data_dir=Path(data_dir).expanduser() if data_dir is not None else None,
                         output=Path(output).expanduser(),
                         cache_dir=Path(cache_dir).expanduser() if cache_dir is not None else None,
                         overwrite=overwrite, top_k=top_k, device=device)
    reg = registry()
    built = None if isinstance(model, str) else _as_pipeline(model, reg, top_k=top_k, device=device)
    if progress and on_message is not None:
        raise UserError("evaluate(): progress=True shows the run's lines on standard error; on_message takes them "
                        "instead, so give one or the other")
    if on_message is not None:  # not a terminal: no progress bars, each printed line handed over as text
        console = Console(file=_Lines(on_message), width=100_000, color_system=None, highlight=False)
    else:
        console = Console(stderr=True, quiet=not progress, highlight=False)
    return execute(request, console=console, log=lambda line: console.print(line, markup=False), pipeline=built,
                   registry=reg)


def _names(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """A name or names (``tasks="Biology"``, ``tasks=["Biology", "r2med"]``) as a tuple; None when not given."""
    return None if value is None else (value,) if isinstance(value, str) else tuple(value)


class _Lines(io.TextIOBase):
    """A text stream handing each complete line written to it to ``emit``."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit, self.pending = emit, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.emit(line.rstrip())
        return len(text)


def _as_pipeline(model: Any, reg: Registry, *, top_k: int, device: str | None) -> Pipeline:
    from .components.specs import Retriever
    from .running.pipelines import Pipeline, build_pipeline, check_interface, instantiate

    if isinstance(model, Pipeline):
        if top_k != DEFAULT_TOP_K and model.top_k != top_k:
            raise UserError("evaluate(top_k=...) with a pipeline: set top_k in pipeline(...) instead")
        return model
    if isinstance(model, str):
        return pipeline(model, top_k=top_k, device=device)
    if _is_sentence_transformer(model):  # the st retriever encodes with the object itself
        built = build_pipeline(reg, ["st"], [], top_k=top_k, device=device)
        built.retriever.options["model"] = model
        instantiate(built, reg)
        return built
    if isinstance(model, Retriever):
        check_interface(model, "retriever", f"retriever {type(model).__name__}")
        with_object = _with_object(reg, model)
        built = build_pipeline(with_object, [f"retriever:{OBJECT}"], [], top_k=top_k)
        built.not_a_command = f"a {type(model).__name__} object passed to r2med_tasks.evaluate"
        instantiate(built, with_object)
        return built
    raise UserError(f"evaluate(): {type(model).__name__} is not a component name, a pipeline, a "
                    "sentence-transformers model or a retriever (index/search with context=)")


def _is_sentence_transformer(model: Any) -> bool:
    return any(c.__module__.startswith("sentence_transformers") and c.__name__ == "SentenceTransformer"
               for c in type(model).__mro__)


def _with_object(reg: Registry, retriever: Any) -> Registry:
    """A registry that also holds ``retriever`` as the component ``python-object``."""
    from dataclasses import replace

    from .components.specs import RetrieverSpec
    from .running.discovery import PluginInfo
    from .running.registry import Registered

    module = type(retriever).__module__.split(".")[0]
    spec = RetrieverSpec(name=OBJECT, factory=lambda options: retriever,
                         description=f"{type(retriever).__name__} passed to evaluate()")
    entries = {k: list(v) for k, v in reg.entries.items()}
    entries["retriever"].append(Registered(spec, PluginInfo(module, _version(module), module)))
    return replace(reg, entries=entries)


def _version(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None


def as_mteb_model(model: Any, *, cache_dir: Path | None = None) -> Any:
    """An mteb search model (``index``/``search``) running an r2med retriever or pipeline, so
    ``mteb.evaluate(r2med.as_mteb_model("bm25"), tasks)`` runs it inside mteb."""
    from functools import partial

    from .components.context import default_cache_dir
    from .running.mteb_model import SearchModel, task_named
    from .running.pipelines import base_context

    reg = registry()
    built = _as_pipeline(model, reg, top_k=DEFAULT_TOP_K, device=None)
    for stage in built.ordered():
        if stage.spec.members_option:  # mteb hands over one task's corpus and queries, never the saved runs it needs
            raise UserError(f"as_mteb_model: '{stage.spec.name}' is built of other retrievers' saved runs, which mteb "
                            f"cannot give it; evaluate it with r2med_tasks.evaluate(...) (or r2med-run) instead")
    return SearchModel(built, base_context(reg, cache_dir=cache_dir or default_cache_dir()),
                       partial(task_named, reg))


def fuse_runs(inputs: Sequence[str | Path], *, qrels: str | Path | None = None, task_name: str | None = None,
              data_dir: str | Path | None = None, output: str | Path = DEFAULT_OUTPUT, fusion: str = DEFAULT_METHOD,
              weights: Sequence[float] | None = None, rrf_k: int = DEFAULT_RRF_K, depth: int = DEFAULT_DEPTH,
              top_k: int = DEFAULT_TOP_K,
              cache_dir: str | Path | None = None, on_wait=lambda message: None,
              allow_different_data: bool = False) -> RunOutcome:
    """Fuse runs made anywhere into a new results folder, what ``r2med fuse`` does: ``inputs`` are
    TREC run files of one task (with ``qrels``) or results folders (every task they all have).
    Results folders scored on other data than each other, or than the fusion's judgments, are
    refused unless ``allow_different_data``."""
    from .running.fusing import fuse_saved_runs

    return fuse_saved_runs(inputs, registry=registry(), qrels=qrels, task_name=task_name, data_dir=data_dir,
                           output=output, fusion=fusion, weights=weights, rrf_k=rrf_k, depth=depth, top_k=top_k,
                           cache_dir=cache_dir, on_wait=on_wait, allow_different_data=allow_different_data)


def rank_systems(folders: str | Path | Sequence[str | Path] | None = None, *, mteb_results: str | Path | None = None,
                 published: str = "leaderboard", include_local: bool = False,
                 tasks: str | Sequence[str] | None = None, rewriter: str | None = None, retriever: str | None = None,
                 reranker: str | None = None, top: int | None = None, statistics: bool = True,
                 on_warning: Callable[[str], None] | None = None) -> Leaderboard:
    """The leaderboard ``r2med leaderboard`` shows: the published rows, the runs of ``folders``
    (None: ``./results`` when it exists) and of ``mteb_results`` (a clone of the MTEB results
    repository), merged by identity, ranked, filtered, with ties and intervals marked.
    ``statistics=False`` leaves out the ties and intervals (quicker). Each warning goes to
    ``on_warning`` as it comes and is kept in the result's ``warnings``."""
    from .board.leaderboard import Leaderboard, add_intervals, mark_ties, merge, ranked, select
    from .board.sources import PUBLISHED_CHOICES, mteb_record_rows, published_rows, result_rows
    from .tasks.specs import R2MED_TASKS

    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        if on_warning is not None:
            on_warning(message)

    if published not in PUBLISHED_CHOICES:
        raise UserError(f"rank_systems(published={published!r}): one of {', '.join(PUBLISHED_CHOICES)}")
    if top is not None and top < 1:
        raise UserError(f"rank_systems(top={top}): give at least 1")
    chosen = _r2med_task_names(tasks)
    if folders is None:
        sources = [DEFAULT_OUTPUT] if DEFAULT_OUTPUT.is_dir() else []
    else:
        sources = [Path(folders)] if isinstance(folders, (str, Path)) else [Path(f) for f in folders]
    mteb_folder = None
    if mteb_results is not None:
        mteb_results = Path(mteb_results)
        mteb_folder = mteb_results / MTEB_RESULTS if (mteb_results / MTEB_RESULTS).is_dir() else mteb_results
        sources.append(mteb_folder)
    rows = published_rows(which=published)
    for folder in sources:
        if not folder.is_dir():
            raise UserError(f"{folder}: not a folder of results")
        shipped: list[Path] = []  # copies of the published results: their rows are the package's
        found = result_rows(folder, warn, mteb=folder == mteb_folder, shipped=shipped)
        if not found and not shipped:
            warn(f"{folder}: no results of R2MED tasks (runs on other tasks, such as sample, are not ranked)")
        rows += found
    if published == "all":  # after the folders': a run (or --mteb-results row) of the same identity comes first
        rows += mteb_record_rows()
    board = ranked(merge(rows))
    if statistics:  # ties over every row on the shown datasets, before the filters: the view never moves them
        mark_ties(board, [t.name for t in R2MED_TASKS if chosen is None or t.name in chosen])
    shown, shown_tasks = select(board, tasks=chosen, rewriter=rewriter, retriever=retriever, reranker=reranker,
                                top=top, include_local=include_local)
    if statistics:
        add_intervals(shown, shown_tasks)
    local_left_out = 0 if include_local else sum(r.local for r in select(
        board, tasks=chosen, rewriter=rewriter, retriever=retriever, reranker=reranker, top=top, include_local=True)[0])
    from .board.verdicts import reproductions

    return Leaderboard(shown, shown_tasks, warnings, reproductions([f for f in sources if f != mteb_folder]),
                       local_left_out)


def _r2med_task_names(tasks: str | Sequence[str] | None) -> list[str] | None:
    """mteb names of the R2MED datasets ``tasks`` names (datasets, groups, ``r2med``), as
    ``r2med-run`` resolves them; None when none is given. Other tasks (``sample``) are refused:
    the leaderboard and its averages are R2MED's."""
    tokens = _names(tasks)
    if not tokens:
        return None
    from .running.request import choose_tasks
    from .tasks.specs import R2MED_TASKS

    official = {t.name for t in R2MED_TASKS}
    chosen = choose_tasks(registry(), list(tokens), None)
    other = [t.short_name for t in chosen if t.name not in official]
    if other:
        raise UserError(f"--tasks {', '.join(other)}: not an R2MED dataset; the leaderboard ranks R2MED's "
                        f"{len(official)} datasets (names, groups or r2med)")
    return [t.name for t in chosen]


def compare_runs(a: str | Path, b: str | Path, *, tasks: str | Sequence[str] | None = None,
                 test: str = "randomization", trials: int = 10000, seed: int = 0,
                 allow_different_data: bool = False) -> Comparison:
    """Run B against run A, what ``r2med compare`` shows: per task and on the average over R2MED's
    tasks, the nDCG@10 difference (B - A) with its 95% paired bootstrap interval, and per task a
    paired test over queries with Holm's correction. A task whose runs were scored on different data
    is refused unless ``allow_different_data``; the result's ``data_differences`` says what differs."""
    from .results.folder import ResultsFolder
    from .running.request import choose_tasks
    from .scoring.significance import Comparison, compare
    from .tasks.specs import R2MED_TASKS
    from .terminal import printable

    a, b = Path(a), Path(b)
    folders = [ResultsFolder(folder) for folder in (a, b)]
    per_query = [folder.per_query_ndcg() for folder in folders]
    names = _names(tasks)
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= MAX_TRIALS:
        raise UserError(f"--trials {trials}: between 1 and {MAX_TRIALS:,} (a randomization test's p-value is "
                        f"exact to about 1/trials; {MAX_TRIALS:,} takes minutes on R2MED)")
    if names:
        wanted = {t.name for t in choose_tasks(registry(), list(names), None)}
        had = [sorted(runs) for runs in per_query]
        per_query = [{t: q for t, q in runs.items() if t in wanted} for runs in per_query]
        for side, runs, tasks_had in zip("AB", per_query, had):
            if not runs:
                raise UserError(f"--tasks {','.join(names)}: run {side} has none of them (it has "
                                f"{', '.join(tasks_had) or 'no task'})")
    for folder, runs in zip(folders, per_query):
        for task, scores in runs.items():
            bad = next((q for q, v in scores.items() if not 0.0 <= v <= 1.0), None)  # NaN fails too
            if bad is not None:
                raise UserError(f"{printable(folder.per_query(task))}: query {printable(bad)}: "
                                f"nDCG@10 {scores[bad]!r} is not a score between 0 and 1")
    from .results.identity import different_data

    data_differences = different_data(folders, [t for t in per_query[0] if t in per_query[1]])
    if data_differences and not allow_different_data:
        task, lines = next(iter(data_differences.items()))
        more = f" (and {len(data_differences) - 1} more tasks)" if len(data_differences) > 1 else ""
        raise UserError(f"compare: {task}: the runs were scored on different data ({'; '.join(lines)}){more}; "
                        "their scores are not comparable. Pass --allow-different-data to compare anyway")
    try:
        result = compare(*per_query, test=test, trials=trials, seed=seed, average_over={t.name for t in R2MED_TASKS})
    except ValueError as e:
        raise UserError(f"compare {a} {b}: {e}") from None
    return Comparison(a, b, **result, data_differences=data_differences)


def read_generations(run_dir: str | Path, task: str) -> list[dict[str, Any]]:
    """What the LLMs of a run wrote for ``task``: its generation records, one per query and LLM
    stage, in the queries' order (those written so far while the task is being computed); [] when
    the run asked no LLM."""
    from .results.folder import ResultsFolder

    folder = ResultsFolder(Path(run_dir))
    records = folder.generations(registry().tasks([task])[0].name)
    for path, problem in folder.problems().items():
        raise UserError(f"{path}: {problem}")
    return records


def export_generations(run_dir: str | Path, data_dir: str | Path, *, tasks: str | Sequence[str] | None = None,
                       llm: str | None = None, cache_dir: str | Path | None = None) -> list:
    """Write the generations of a run's rewriter in R2MED's published layout under ``data_dir``, what
    ``r2med export-generations`` does, so that ``-o source=<llm>`` replays the run exactly. Returns
    one ``Exported`` per task; never changes a file that is there."""
    from .components.context import default_cache_dir
    from .tasks.datafiles import FILES
    from .results.generations import export_records, task_folder
    from .results.folder import ResultsFolder
    from .running.fusing import task_qrels

    folder, data_dir = ResultsFolder(Path(run_dir)), Path(data_dir)
    reg = registry()
    names = _names(tasks)
    chosen = reg.tasks(list(names)) if names else \
        [e.spec for e in reg.entries["task"] if folder.generations_file(e.spec.name).is_file()]
    cache = Path(cache_dir) if cache_dir else default_cache_dir()

    def judgments(task) -> dict:
        here = task_folder(data_dir, task)
        source = data_dir if all((here / f).is_file() for f in FILES) else None
        try:
            return task_qrels(task, source, cache)[0]
        except UserError as e:
            raise UserError(f"{task.short_name}: its judgments (for doc_id) cannot be read ({e}); export into the "
                            "data folder the run read (DATA_DIR/<Task>/qrels.jsonl)") from None

    return export_records(folder.path, data_dir, tasks=chosen, llm=llm, judgments=judgments)


def show_query(run: str | Path, query: str, *, task: str | None = None, data_dir: str | Path | None = None,
               cache_dir: str | Path | None = None) -> QueryView:
    """One query of a run, what ``r2med show RUN --query Q`` shows. ``task``: None when the folder
    holds one task. Grades and texts come from the task's data as the run read it; a run on local
    files needs their folder again as ``data_dir``."""
    from .results.perquery import choose_task, query_view, results_folder

    folder = results_folder(Path(run).expanduser())
    spec = choose_task([folder], task, registry().tasks)
    return query_view(folder, spec, str(query), data_dir=_path(data_dir), cache_dir=_path(cache_dir))


def compare_queries(a: str | Path, b: str | Path, *, task: str | None = None, query: str | None = None,
                    data_dir: str | Path | None = None, cache_dir: str | Path | None = None) -> QueryDifferences:
    """Run B against run A query by query, what ``r2med show A B`` shows, the largest gain first; with
    ``query``, that query and the documents that entered and left the top 10 (the data is read only
    then). Runs scored on different data are compared, with a warning in the result's ``warnings``."""
    from .results.identity import different_data
    from .results.perquery import choose_task, query_differences, results_folder

    folders = [results_folder(Path(p).expanduser()) for p in (a, b)]
    spec = choose_task(folders, task, registry().tasks)
    warnings = [f"{spec.name}: the runs may have been scored on different data ({'; '.join(lines)}); their "
                "scores may not be comparable" for lines in different_data(folders, [spec.name]).values()]
    return query_differences(*folders, spec, None if query is None else str(query), data_dir=_path(data_dir),
                             cache_dir=_path(cache_dir), warnings=warnings)


def _path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value).expanduser()
