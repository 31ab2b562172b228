"""One query of a run, and two runs query by query: what ``r2med show`` and the leaderboard page's
per-query view show. A query's nDCG@10 is the one the run's per-query file stores (pytrec_eval's,
never recomputed here). Grades and texts come from the task's data, loaded as the run loaded it (its
stored data identity says from where; local files the caller names again). The JSON shapes
(``to_json``) are documented in docs/inspecting-runs.md; keys are only ever added.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from .folder import ResultsFolder, runs_under
from ..llm.answers import THINK_CLOSE, THINK_OPEN, valid_count
from ..terminal import printable

if TYPE_CHECKING:
    from ..tasks.taskdata import TaskData
    from ..tasks.specs import TaskSpec

TOP = 10  # the cut-off of nDCG@10: the documents a view lists, and the top 10 two runs are compared on
SNIPPET_CHARS = 200  # characters of a document's text a view carries
FORMAT = 1  # the JSON shape's version ("format"), raised only if a key changes meaning


@dataclass
class QueryView:
    """One query of one run (:func:`query_view`); ``to_json()`` is what ``r2med show RUN --json`` prints."""

    run: str  # the results folder
    name: str  # the run's display name
    task: str  # mteb task name
    query_id: str
    query_text: str | None  # None: the task's data does not hold the query
    ndcg_at_10: float | None  # from <Task>.per_query.tsv; None: the run did not score the query
    generations: list[dict[str, Any]]  # per LLM stage: stage, component, model, method, answer, reasoning, ...
    top: list[dict[str, Any]]  # rank, doc_id, score, grade (None: unjudged), snippet (None: not in the corpus)
    missed: list[dict[str, Any]]  # relevant documents not in the top 10: rank (None: not retrieved), doc_id, ...
    relevant: int  # documents the judgments grade above 0
    retrieved: int  # documents the run ranked for the query
    no_generations: str | None = None  # why no stage recorded what it generated for the query (None: no such stage)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": "query", "run": {"path": self.run, "name": self.name}, "task": self.task,
                "query": {"id": self.query_id, "text": self.query_text}, "ndcg_at_10": self.ndcg_at_10,
                "relevant": self.relevant, "retrieved": self.retrieved, "generations": self.generations,
                "no_generations": self.no_generations, "top": self.top, "missed": self.missed, "warnings": self.warnings}


@dataclass
class QueryDifferences:
    """Run B against run A, query by query (:func:`query_differences`); ``to_json()`` is what
    ``r2med show A B --json`` prints."""

    a: dict[str, str]  # {"path", "name"}
    b: dict[str, str]
    task: str
    queries: list[dict[str, Any]]  # query_id, ndcg_at_10_a, ndcg_at_10_b, difference (B - A); largest gain first
    only_in_a: list[str]  # queries only A scored (left out of ``queries``)
    only_in_b: list[str]
    query: dict[str, Any] | None = None  # with a query: its text, scores, and the documents that entered and left
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        """Over the common queries: the two means, their difference, and how many queries gained, lost or tied."""
        rows = self.queries
        n = len(rows)
        mean_a = sum(r["ndcg_at_10_a"] for r in rows) / n if n else None
        mean_b = sum(r["ndcg_at_10_b"] for r in rows) / n if n else None
        return {"n_queries": n, "mean_a": mean_a, "mean_b": mean_b,
                "difference": None if not n else mean_b - mean_a,
                "gains": sum(r["difference"] > 0 for r in rows), "losses": sum(r["difference"] < 0 for r in rows),
                "ties": sum(r["difference"] == 0 for r in rows)}

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": "differences", "a": self.a, "b": self.b, "task": self.task,
                "summary": self.summary, "queries": self.queries, "only_in_a": self.only_in_a,
                "only_in_b": self.only_in_b, "query": self.query, "warnings": self.warnings}


# -- the folders and the task ---------------------------------------------------------------------


def results_folder(path: str | Path) -> ResultsFolder:
    """The results folder at ``path``, refused in one line when it is none."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{printable(path)}: no such folder; pass a results folder of r2med-run "
                        "(<output>/<org__model>/<revision>/, e.g. results/local-data/r2med__bm25/<revision>)")
    if not path.is_dir():
        raise UserError(f"{printable(path)}: a file, not a folder; pass a results folder of r2med-run "
                        "(<output>/<org__model>/<revision>/)")
    folder = ResultsFolder(path)
    if not run_tasks(folder):
        inside = [f.path for f in runs_under(path) if run_tasks(f)]
        hint = (f"; pass one of the {len(inside)} results folders under it, e.g. {printable(inside[0])}" if inside else
                "; pass the folder r2med-run printed after 'Results:' (<output>/<org__model>/<revision>/)")
        raise UserError(f"{printable(path)}: not a results folder of r2med-run (no <Task>.trec with its "
                        f"<Task>.per_query.tsv){hint}")
    return folder


