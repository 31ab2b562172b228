"""One results folder, read and written. Every writer and reader goes through
:class:`ResultsFolder`, so a path is derived once and a file is read one way. Each file is written
atomically; a task's TaskResult is written last and removed first when the task is recomputed, so a
TaskResult on disk always sits beside the identity it was computed with.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..files import atomic
from ..files.bounded import MissingFile, UnreadableFile, parse_json, read_bytes, read_json_object, read_text
from ..scoring.evaluation import PER_QUERY
from ..scoring.runs import Run, read_trec, trec_text
from .identity import FORMAT, PipelineSpec, canonical, differences
from .layout import (
    COST_SUFFIX,
    EXPERIMENTS,
    FIRST_STAGE,
    GENERATIONS,
    IDENTITY_SUFFIX,
    JOURNAL_SUFFIX,
    KEPT_SUFFIX,
    LOCAL_DATA,
    LOCK,
    MANIFEST_SUFFIX,
    MAX_RECORD_BYTES,
    MAX_TABLE_BYTES,
    MAX_TASK_RESULT_BYTES,
    MODEL_META,
    OWN_FOLDER,
    PER_QUERY_SUFFIX,
    RECORD,
    REPRODUCTION,
    RUN_SETTINGS,
    TASK_RESULT_SUFFIX,
    TEMP_FILES,
    TREC_SUFFIX,
    experiment_name,
    filed_under,
    folder_model_name,
    folder_path,
    inside,
    leads_outside,
    slug,
)


@dataclass(frozen=True)
class Status:
    """Whether a task's stored results can be reused, and if not, why (``None``: nothing stored)."""

    reuse: bool
    reason: str | None = None


