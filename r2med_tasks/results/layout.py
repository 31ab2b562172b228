"""The results layout, in one place: where a run's files lie, and how they are read back.

Writers (the runner, ``r2med fuse``, the published record) and readers (the leaderboard,
``compare``, ``export-mteb``, ``fuse``, ``run-file``) all go through this module, so a path is
derived once and a file is read one way. The layout is mteb 2.x's ``ResultCache`` layout, so
``mteb`` loads every result on official data as its own::

    <output>/<org__model>/<revision>/                      results on R2MED's data from the hub
        <Task>.json (TaskResult), model_meta.json, run_settings.jsonl,
        <Task>.trec, <Task>.per_query.tsv,
        r2med/pipeline.json (the run's record), r2med/<Task>.identity.json, r2med/lock,
        r2med/<Task>.cost.json (seconds per stage and LLM usage; never part of the identity)
    <output>/<org__model>/<revision>/experiments/<name>/   an option variant (mteb's experiment)
    <output>/local-data/<org__model>/<revision>/...        the same, for data read from local files
                                                           (--data-dir, the offline sample)

Results on local data never share a folder with results on the hub's data, and mteb's loader,
which reads ``<output>/<model>/<revision>/*.json``, never mistakes them for results on the
benchmark's data. A clone of the MTEB results repository files them at
``results/<org__model>/<revision>/`` (:func:`repository_path`, what ``export-mteb`` writes).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from ..files.bounded import MissingFile, UnreadableFile, parse_json, read_bytes, read_json_object, read_text

DEFAULT_OUTPUT = Path("results")  # where results are written unless told (--output)
MTEB_RESULTS = "results"  # the folder of results in a clone of the MTEB results repository
NO_REVISION = "no_revision_available"  # mteb's revision folder for a model without a revision
EXPERIMENTS = "experiments"  # mteb's folder for experiment variants
LOCAL_DATA = "local-data"  # the tree of results on data read from local files
OWN_FOLDER = "r2med"  # the sub-folder of r2med's own files, which no reader of mteb's layout takes for results
RECORD = "pipeline.json"
REPRODUCTION = "reproduction.json"
LOCK = "lock"
GENERATIONS = "generations"  # <Task>.generations.jsonl: what the run's LLMs wrote (context.generated)
MODEL_META = "model_meta.json"
RUN_SETTINGS = "run_settings.jsonl"
# <Task><suffix>: a task's files
TASK_RESULT_SUFFIX = ".json"
TREC_SUFFIX = ".trec"
PER_QUERY_SUFFIX = ".per_query.tsv"
KEPT_SUFFIX = ".jsonl"  # <Task>.<name>.jsonl
JOURNAL_SUFFIX = ".partial.jsonl"  # r2med/<Task>.<name>.partial.jsonl
IDENTITY_SUFFIX = ".identity.json"
COST_SUFFIX = ".cost.json"
MANIFEST_SUFFIX = ".files.json"
TEMP_FILES = ".*.tmp"  # what r2med_tasks.atomic writes aside before putting a file in place
MAX_COMPONENT = 120  # characters of one path component derived from input
# What a reader takes from a results folder, which may hold anything (a folder copied from someone,
# a clone of the MTEB results repository): at most this many bytes of a regular file, JSON nested at
# most this deep. Anything else is refused with one line saying why.
MAX_TASK_RESULT_BYTES = 10 * 1024 * 1024  # a TaskResult: the MTEB results repository's limit per file
MAX_RECORD_BYTES = 1024 * 1024  # model_meta.json, r2med/pipeline.json, identities (a few KB when r2med writes them)
MAX_TABLE_BYTES = 64 * 1024 * 1024  # a per-query table (a line per query)


def slug(text: str) -> str:
    """A name safe as one folder name (results are filed under ``r2med/<slug>``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def safe_component(text: str) -> str:
    """One path component from text that came from input: never empty, ``.``/``..`` or holding a
    separator; a long one is shortened and ends with a hash of the whole."""
    cleaned = re.sub(r"[^A-Za-z0-9._=,+\-\[\]{}@]+", "_", text).lstrip(".") or "_"
    if len(cleaned) > MAX_COMPONENT:
        cleaned = f"{cleaned[:MAX_COMPONENT - 13]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return cleaned


def experiment_name(kwargs: dict[str, Any] | None) -> str | None:
    """mteb's folder name for ``experiment_kwargs`` (``b_0.9__k1_1.5``), made safe as a path.

    The same serialisation as mteb's ``ModelMeta.experiment_name`` for JSON-shaped values (a test
    compares them), written here so naming a folder never imports mteb."""
    if not kwargs:
        return None
    plain = json.loads(json.dumps(kwargs, sort_keys=True, default=str))  # JSON-shaped: tuples as lists
    return safe_component("__".join(f"{k}_{_serialized(v)}" for k, v in sorted(plain.items())))


def _serialized(value: Any) -> str:
    if isinstance(value, list):
        return f"[{','.join(_serialized(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_serialized(v)}" for k, v in sorted(value.items())) + "}"
    return re.sub(r'[<>:"|?*\\/\0]', "_", str(value))