def run_tasks(folder: ResultsFolder) -> list[str]:
    """The tasks a results folder holds a run and per-query scores of."""
    return sorted(set(folder.run_task_names()) & set(folder.per_query_files()))


def choose_task(folders: Sequence[ResultsFolder], task: str | None,
                find_tasks: Callable[[list[str]], list[TaskSpec]]) -> TaskSpec:
    """The task ``task`` names (an mteb name, a short name or alias, as ``--tasks`` takes one) among
    those every folder holds; without a name, the one task they hold. ``find_tasks``: the installed
    tasks' lookup (``Registry.tasks``); a task none registers is known by its name only."""
    from ..tasks.specs import SHORT_NAMES, TaskSpec

    held = [set(run_tasks(f)) for f in folders]
    common = sorted(set.intersection(*held))
    where = " and ".join(printable(f.path) for f in folders)

    def listed(names) -> str:
        names = sorted(names)
        shown = ", ".join(SHORT_NAMES.get(n, n) for n in names[:8])
        return shown + (f" and {len(names) - 8} more" if len(names) > 8 else "")

    if task is None:
        if len(common) == 1:
            name = common[0]
        elif not common:
            raise UserError(f"{where}: no task in common ({'; '.join(listed(h) for h in held)}); pass runs of "
                            "one task")
        else:
            raise UserError(f"{where}: results of {len(common)} tasks ({listed(common)}); pass --task NAME")
    elif task in common:
        name = task
    else:
        try:
            chosen = find_tasks([task])
        except UserError as e:  # the registry speaks of r2med-run's --tasks
            raise UserError(str(e).replace("--tasks ", "--task ", 1)) from None
        if len(chosen) != 1:
            raise UserError(f"--task {task}: names {len(chosen)} tasks ({listed(t.name for t in chosen)}); "
                            "give one task")
        name = chosen[0].name
        if name not in common:
            for folder, tasks in zip(folders, held):
                if name not in tasks:
                    raise UserError(f"{printable(folder.path)}: no results of {name} (it holds {listed(tasks)}); "
                                    "pass --task one of those, or another results folder")
    try:
        found = find_tasks([name])
    except UserError:  # a task no installed plugin registers
        found = []
    return found[0] if found and found[0].name == name else TaskSpec(name=name, short_name=name, description="")


def scores_of(folder: ResultsFolder, task: str) -> dict[str, float]:
    """query -> nDCG@10 of the task's per-query file, each checked to be a score."""
    scores = {q: row["ndcg_at_10"] for q, row in folder.per_query_scores(task).items()}
    bad = next((q for q, v in scores.items() if not 0.0 <= v <= 1.0), None)  # NaN fails too
    if bad is not None:
        raise UserError(f"{printable(folder.per_query(task))}: query {printable(bad)}: nDCG@10 {scores[bad]!r} is "
                        "not a score between 0 and 1")
    return scores


def ranking_of(folder: ResultsFolder, task: str) -> dict[str, list[tuple[str, float]]]:
    """The task's saved run, each query's documents best first."""
    try:
        run = folder.read_run(task)
    except FileNotFoundError:
        raise UserError(f"{printable(folder.trec(task))}: no such file; pass a results folder of r2med-run") from None
    except ValueError as e:
        raise UserError(f"{printable(e)}; the results folder is damaged: run the task again (--overwrite)") from None
    return {q: list(docs.items()) for q, docs in run.items()}