class ResultsFolder:
    """One results folder's files, read defensively (a missing or unreadable file reads as nothing;
    the caller says what that means). ``ResultsFolder(path)`` opens any folder, for reading;
    :meth:`for_pipeline` opens the folder a pipeline writes, carrying the :class:`PipelineSpec` that
    claiming, checking and writing need."""

    spec: PipelineSpec | None = None  # the pipeline whose folder this is (for_pipeline); None: opened for reading
    output: Path | None = None  # the --output it lies in (for_pipeline)
    model_name: str | None = None  # the model name, revision and experiment it is filed under (for_pipeline)
    revision: str | None = None
    experiment: str | None = None
    adopted: bool = False  # an earlier r2med's folder of the same configuration, used where it is

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    @classmethod
    def for_pipeline(cls, output: Path, spec: PipelineSpec, *, local: bool = False) -> ResultsFolder:
        """The folder under ``output`` that ``spec``'s results on one kind of data (local files or the
        hub's) go to, or the one an earlier r2med filed this very configuration in. Refuses, in one
        line, a folder that would lie outside ``output`` (a symbolic link on the way)."""
        name, revision = filed_under(spec)
        experiment = experiment_name(spec.variant)
        folder = cls(folder_path(output, name, revision, experiment, local=local))
        folder.spec, folder.output = spec, output
        folder.model_name, folder.revision, folder.experiment = name, revision, experiment
        folder.adopted = folder._adopt_legacy(local)
        if not inside(folder.path, output):  # sanitising makes this impossible; a last guard all the same
            raise UserError(f"results folder {folder.path} would lie outside --output {output}")
        escape = leads_outside(folder.path, output)
        if escape is not None:
            raise UserError(f"{escape} is a symbolic link leading out of --output {output}; results are only "
                            "written inside it: remove the link or choose another --output")
        return folder

    def _adopt_legacy(self, local: bool) -> bool:
        """Keep using the folder an earlier r2med filed this very configuration in (``r2med__…`` for a
        pipeline with a third-party component) when it holds its record and this folder holds none,
        so its results are reused. True when it does."""
        spec = self._pipeline()
        legacy = spec.legacy()
        if legacy is None or self.record_file.exists():
            return False
        earlier = ResultsFolder.for_pipeline(self.output, legacy, local=local)
        stored = earlier.record()
        if earlier.path == self.path or stored.get("format") != FORMAT or stored.get("config") != canonical(
                spec.config):
            return False
        self.path, self.model_name, self.revision = earlier.path, earlier.model_name, earlier.revision
        return True

    def _pipeline(self) -> PipelineSpec:
        """The spec of the pipeline writing here; a folder opened by its path has none to write with."""
        if self.spec is None:
            raise TypeError(f"{self!r} was opened for reading; ResultsFolder.for_pipeline(output, spec) opens the "
                            "folder a pipeline writes")
        return self.spec

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
        """Under ``r2med/``, so no reader of ``<Task>.json`` TaskResults (mteb's) takes it for one."""
        return self.own_folder / f"{task_name}{COST_SUFFIX}"

    @property
    def own_folder(self) -> Path:
        """``r2med/``: the files of r2med's own beside mteb's."""
        return self.path / OWN_FOLDER

    @property
    def record_file(self) -> Path:
        return self.own_folder / RECORD

    @property
    def first_stage_file(self) -> Path:
        """An exported first stage's manifest (``r2med export-first-stage``): the run it came from."""
        return self.own_folder / FIRST_STAGE

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
        """Whether the folder holds results on data read from local files (a ``local-data`` tree)."""
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

    def first_stage(self) -> dict[str, Any]:
        """What an exported first stage's manifest says (empty: none, or unreadable)."""
        return self._object(self.first_stage_file) or {}

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
        """What computing a task cost: ``{"seconds": {stage: seconds}, "usage": {...} or None}`` (None:
        no component called an LLM). None when there is no such record (a fused run), when it is not
        the one written with the task's files (its manifest disagrees), or when it is malformed
        (:meth:`problems` says why)."""
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

    def display_name(self) -> str:
        """The run's display name: its pipeline's, its record's, else the model name its folder says."""
        if self.spec is not None:
            return self.spec.display_name
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
        return read_trec(self.trec(task_name))

    def per_query_ndcg(self) -> dict[str, dict[str, float]]:
        """task -> query -> nDCG@10, from the per-query files."""
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

    # -- writing (a folder opened for_pipeline) ---------------------------------------------------

    def check_claim(self) -> None:
        """Refuse a folder whose recorded configuration is another one (two configurations never
        share a folder by construction; this catches a hand-edited or colliding one)."""
        config = self._pipeline().config
        stored = self.record()
        if stored.get("format") != FORMAT:
            return  # an earlier layout's claim: its tasks are recomputed (their identities differ)
        if stored.get("config") != canonical(config):
            raise UserError(f"{self.path} holds results of a different configuration "
                            f"({stored.get('label', '?')}); pass another --output or delete that folder")

    def claim(self) -> None:
        """Prepare to write here, holding the folder's lock: check the recorded configuration, and
        remove the temp files a killed run left (every writer holds the lock, so they are stale).
        The record itself is written with the first task, so a run that fails before one leaves
        no folder that only claims to hold results (:meth:`prune`)."""
        self.check_claim()
        self.remove_stale_temp_files()

    def record_text(self, task_name: str | None = None, data_dir: Path | None = None) -> str:
        """``r2med/pipeline.json``'s text; ``task_name``: the task being written, whose local data
        folder (``data_dir``, the ``--data-dir`` as given) joins the record's ``data_dirs``."""
        spec = self._pipeline()
        data_dirs = self._data_dirs(task_name, data_dir)
        return json.dumps(canonical({
            "format": FORMAT, "name": spec.display_name, "label": spec.label, "config": spec.config,
            "models": spec.models, "code": spec.code, "experiment_kwargs": spec.variant or None,
            "data": "local" if self.local else "hub", "components": spec.components,
            "command": list(spec.command) if spec.command else None, "command_note": spec.command_note,
            **({"data_dirs": data_dirs} if data_dirs else {})}),
            indent=2, ensure_ascii=False) + "\n"

    def _data_dirs(self, task_name: str | None, data_dir: Path | None) -> dict[str, str]:
        """Task -> the ``--data-dir`` its result was computed from, as given: the stored record's,
        with ``task_name``'s set to ``data_dir`` (dropped when it read no local folder). No identity
        holds it (identities hold no machine paths); the command the leaderboard prints names it."""
        stored = self.record().get("data_dirs")
        dirs = {k: v for k, v in stored.items() if isinstance(v, str)} if isinstance(stored, dict) else {}
        if task_name is not None:
            if self.local and data_dir is not None:
                dirs[task_name] = str(data_dir)
            else:
                dirs.pop(task_name, None)
        return dict(sorted(dirs.items()))

    def prune(self) -> None:
        """Remove what a run that wrote no task left: the lock file and the empty folders above it
        (never a folder holding anything else, nor --output itself)."""
        self._pipeline()
        if self.task_files() or self.record_file.exists():
            return
        self.lock_file.unlink(missing_ok=True)
        for folder in (self.lock_file.parent, *self.lock_file.parent.parents):
            if folder == self.output:
                break
            try:
                folder.rmdir()
            except OSError:  # not empty, or already gone
                break

    def status(self, task_name: str, identity: dict[str, Any]) -> Status:
        """Reuse only a complete, readable result whose stored identity equals ``identity`` and
        whose files are the ones written together (their hashes, recorded last, agree)."""
        if not self.task_json(task_name).exists():
            return Status(False)
        try:
            stored = read_record(self.identity_file(task_name))
        except MissingFile:
            return Status(False, "its stored result has no identity (written by an earlier r2med)")
        except UnreadableFile as e:
            return Status(False, f"{self.identity_file(task_name)} is unreadable ({e})")
        changes = differences(stored, identity)
        if changes and not differences(stored, self._pipeline().legacy_identity(identity)):
            changes = []  # stored by an earlier r2med, its models named as it named them
        if changes:
            return Status(False, "; ".join(changes))
        try:
            self.load(task_name)
        except (OSError, ValueError, KeyError, IndexError, TypeError, UserError) as e:
            return Status(False, f"its stored result is unreadable or incomplete ({type(e).__name__})")
        if not self.complete(task_name):
            return Status(False, "its stored files are not the ones written together (a run stopped while "
                                 "replacing them, or they were edited)")
        return Status(True)

    def complete(self, task_name: str) -> bool:
        """Whether the task's files are those its manifest (written last) names, byte for byte."""
        manifest = self.manifest(task_name)
        try:
            return manifest is not None and set(self.task_file_names(task_name)) <= set(manifest) and manifest == {
                name: _sha256(self.path / name) for name in manifest}
        except (OSError, ValueError):  # a name no file can have (a NUL in it)
            return False

    def load(self, task_name: str) -> tuple[float, int]:
        """The stored main score and number of evaluated queries of a finished task, read as its
        outcome is (``TaskOutcome.read``)."""
        main = float(self.task_result(self.task_json(task_name))["scores"]["test"][0]["main_score"])
        n = len(self.per_query_scores(task_name))
        if n < 1 or not self.trec(task_name).stat().st_size:
            raise ValueError("empty run or per-query file")
        return main, n

    def write(self, task_name: str, dataset_revision: str, identity: dict[str, Any], scores: dict, ranked: Run,
              per_query: dict, *, evaluation_time: float, phases: list[dict[str, Any]],
              kept: dict[str, list[dict]] | None = None, cost: dict[str, Any] | None = None,
              data_dir: Path | None = None) -> None:
        """Write a task's files as one: all put in place together (the TaskResult last, so readers see
        the previous result until the new one is whole), then the manifest of their hashes that marks
        the task finished; a kill in between leaves files the manifest does not match, so the task is
        recomputed. The bytes are mteb's, written without importing mteb (a warm run never does)."""
        from ..mteb_adapter import task_result_text

        if not self.model_meta_file.exists():
            atomic.write_text(self.model_meta_file, self.model_meta_text())
        record = self.record_text(task_name, data_dir)
        files = {
            self.trec(task_name): trec_text(ranked, slug(self._pipeline().display_name) or "r2med"),
            self.per_query(task_name): "".join(line + "\n" for line in [
                "\t".join(["query_id", *PER_QUERY]),
                *("\t".join([qid, *(repr(m[k]) for k in PER_QUERY)]) for qid, m in sorted(per_query.items()))]),
            self.identity_file(task_name): json.dumps(identity, indent=2, ensure_ascii=False, default=str) + "\n",
            **{self.kept_file(task_name, name): "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n"
                                                       for row in rows) for name, rows in (kept or {}).items()},
            **({self.cost_file(task_name): json.dumps(cost, indent=2) + "\n"} if cost is not None else {}),
            self.task_json(task_name): task_result_text(task_name, dataset_revision, scores, evaluation_time, phases),
        }
        encoded = {path: text.encode("utf-8") for path, text in files.items()}
        manifest = {path.relative_to(self.path).as_posix(): hashlib.sha256(data).hexdigest()
                    for path, data in encoded.items()}
        settings = self.run_settings_text(task_name)
        atomic.replace_all([
            *([(self.record_file, record.encode("utf-8"))] if self._record_differs(record) else []),
            *([(self.run_settings_file, settings.encode("utf-8"))] if settings is not None else []),
            *encoded.items(),
            (self.manifest_file(task_name), (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))])
        if cost is None:  # an earlier computation's (the manifest no longer lists it: ResultsFolder.cost ignores it)
            self.cost_file(task_name).unlink(missing_ok=True)

    def task_file_names(self, task_name: str) -> list[str]:
        """The files a task's manifest covers, relative to the folder."""
        return [p.relative_to(self.path).as_posix() for p in (self.trec(task_name), self.per_query(task_name),
                                                              self.identity_file(task_name),
                                                              self.task_json(task_name))]

    def _record_differs(self, text: str) -> bool:
        try:
            return read_text(self.record_file, MAX_RECORD_BYTES) != text
        except UnreadableFile:
            return True

    def repair_run_settings(self, task_name: str) -> bool:
        """Put a reused task's entry back into ``run_settings.jsonl`` when the file lost it (deleted,
        emptied, or lines that are not JSON, which mteb skips): rewritten as a run writes it, merged
        with the entries still readable. True when it was."""
        from ..mteb_adapter import run_settings_entries

        existing = self.run_settings()
        if existing:
            lines = [line for line in existing.splitlines() if line.strip()]
            entries = run_settings_entries(existing)
            if len(entries) == len(lines) and any(e.get("task") == task_name for e in entries):
                return False
        settings = self.run_settings_text(task_name)
        if settings is None:
            return False
        atomic.write_text(self.run_settings_file, settings)
        return True

    def run_settings_text(self, task_name: str) -> str | None:
        """``run_settings.jsonl`` with this task's entry, merged as mteb's ``ResultCache.save_to_cache``
        merges it (one test split, the default subset)."""
        from ..mteb_adapter import run_settings_text

        return run_settings_text(self.run_settings(), task_name, {"test": [{"hf_subset": "default"}]},
                                 self._pipeline().encode_kwargs)

    def model_meta_object(self):
        """The mteb ModelMeta naming these results (mteb's own entry when it has one), with the
        variant as ``experiment_kwargs``; an unregistered name's is built from what the component
        told us."""
        from ..mteb_adapter import model_meta

        return model_meta(*self._model_meta_args(), registered=not self._pipeline().composite)

    def model_meta_text(self) -> str:
        """``model_meta.json``: :meth:`model_meta_object` as mteb writes it (without importing mteb
        when it need not)."""
        from ..mteb_adapter import model_meta_text

        return model_meta_text(*self._model_meta_args(), registered=not self._pipeline().composite)

    def _model_meta_args(self) -> tuple[dict[str, Any], dict[str, Any]]:
        spec = self._pipeline()
        info = {**spec.model, "name": self.model_name, "revision": self.revision}
        return info, {"experiment_kwargs": canonical(spec.variant) or None}

    def remove_stale_temp_files(self) -> None:
        """Half-written temp files a killed run left behind (nothing reads them)."""
        for tmp in self.temp_files():
            tmp.unlink(missing_ok=True)

    @contextmanager
    def locked(self, on_wait) -> Iterator[None]:
        from ..files.locking import folder_lock

        with folder_lock(self.lock_file, lambda who: on_wait(f"{self.path} is in use by {who}; "
                                                            "waiting until it is free")):
            yield