def repository_folder(name: str) -> str:
    """mteb's folder of model ``name`` (``org/name`` -> ``org__name``), as the MTEB results
    repository names it: the one mapping of names to folders (:func:`folder_model_name` reverses it)."""
    return name.replace("/", "__").replace(" ", "_")


def folder_model_name(folder: str) -> str:
    """The model name a folder of mteb's layout stands for (``org__name`` -> ``org/name``)."""
    return folder.replace("__", "/")


def model_folder_name(name: str) -> str:
    """:func:`repository_folder`, made safe as a path."""
    return safe_component(repository_folder(name))


def repository_path(name: str, revision: object, experiment: str | None) -> Path:
    """Where a model's results lie in a clone of the MTEB results repository, relative to it:
    ``results/<org__model>/<revision>/`` (``experiments/<name>/`` in it for a variant). The
    repository's own folder name where that is a plain path component, else a safe one (which the
    contribution check then reports as misplaced)."""
    folder = repository_folder(name)
    if not (folder.isprintable() and not folder.startswith(".") and len(folder) <= MAX_COMPONENT
            and not re.search(r"[\\/:*?\"<>|]", folder)):
        folder = safe_component(folder)
    path = Path(MTEB_RESULTS, folder, safe_component(str(revision or NO_REVISION)))
    return path / EXPERIMENTS / experiment if experiment else path


def folder_path(output: Path, name: str, revision: str, experiment: str | None, *, local: bool) -> Path:
    """The results folder of a model ``name`` at ``revision`` (an experiment of it, when named)."""
    root = output / LOCAL_DATA if local else output
    path = root / model_folder_name(name) / safe_component(revision)
    return path / EXPERIMENTS / experiment if experiment else path