def check_query(query: str, scores: dict[str, float], ranking: dict, folder: ResultsFolder, task: str) -> None:
    if query in scores or query in ranking:
        return
    known = sorted(scores) or sorted(ranking)
    shown = ", ".join(printable(q) for q in known[:6]) + (f", ... ({len(known)} in all)" if len(known) > 6 else "")
    raise UserError(f"--query {printable(query)}: no such query in the results of {task} in {printable(folder.path)} "
                    f"({shown}); pass one of them (its {printable(folder.per_query(task).name)} lists them all)")


# -- the task's data -------------------------------------------------------------------------------


def load_task_data(folder: ResultsFolder, task: TaskSpec, *, data_dir: Path | None,
                   cache_dir: Path | None) -> tuple[TaskData, list[str]]:
    """The task's data as the run read it (its stored data identity says from where), and warnings:
    data that is not what the run was scored on. Local data needs ``data_dir`` again."""
    from ..components.context import default_cache_dir
    from ..tasks.loading import load_hub

    identity = folder.identity(task.name)
    stored = identity["data"] if identity else None
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    warnings: list[str] = []
    source = stored.get("source") if stored else None
    if data_dir is not None:
        data = task.load(data_dir, only_task=True, cache_dir=cache)
    elif source == "hub" and isinstance(stored.get("path"), str) and isinstance(stored.get("revision"), str):
        data = load_hub(stored["path"], stored["revision"])
    elif source == "package" or (source is None and (task.local_path or (task.hub_path and task.revision))):
        if stored is None:
            warnings.append(f"{printable(folder.identity_file(task.name))}: no stored data identity; the grades are "
                            f"those of {task.name}'s {'package data' if task.local_path else 'hub data'}")
        data = task.load(None, cache_dir=cache)
    else:
        what = "local data (r2med-run --data-dir)" if source == "local" else "data r2med cannot find by itself"
        raise UserError(f"{printable(folder.path)}: the run of {task.name} read {what}; pass --data-dir DIR, the "
                        "folder it read, for the query's text, grades and documents")
    revision = stored.get("revision") if stored else None
    if revision and data.revision != revision:
        warnings.append(f"{task.name}: the data read ({printable(data.source)}, revision {printable(data.revision)}) "
                        f"is not the data the run was scored on (revision {printable(revision)}); grades and texts "
                        "may differ from those its nDCG@10 counted")
    return data, warnings


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """A document's text as one line, cut after ``limit`` characters (with "…")."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "…"


class _Documents:
    """Grades and snippets of the task's documents, the corpus indexed once."""

    def __init__(self, data: TaskData, query: str) -> None:
        self.data, self.grades = data, dict(data.qrels.get(query, {}))
        self._index: dict[str, int] | None = None

    def grade(self, doc: str) -> int | None:
        return self.grades.get(doc)

    def snippet(self, doc: str) -> str | None:
        if self._index is None:
            self._index = {d: i for i, d in enumerate(self.data.corpus.ids)}
        i = self._index.get(doc)
        return None if i is None else snippet(self.data.corpus.texts[i])

    def row(self, doc: str, rank: int | None, **more: Any) -> dict[str, Any]:
        """A document as the views list it: its rank, id, what ``more`` adds (a score, the other run's
        rank), its grade (None: unjudged) and its snippet (None: not in the corpus)."""
        return {"rank": rank, "doc_id": doc, **more, "grade": self.grade(doc), "snippet": self.snippet(doc)}


def query_text(data: TaskData, query: str) -> str | None:
    return next((q.text for q in data.queries if q.id == query), None)


# -- generation records ----------------------------------------------------------------------------


def record_reasoning(record: dict[str, Any]) -> str | None:
    """A record's reasoning: what the server returned apart (each sample's ``reasoning``), else the
    thinking in its output (before each ``</think>``, after its ``<think>``); None when it has none."""
    samples = record.get("samples") if isinstance(record.get("samples"), list) else []
    apart = [s["reasoning"] for s in samples if isinstance(s, dict) and isinstance(s.get("reasoning"), str)
             and s["reasoning"].strip()]
    if apart:
        return "\n\n".join(apart)
    output = record.get("output")
    if not isinstance(output, str) or THINK_CLOSE not in output:
        return None
    parts = []
    for segment in output.split(THINK_CLOSE)[:-1]:
        thought = segment.rpartition(THINK_OPEN)[2] if THINK_OPEN in segment else segment
        if thought.strip():
            parts.append(thought.strip())
    return "\n\n".join(parts) or None