@contextmanager
def locked(folders: Sequence[ResultsFolder], on_wait) -> Iterator[None]:
    """Hold every folder's lock (in path order, so two runs never wait on each other in a cycle)."""
    unique = {f.path: f for f in folders}
    with ExitStack() as stack:
        for path in sorted(unique):
            stack.enter_context(unique[path].locked(on_wait))
        yield


def read_record(path: Path) -> dict[str, Any]:
    """A JSON record of a results folder (``r2med/pipeline.json``, an identity, a manifest,
    ``model_meta.json``, a reproduction), read within :data:`MAX_RECORD_BYTES`; raises
    :class:`UnreadableFile` (:class:`MissingFile`: none there) saying why not."""
    return read_json_object(path, MAX_RECORD_BYTES)


def _per_query_rows(path: Path, columns: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """A per-query file's rows, query -> {column: value} for the ``columns`` its header has; a
    one-line UserError naming the file (and line) for a file that is no such table."""
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
"""The stages a cost record times; loading models is counted apart from the stage it happens in."""
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
    """A run's display name: its pipeline's name for a results folder (or a run file in one) or for
    the first stage exported from one, else the file name."""
    folder = results_folder_of(path)
    recorded = folder.record().get("name") or folder.first_stage().get("name")
    return recorded if isinstance(recorded, str) and recorded else path.stem


def check_output_folder(path: Path, *, create: bool, option: str = "--output") -> None:
    """Refuse, before any work, a results (or cache) folder that cannot be created or written;
    ``create`` makes it (a dry run only checks)."""
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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