class ResultsFolder:
    """One results folder: its files' paths, and what they hold, read defensively (a missing or
    unreadable file reads as nothing; the caller says what that means)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    # -- paths -------------------------------------------------------------------------------------

    def task_json(self, task_name: str) -> Path:
        return self.path / f"{task_name}{TASK_RESULT_SUFFIX}"

    def trec(self, task_name: str) -> Path:
        return self.path / f"{task_name}{TREC_SUFFIX}"

    def per_query(self, task_name: str) -> Path:
        return self.path / f"{task_name}{PER_QUERY_SUFFIX}"

    def kept_file(self, task_name: str, name: str) -> Path:
        """Rows a component kept beside the task's results (``context.keep``): an agent's trajectories."""
        return self.path / f"{task_name}.{name}{KEPT_SUFFIX}"

    def generations_file(self, task_name: str) -> Path:
        """What the run's LLMs wrote, a record per query and stage (``r2med_tasks.llm.records``)."""
        return self.kept_file(task_name, GENERATIONS)

    def generations_journal(self, task_name: str) -> Path:
        """The records of a task being computed, appended as they arrive (gone once it is written)."""
        return self.own_folder / f"{task_name}.{GENERATIONS}{JOURNAL_SUFFIX}"

    def identity_file(self, task_name: str) -> Path:
        return self.own_folder / f"{task_name}{IDENTITY_SUFFIX}"

    def cost_file(self, task_name: str) -> Path:
        """What computing the task cost (:meth:`cost`), written with its files and never part of its
        identity; under ``r2med/``, so no reader of ``<Task>.json`` TaskResults (mteb's) takes it for one."""
        return self.own_folder / f"{task_name}{COST_SUFFIX}"

    @property
    def own_folder(self) -> Path:
        """``r2med/``: the files of r2med's own beside mteb's."""
        return self.path / OWN_FOLDER

    @property
    def record_file(self) -> Path:
        return self.own_folder / RECORD

    def manifest_file(self, task_name: str) -> Path:
        """The hashes of a task's files, written after them: the task is finished when they agree."""
        return self.own_folder / f"{task_name}{MANIFEST_SUFFIX}"

    @property
    def reproduction_file(self) -> Path:
        """What ``r2med reproduce`` found when this folder's run reproduced a published row."""
        return self.own_folder / REPRODUCTION

    @property
    def lock_file(self) -> Path:
        return self.own_folder / LOCK

    @property
    def model_meta_file(self) -> Path:
        return self.path / MODEL_META

    @property
    def run_settings_file(self) -> Path:
        return self.path / RUN_SETTINGS

    @property
    def local(self) -> bool:
        """Whether the folder lies in a ``local-data`` tree (results on data read from local files):
        ``<output>/local-data/<model>/<revision>``."""
        return self.revision_folder.parent.parent.name == LOCAL_DATA

    @property
    def in_experiment(self) -> bool:
        return self.path.parent.name == EXPERIMENTS

    # -- reading -----------------------------------------------------------------------------------

    def task_files(self) -> list[Path]:
        """The TaskResult files, by task name."""
        return sorted(p for p in self.path.glob(f"*{TASK_RESULT_SUFFIX}") if p.name != MODEL_META)

    def task_names(self) -> list[str]:
        return [p.stem for p in self.task_files()]

    def trec_files(self) -> list[Path]:
        """The runs (``<Task>.trec``) the folder holds, by name: a results folder's, or a folder of runs."""
        return sorted(self.path.glob(f"*{TREC_SUFFIX}"))

    def run_task_names(self) -> list[str]:
        """The tasks whose run the folder holds (:meth:`trec_files`)."""
        return [p.stem for p in self.trec_files()]

    def per_query_files(self) -> dict[str, Path]:
        """task -> its per-query file, for each one the folder holds, by task name."""
        return {p.name.removesuffix(PER_QUERY_SUFFIX): p for p in sorted(self.path.glob(f"*{PER_QUERY_SUFFIX}"))}

    def temp_files(self) -> list[Path]:
        """The files a writer puts aside before putting them in place (half-written, when a run was killed)."""
        return [*self.path.glob(TEMP_FILES), *self.own_folder.glob(TEMP_FILES)]

    def problems(self) -> dict[Path, str]:
        """The files the readers below refused so far, each with why (one line), for the caller to
        report: a missing file is none (results r2med did not write have no record), a file that is
        no regular file, too large, not JSON or nested too deep is one."""
        return vars(self).setdefault("_problems", {})

    def _object(self, path: Path) -> dict[str, Any] | None:
        try:
            return read_record(path)
        except MissingFile:
            return None
        except UnreadableFile as e:
            self.problems()[path] = str(e)
            return None

    def record(self) -> dict[str, Any]:
        """What ``r2med/pipeline.json`` records (empty when there is none: results r2med did not write,
        or when it cannot be read: :meth:`problems` says why)."""
        return self._object(self.record_file) or {}

    def identity(self, task_name: str) -> dict[str, Any] | None:
        """A task's stored identity (None: none, or not one r2med wrote)."""
        stored = self._object(self.identity_file(task_name))
        return stored if stored and isinstance(stored.get("data"), dict) else None

    def model_meta(self) -> dict[str, Any]:
        return self._object(self.model_meta_file) or {}

    def manifest(self, task_name: str) -> dict[str, Any] | None:
        """The hashes of a task's files, by path relative to the folder (None: none to read)."""
        return self._object(self.manifest_file(task_name))

    def run_settings(self) -> str | None:
        """``run_settings.jsonl``'s text: None when there is none, "" when it cannot be read as text."""
        try:
            return read_text(self.run_settings_file, MAX_TASK_RESULT_BYTES)
        except MissingFile:
            return None
        except UnreadableFile:
            return ""

    def generations(self, task_name: str) -> list[dict[str, Any]]:
        """A task's generation records (``<Task>.generations.jsonl``), or, while it is being computed
        (or after a run was killed), those its journal holds so far; [] when there are none. A line
        that is not a JSON object is left out and the file named in :meth:`problems`."""
        for path in (self.generations_file(task_name), self.generations_journal(task_name)):
            try:
                text = read_text(path, MAX_TABLE_BYTES)
            except MissingFile:
                continue
            except UnreadableFile as e:
                self.problems()[path] = str(e)
                return []
            records = []
            for number, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    value = parse_json(line)
                except UnreadableFile as e:
                    value = e
                if isinstance(value, dict) and isinstance(value.get("query_id"), str):
                    records.append(value)
                else:
                    self.problems()[path] = f"line {number} is not a generation record"
            return records
        return []

    def cost(self, task_name: str) -> dict[str, Any] | None:
        """What computing a task cost, as recorded when it was computed: ``{"seconds": {stage:
        seconds}, "usage": {"requests", "cached", "prompt_tokens", "completion_tokens",
        "reasoning_tokens", "usd"} or None}`` (stages: :data:`COST_STAGES`, those that ran; usage None
        when no component called an LLM; usd None when a price was unknown). None when there is no
        such record (results written before r2med recorded costs, a fused run), when it is not the
        one written with the task's files (its manifest lists no file of that content), or when it
        is malformed (:meth:`problems` says why)."""
        path = self.cost_file(task_name)
        try:
            data = read_bytes(path, MAX_RECORD_BYTES)
        except MissingFile:
            return None
        except UnreadableFile as e:
            self.problems()[path] = str(e)
            return None
        manifest = self.manifest(task_name) or {}
        if manifest.get(path.relative_to(self.path).as_posix()) != hashlib.sha256(data).hexdigest():
            return None  # left by an earlier computation of the task (or edited): not this result's
        try:
            cost = parse_json(data)
        except UnreadableFile as e:
            self.problems()[path] = str(e)
            return None
        if not _cost_shaped(cost):
            self.problems()[path] = "not a cost record ({\"seconds\": {...}, \"usage\": {...} or null})"
            return None
        return cost

    def task_result(self, path: Path) -> dict[str, Any]:
        """A TaskResult file's JSON object (one of :meth:`task_files`), read within
        :data:`MAX_TASK_RESULT_BYTES`; raises :class:`UnreadableFile` saying why not."""
        return read_json_object(path, MAX_TASK_RESULT_BYTES)

    def name(self) -> str:
        """The run's display name: its record's, else the model name its folder says."""
        recorded = self.record().get("name")
        if isinstance(recorded, str) and recorded:
            return recorded
        return self.model_meta().get("name") or folder_model_name(self.revision_folder.parent.name)

    @property
    def revision_folder(self) -> Path:
        return self.path.parent.parent if self.in_experiment else self.path

    def key(self) -> tuple[str, str, str | None, bool]:
        """Model name, revision and experiment as mteb reads them (model_meta.json, else the path),
        and whether the data was local: one results folder's identity among others."""
        meta = self.model_meta()
        name = meta.get("name") or folder_model_name(self.revision_folder.parent.name)
        revision = meta.get("revision") or self.revision_folder.name
        kwargs = meta.get("experiment_kwargs")
        experiment = experiment_name(kwargs) if isinstance(kwargs, dict) else (
            self.path.name if self.in_experiment else None)
        return str(name), str(revision), experiment, self.local

    def read_run(self, task_name: str):
        """The saved top-k run of a task, in rank order."""
        from ..scoring.runs import read_trec

        return read_trec(self.trec(task_name))

    def per_query_ndcg(self) -> dict[str, dict[str, float]]:
        """task -> query -> nDCG@10, from the per-query files."""
        from ..errors import UserError

        files = self.per_query_files()
        if not files:
            raise UserError(f"{self.path}: no <Task>.per_query.tsv files; pass a results folder written by r2med-run")
        return {task: {q: row["ndcg_at_10"] for q, row in _per_query_rows(path, ("ndcg_at_10",)).items()}
                for task, path in files.items()}

    def per_query_scores(self, task_name: str,
                         columns: tuple[str, ...] = ("ndcg_at_10",)) -> dict[str, dict[str, float]]:
        """query -> {column: value} of a task's per-query file, for those of ``columns`` the file has
        (``ndcg_at_10`` it must have; a file written before a column existed lacks it)."""
        return _per_query_rows(self.per_query(task_name), columns)