def generation(record: dict[str, Any]) -> dict[str, Any]:
    """What a view shows of a generation record: stage, component, model, method, the answer the
    stage took (a generated document, or a reranker's order of document ids), the reasoning and the
    reasoning tokens the server reported for the query, the whole output, and each sample's finish
    reason; for a rewritten query no LLM answered (the runner's record), the documents it holds
    (``generated``) and its text when the rewriter changed it (``rewritten``)."""
    samples = record.get("samples") if isinstance(record.get("samples"), list) else []
    text = lambda key: record.get(key) if isinstance(record.get(key), str) else None  # noqa: E731
    generated = record.get("generated")
    rewritten = text("text") if text("text") != text("query") else None
    return {"stage": text("stage"), "component": text("component"), "model": text("model"),
            "method": text("method"), "answer": record.get("answer"), "reasoning": record_reasoning(record),
            "reasoning_tokens": tokens if valid_count(tokens := record.get("reasoning_tokens")) else None,
            "output": text("output"),
            "finish_reasons": [s.get("finish_reason") for s in samples if isinstance(s, dict)],
            **({"generated": [str(g) for g in generated], "rewritten": rewritten}
               if isinstance(generated, list) else {})}


def label_of(folder: ResultsFolder) -> str:
    """The run's label as its record has it (its name and option variant: "BM25 (k1=1.2)"), else its name."""
    label = folder.record().get("label")
    return label if isinstance(label, str) and label else folder.display_name()


def no_generations(folder: ResultsFolder, task: str) -> str | None:
    """Why the run holds no generation record for a query, when its pipeline has a stage that
    could write one (a rewriter, a reranker); None when it has none."""
    components = folder.record().get("components")
    components = components if isinstance(components, dict) else {}
    name = lambda kind: str((components.get(kind) or {}).get("component") or kind)  # noqa: E731
    if "rewriter" in components:
        if not folder.generations_file(task).is_file():
            return (f"the run keeps no generation records ({folder.generations_file(task).name}): it was made "
                    f"before r2med recorded what every rewriter returns; rerun it with --overwrite to see what "
                    f"{name('rewriter')} wrote")
        return f"the run's generation records hold none of this query's: {name('rewriter')} left it out"
    if "reranker" in components:
        return (f"{name('reranker')} recorded nothing for this query: a reranker that is not an LLM generates no "
                "text (its order is the top 10 below), and an LLM reranker's run made before r2med kept records "
                "has none")
    return None


# -- the views -------------------------------------------------------------------------------------


def query_view(folder: ResultsFolder, task: TaskSpec, query: str, *, data_dir: Path | None = None,
               cache_dir: Path | None = None) -> QueryView:
    """One query of the run in ``folder``: its text, what each LLM stage generated for it, the run's
    top 10 with grades and snippets, and the relevant documents the top 10 missed."""
    scores, ranking = scores_of(folder, task.name), ranking_of(folder, task.name)
    check_query(query, scores, ranking, folder, task.name)
    data, warnings = load_task_data(folder, task, data_dir=data_dir, cache_dir=cache_dir)
    documents = _Documents(data, query)
    ranked = ranking.get(query, [])
    top = [documents.row(doc, rank=r, score=score) for r, (doc, score) in enumerate(ranked[:TOP], 1)]
    shown = {row["doc_id"] for row in top}
    rank_of = {doc: r for r, (doc, _) in enumerate(ranked, 1)}
    relevant = [d for d, g in documents.grades.items() if g > 0]
    missed = sorted((d for d in relevant if d not in shown),
                    key=lambda d: (rank_of.get(d) is None, rank_of.get(d, 0), -documents.grades[d], d))
    records = [generation(r) for r in folder.generations(task.name) if r.get("query_id") == query]
    warnings += [f"{printable(path)}: {why}" for path, why in folder.problems().items()]
    return QueryView(run=str(folder.path), name=label_of(folder), task=task.name, query_id=query,
                     query_text=query_text(data, query), ndcg_at_10=scores.get(query), generations=records,
                     top=top, missed=[documents.row(d, rank_of.get(d)) for d in missed],
                     relevant=len(relevant), retrieved=len(ranked),
                     no_generations=None if records else no_generations(folder, task.name),
                     warnings=warnings)


def query_differences(a: ResultsFolder, b: ResultsFolder, task: TaskSpec, query: str | None = None, *,
                      data_dir: Path | None = None, cache_dir: Path | None = None,
                      warnings: Sequence[str] = ()) -> QueryDifferences:
    """Run B against run A on ``task``, query by query; with ``query``, that query's row and the
    documents that entered and left its top 10 (the task's data is loaded only then)."""
    scores_a, scores_b = scores_of(a, task.name), scores_of(b, task.name)
    common = [q for q in scores_a if q in scores_b]
    rows = [{"query_id": q, "ndcg_at_10_a": scores_a[q], "ndcg_at_10_b": scores_b[q],
             "difference": scores_b[q] - scores_a[q]} for q in common]
    rows.sort(key=lambda r: (-r["difference"], r["query_id"]))
    result = QueryDifferences(a={"path": str(a.path), "name": label_of(a)},
                              b={"path": str(b.path), "name": label_of(b)},
                              task=task.name, queries=rows, only_in_a=sorted(set(scores_a) - set(scores_b)),
                              only_in_b=sorted(set(scores_b) - set(scores_a)), warnings=list(warnings))
    if query is None:
        return result
    ranking_a, ranking_b = ranking_of(a, task.name), ranking_of(b, task.name)
    for folder, scores, ranking in ((a, scores_a, ranking_a), (b, scores_b, ranking_b)):
        check_query(query, scores, ranking, folder, task.name)
    data, data_warnings = load_task_data(a, task, data_dir=data_dir, cache_dir=cache_dir)
    result.warnings += data_warnings
    documents = _Documents(data, query)
    ranked_a = [d for d, _ in ranking_a.get(query, [])]
    ranked_b = [d for d, _ in ranking_b.get(query, [])]
    rank_a = {d: r for r, d in enumerate(ranked_a, 1)}
    rank_b = {d: r for r, d in enumerate(ranked_b, 1)}
    top_a, top_b = ranked_a[:TOP], ranked_b[:TOP]

    def moved(doc: str) -> dict[str, Any]:
        return {"doc_id": doc, "rank_a": rank_a.get(doc), "rank_b": rank_b.get(doc), "grade": documents.grade(doc),
                "snippet": documents.snippet(doc)}

    result.queries = [r for r in rows if r["query_id"] == query]
    result.query = {"id": query, "text": query_text(data, query), "ndcg_at_10_a": scores_a.get(query),
                    "ndcg_at_10_b": scores_b.get(query),
                    "difference": (None if query not in common else scores_b[query] - scores_a[query]),
                    "entered": [moved(d) for d in top_b if d not in top_a],
                    "left": [moved(d) for d in top_a if d not in top_b]}
    return result



# -- the leaderboard page's per-query view -----------------------------------------------------------

PAGE_ANSWER_CHARS = 300  # of a generated answer the page embeds per query
PAGE_RUNS = 25  # runs whose per-query view a page embeds (the first in rank order): about 0.3-0.6 MB each


class PageJudgments:
    """The judgments a page's runs were scored on, each task's loaded once per data identity: the
    package's sample, the hub's qrels at the run's revision (from the datasets cache), or local
    files from ``data_dir`` (checked to be the files the run read)."""

    def __init__(self, data_dir: Path | None = None, cache_dir: Path | None = None) -> None:
        self.data_dir, self.cache_dir = data_dir, cache_dir
        self.loaded: dict[tuple[str, str], tuple[dict | None, str | None]] = {}

    def __call__(self, folder: ResultsFolder, task: TaskSpec) -> tuple[dict[str, dict[str, int]] | None, str | None]:
        """The task's judgments, or None and why there are none."""
        import json

        identity = folder.identity(task.name)
        stored = identity["data"] if identity else None
        key = (task.name, json.dumps(stored, sort_keys=True, default=str))
        if key not in self.loaded:
            self.loaded[key] = self._load(folder, task, stored)
        return self.loaded[key]

    def _load(self, folder: ResultsFolder, task: TaskSpec, stored: dict | None) -> tuple[dict | None, str | None]:
        source = stored.get("source") if stored else None
        if stored is None:
            return None, "no stored data identity: the data the run was scored on is unknown"
        try:
            if source == "hub" and isinstance(stored.get("path"), str) and isinstance(stored.get("revision"), str):
                return hub_qrels(stored["path"], stored["revision"]), None
            if source == "local" and self.data_dir is None:
                return None, "the run read local files: r2med leaderboard --data-dir DIR gives their grades"
            data, _ = load_task_data(folder, task, data_dir=self.data_dir, cache_dir=self.cache_dir)
        except UserError as e:
            return None, printable(str(e))
        if isinstance(stored.get("revision"), str) and data.revision != stored["revision"]:
            return None, (f"the data read ({printable(data.source)}) is not the data the run was scored on "
                          f"(revision {printable(data.revision)}, not {printable(stored['revision'])})")
        return data.qrels, None