def read_record(path: Path) -> dict[str, Any]:
    """A JSON record of a results folder (``r2med/pipeline.json``, an identity, a manifest,
    ``model_meta.json``, a reproduction), read within :data:`MAX_RECORD_BYTES`; raises
    :class:`UnreadableFile` (:class:`MissingFile`: none there) saying why not."""
    return read_json_object(path, MAX_RECORD_BYTES)


def _per_query_rows(path: Path, columns: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """A per-query file's rows, query -> {column: value} for the ``columns`` its header has; a
    one-line UserError naming the file (and line) for a file that is no such table."""
    from ..errors import UserError

    try:
        text = read_text(path, MAX_TABLE_BYTES)
    except UnreadableFile as e:
        raise UserError(f"{path}: {e}; pass a results folder written by r2med-run") from None
    lines = [line.removesuffix("\r") for line in text.split("\n")]  # (str.splitlines also splits at \x1c...)
    if lines and not lines[-1]:
        lines.pop()
    header = lines[0].split("\t") if lines else []
    if "ndcg_at_10" not in header:
        raise UserError(f"{path}:1: no ndcg_at_10 column")
    wanted = [(c, header.index(c)) for c in columns if c in header]
    rows: dict[str, dict[str, float]] = {}
    first: dict[str, int] = {}
    for n, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        try:
            query, row = fields[0], {c: float(fields[i]) for c, i in wanted}
        except (IndexError, ValueError):
            what = "an nDCG@10 value" if wanted == [("ndcg_at_10", header.index("ndcg_at_10"))] else \
                f"numbers in its columns ({', '.join(c for c, _ in wanted)})"
            raise UserError(f"{path}:{n}: expected a query id and {what}") from None
        if query in first:
            raise UserError(f"{path}:{n}: query {query!r} appears twice (first on line {first[query]}); "
                            "a query has one value: pass a results folder written by r2med-run")
        first[query], rows[query] = n, row
    return rows


COST_STAGES = ("load", "rewrite", "index", "search", "rerank", "score")
"""The stages a cost record times: loading models (``context.loading()``, counted apart from the
stage it happens in), rewriting queries, indexing (encoding) the corpus, searching (encoding queries
and searching), reranking, scoring."""
USAGE_COUNTS = ("requests", "cached", "prompt_tokens", "completion_tokens", "reasoning_tokens")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _cost_shaped(cost: Any) -> bool:
    """Whether a cost file holds what r2med writes there (see :meth:`ResultsFolder.cost`)."""
    if not isinstance(cost, dict) or not isinstance(cost.get("seconds"), dict):
        return False
    if not all(k in COST_STAGES and _number(v) for k, v in cost["seconds"].items()):
        return False
    usage = cost.get("usage")
    if usage is None:
        return "usage" in cost
    return (isinstance(usage, dict) and all(isinstance(usage.get(k), int) and _number(usage[k]) for k in USAGE_COUNTS)
            and (usage.get("usd") is None or _number(usage["usd"])) and "usd" in usage)


def runs_under(root: Path) -> list[ResultsFolder]:
    """Every results folder under an output folder, official and local-data trees alike: revision
    folders and their experiments that hold a TaskResult."""
    found: dict[Path, ResultsFolder] = {}
    for tree in (root, root / LOCAL_DATA):
        for pattern in ("*/*/*.json", f"*/*/{EXPERIMENTS}/*/*.json"):
            for path in sorted(tree.glob(pattern)):
                folder = path.parent
                if tree == root and folder.relative_to(root).parts[0] == LOCAL_DATA:
                    continue  # the local-data tree is read as a tree of its own
                if path.name != MODEL_META and folder not in found:
                    found[folder] = ResultsFolder(folder)
    return list(found.values())


def results_folder_of(path: Path) -> ResultsFolder:
    """The results folder a result file lies in (the folder itself when given one)."""
    return ResultsFolder(path if path.is_dir() else path.parent)


def run_name(path: Path) -> str:
    """A run's display name: its pipeline's name for a results folder (or a run file in one), else
    the file name."""
    recorded = results_folder_of(path).record().get("name")
    return recorded if isinstance(recorded, str) and recorded else path.stem


def check_output_folder(path: Path, *, create: bool, option: str = "--output") -> None:
    """Refuse, before any work, a results (or cache) folder that cannot be created or written;
    ``create`` makes it (a dry run only checks)."""
    from ..errors import UserError

    existing = next(p for p in (path, *path.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise UserError(f"{option} {path}: {existing} is a file, not a folder; choose another {option}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: {existing} is not writable; choose a folder you can write, or fix its "
                        "permissions")
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"{option} {path}: cannot create it ({e.strerror or e}); choose a folder you can "
                            "write") from None


def inside(path: Path, root: Path) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(root) + os.sep)


def leads_outside(path: Path, root: Path) -> Path | None:
    """The first symbolic link on the way from ``root`` down to ``path`` that leads out of
    ``root`` (None: writing at ``path`` stays inside it)."""
    real_root = os.path.realpath(root)
    current = Path(os.path.abspath(root))
    for part in Path(os.path.abspath(path)).relative_to(current).parts:
        current = current / part
        if current.is_symlink() and not os.path.realpath(current).startswith(real_root + os.sep):
            return current
    return None