def hub_qrels(path: str, revision: str) -> dict[str, dict[str, int]]:
    """A hub dataset's judgments (its ``qrels`` config) at ``revision``, without its corpus; a
    UserError saying why they cannot be read."""
    import logging

    from ..errors import reason

    loggers = [logging.getLogger(name) for name in ("huggingface_hub", "datasets")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:  # a failure is one line of the page's, never a client's warnings
        logger.setLevel(logging.ERROR)
    try:
        import datasets

        rows = datasets.load_dataset(path, name="qrels", split="qrels", revision=revision).to_list()
        qrels: dict[str, dict[str, int]] = {}
        for row in rows:
            qrels.setdefault(str(row["q_id"]), {})[str(row["p_id"])] = int(row["score"])
        return qrels
    except Exception as e:  # the hub client raises many types for "unreachable" or "missing"
        raise UserError(f"cannot load the judgments of {path}@{revision[:7]} ({reason(e, 160)})") from None
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def page_queries(folders: Sequence[ResultsFolder], tasks: Sequence[TaskSpec],
                 judgments: PageJudgments) -> dict[str, dict[str, Any]]:
    """What the leaderboard page embeds of a run for its per-query view, by dataset (short name):
    columns over the run's scored queries, in its per-query file's order: ``q`` query ids, ``n``
    nDCG@10 (the run's, 4 decimals), ``d`` each query's top 10 document ids; with the judgments,
    ``g`` their grades (null: unjudged) and ``r`` each query's number of relevant documents, else
    ``no_grades`` saying why; ``a`` the first :data:`PAGE_ANSWER_CHARS` characters of what the run's
    LLM generated for each query (null: nothing), when it has generation records. A task whose files
    cannot be read is left out."""
    from ..tasks.specs import SHORT_NAMES

    out: dict[str, dict[str, Any]] = {}
    for task in tasks:
        folder = next((f for f in folders if task.name in run_tasks(f)), None)
        if folder is None:
            continue
        try:
            scores, ranking = scores_of(folder, task.name), ranking_of(folder, task.name)
        except UserError:
            continue
        queries = list(scores)
        tops = [[doc for doc, _ in ranking.get(q, [])[:TOP]] for q in queries]
        entry: dict[str, Any] = {"q": queries, "n": [round(scores[q], 4) for q in queries], "d": tops}
        qrels, why = judgments(folder, task)
        if qrels is None:
            entry["no_grades"] = why
        else:
            entry["g"] = [[qrels.get(q, {}).get(doc) for doc in docs] for q, docs in zip(queries, tops)]
            entry["r"] = [sum(g > 0 for g in qrels.get(q, {}).values()) for q in queries]
        answers: dict[str, str] = {}
        for record in folder.generations(task.name):
            generated = record.get("generated")  # a rewritten query no LLM answered: its first document
            answer = record.get("answer", generated[0] if isinstance(generated, list) and generated else None)
            if isinstance(answer, str) and record["query_id"] not in answers:  # the first stage's document
                cut = len(answer) > PAGE_ANSWER_CHARS
                answers[record["query_id"]] = answer[:PAGE_ANSWER_CHARS].rstrip() + ("…" if cut else "")
        if answers:
            entry["a"] = [answers.get(q) for q in queries]
        out[SHORT_NAMES.get(task.name, task.name)] = entry
    return out
