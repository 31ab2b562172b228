"""Run identity and the record of a run: what produced a stored score, and how it is written.

A result is reused, compared or merged only when its identity matches: the task, the data (hub
path at its revision, or the checksum of local files), the pipeline's full configuration (every
component and option value, defaults included, options naming files by their content and LLMs by
their model), the models that score (name and revision, a local model's by the content of its
files) and the versions of the code. Names are for people; identities decide. Identities hold no
machine paths and no endpoints, so the same run on another machine has the same identity.

Where the files lie is :mod:`r2med_tasks.results.layout`'s. Each file is written atomically; a task's
TaskResult is written last and removed first when the task is recomputed, so a TaskResult on disk
always sits beside the identity it was computed with. Beside the identities, ``r2med/pipeline.json``
records the run: its name, configuration, components and the command that reproduces it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ..files import atomic
from ..errors import UserError
from ..scoring.evaluation import PER_QUERY, SCORING
from ..files.bounded import MissingFile, UnreadableFile, read_text
from .layout import (
    MAX_RECORD_BYTES,
    ResultsFolder,
    experiment_name,
    folder_path,
    inside,
    leads_outside,
    read_record,
    safe_component,
    slug,
)
from ..scoring.runs import Run, trec_text

FORMAT = 3  # of the identity files and records; results without one were written by an earlier r2med
# The --data-dir of the run now writing (request.execute sets it): the record keeps it per task
# ("data_dirs", as given) for the command the leaderboard prints; no identity holds it (identities
# hold no machine paths). A record without it (an earlier r2med's) still reads.
RUN_DATA_DIR: ContextVar[Path | None] = ContextVar("r2med_run_data_dir", default=None)


def canonical(value: Any) -> Any:
    """JSON-shaped, key-sorted: tuples become lists, unknown types their ``str``."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def digest(value: Any, length: int = 12) -> str:
    return hashlib.sha256(json.dumps(canonical(value), sort_keys=True).encode()).hexdigest()[:length]


def code_versions(packages: dict[str, str | None]) -> dict[str, str]:
    """The versions of the code that computes and scores a run: r2med, mteb (whose score dict and
    TaskResult format the scorer reproduces), pytrec_eval, and the plugin packages (``packages``:
    name -> version)."""
    return {**_installed_versions(), **{k: v or "unknown" for k, v in packages.items()}}


@functools.cache  # looked up for every run; what is installed does not change under a running process
def _installed_versions() -> dict[str, str]:
    from ..mteb_adapter import installed_version as mteb_version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "unknown"

    # mteb's as mteb_adapter finds it (mteb-core, if that is where its code comes from)
    return {"r2med": installed("r2med"), "mteb": mteb_version() or "unknown",
            "pytrec-eval-terrier": installed("pytrec-eval-terrier")}


@dataclass(frozen=True)
class PipelineSpec:
    """What a pipeline is, in plain data: enough to place its results, identify them and record them.

    ``config``: components, plugins and every option value that can change results; ``models``:
    name and revision of the models that score; ``variant``: the options set away from their
    defaults (mteb's ``experiment_kwargs``); ``model``: the retriever's model metadata, which names a
    bare retriever's folder so its results merge with MTEB's; a ``composite`` pipeline (rewriter,
    reranker or fusion) is filed under ``<namespace>/<its name>`` instead: ``namespace`` is the
    package of its first third-party component, ``r2med`` when all are r2med's own (``renamed``:
    {model name: the name an earlier r2med gave it}, where they differ; :meth:`legacy`).
    ``command``: the words that reproduce it (``("r2med-run", "--plugin", "bm25")``), or None with
    ``command_note`` saying why no command can; ``components``: each stage's component, plugin and label (a composite's members
    too), as the leaderboard shows and filters them. ``encode_kwargs``: the runtime options set
    (batch size, device), recorded in ``run_settings.jsonl`` as mteb records its encode kwargs.
    """

    display_name: str
    model: dict[str, Any]
    config: dict[str, Any]
    models: dict[str, Any]
    code: dict[str, str]
    variant: dict[str, Any]
    composite: bool
    command: tuple[str, ...] | None = None
    command_note: str | None = None
    components: dict[str, Any] = field(default_factory=dict)
    encode_kwargs: dict[str, Any] = field(default_factory=dict)  # runtime options set (run_settings.jsonl)
    namespace: str = "r2med"
    renamed: dict[str, str] = field(default_factory=dict)

    def legacy(self) -> PipelineSpec | None:
        """This pipeline as r2med named it before pipelines were filed under their first
        third-party package (``r2med/<its name>``) and a third party's component without a model
        name was ``r2med/<component>``; None when that is how it is named now."""
        if self.namespace == "r2med" and not self.renamed:
            return None
        models = {kind: self._renamed_model(m) for kind, m in self.models.items()}
        return replace(self, namespace="r2med", renamed={}, models=models, model=self._renamed_model(self.model))

    def _renamed_model(self, model: Any) -> Any:
        if not isinstance(model, dict) or model.get("name") not in self.renamed:
            return model
        return {**model, "name": self.renamed[model["name"]]}

    def legacy_identity(self, identity: dict[str, Any]) -> dict[str, Any]:
        """``identity`` as an earlier r2med wrote it for this pipeline (its models named as
        :meth:`legacy` says): a result stored under those names is still this pipeline's."""
        models = identity.get("models")
        if not self.renamed or not isinstance(models, dict):
            return identity
        return {**identity, "models": {kind: self._renamed_model(m) for kind, m in models.items()}}

    @property
    def label(self) -> str:
        """The name with what differs from the defaults: "BM25 (b=0.9, k1=1.5)"."""
        if not self.variant:
            return self.display_name
        shown = ", ".join(f"{k}={_show(v)}" for k, v in sorted(self.variant.items()))
        return f"{self.display_name} ({shown})"

    def task_identity(self, task: str, data: dict[str, Any]) -> dict[str, Any]:
        return canonical({"format": FORMAT, "task": task, "data": data, "scoring": SCORING, "config": self.config,
                          "models": self.models, "code": self.code})


def _show(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


@dataclass(frozen=True)
class Status:
    """Whether a task's stored results can be reused, and if not, why (``None``: nothing stored)."""

    reuse: bool
    reason: str | None = None


class PipelineFolder(ResultsFolder):
    """One configuration's results folder, for writing: where the layout puts it (by the spec's
    model, revision and experiment, and whether the data is local), and how it is claimed, checked
    and written."""

    def __init__(self, output: Path, spec: PipelineSpec, *, local: bool = False) -> None:
        self.spec = spec
        self.display_name, self.label = spec.display_name, spec.label
        if spec.composite:
            self.name = f"{spec.namespace}/{slug(spec.display_name) or 'pipeline'}"
            self.revision = digest({"config": _without_options(spec.config), "models": spec.models})
        else:  # a model name of r2med's own (r2med/hybrid) goes under a third-party member's package
            self.name, self.revision = _in_namespace(spec.model["name"], spec.namespace), \
                safe_component(str(spec.model["revision"]))
        self.experiment = experiment_name(spec.variant)
        super().__init__(folder_path(output, self.name, self.revision, self.experiment, local=local))
        self.output = output
        self.adopted = self._adopt_legacy(output, local)
        if not inside(self.path, output):  # sanitising makes this impossible; a last guard all the same
            raise UserError(f"results folder {self.path} would lie outside --output {output}")
        escape = leads_outside(self.path, output)
        if escape is not None:
            raise UserError(f"{escape} is a symbolic link leading out of --output {output}; results are only "
                            "written inside it: remove the link or choose another --output")

    def _adopt_legacy(self, output: Path, local: bool) -> bool:
        """Keep using the folder an earlier r2med filed this very configuration in
        (:meth:`PipelineSpec.legacy`: ``r2med__…`` for a pipeline with a third-party component) when it
        holds its record and this folder holds none: its results are found and reused there, and
        new tasks join them. True when it does."""
        legacy = self.spec.legacy()
        if legacy is None or self.record_file.exists():
            return False
        earlier = PipelineFolder(output, legacy, local=local)
        stored = earlier.record()
        if earlier.path == self.path or stored.get("format") != FORMAT or stored.get("config") != canonical(
                self.spec.config):
            return False
        self.path, self.name, self.revision = earlier.path, earlier.name, earlier.revision
        return True

    def check_claim(self) -> None:
        """Refuse a folder whose recorded configuration is another one (two configurations never
        share a folder by construction; this catches a hand-edited or colliding one)."""
        stored = self.record()
        if stored.get("format") != FORMAT:
            return  # an earlier layout's claim: its tasks are recomputed (their identities differ)
        if stored.get("config") != canonical(self.spec.config):
            raise UserError(f"{self.path} holds results of a different configuration "
                            f"({stored.get('label', '?')}); pass another --output or delete that folder")

    def claim(self) -> None:
        """Prepare to write here, holding the folder's lock: check the recorded configuration, and
        remove the temp files a killed run left (every writer holds the lock, so they are stale).
        The record itself is written with the first task, so a run that fails before one leaves
        no folder that only claims to hold results (:meth:`prune`)."""
        self.check_claim()
        self.remove_stale_temp_files()

    def record_text(self, task_name: str | None = None) -> str:
        """``r2med/pipeline.json``'s text; ``task_name``: the task being written, whose local data
        folder (:data:`RUN_DATA_DIR`) joins the record's ``data_dirs``."""
        spec = self.spec
        data_dirs = self._data_dirs(task_name)
        return json.dumps(canonical({
            "format": FORMAT, "name": self.display_name, "label": self.label, "config": spec.config,
            "models": spec.models, "code": spec.code, "experiment_kwargs": spec.variant or None,
            "data": "local" if self.local else "hub", "components": spec.components,
            "command": list(spec.command) if spec.command else None, "command_note": spec.command_note,
            **({"data_dirs": data_dirs} if data_dirs else {})}),
            indent=2, ensure_ascii=False) + "\n"

    def _data_dirs(self, task_name: str | None) -> dict[str, str]:
        """Task -> the ``--data-dir`` its result was computed from, as given: the stored record's,
        with ``task_name``'s set to the running one's (dropped when it read no local folder)."""
        stored = self.record().get("data_dirs")
        dirs = {k: v for k, v in stored.items() if isinstance(v, str)} if isinstance(stored, dict) else {}
        if task_name is not None:
            given = RUN_DATA_DIR.get()
            if self.local and given is not None:
                dirs[task_name] = str(given)
            else:
                dirs.pop(task_name, None)
        return dict(sorted(dirs.items()))

    def prune(self) -> None:
        """Remove what a run that wrote no task left: the lock file and the empty folders above it
        (never a folder holding anything else)."""
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
        if changes and not differences(stored, self.spec.legacy_identity(identity)):
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
        outcome is (``TaskOutcome.from_folder``)."""
        main = float(self.task_result(self.task_json(task_name))["scores"]["test"][0]["main_score"])
        n = len(self.per_query_scores(task_name))
        if n < 1 or not self.trec(task_name).stat().st_size:
            raise ValueError("empty run or per-query file")
        return main, n

    def write(self, task_name: str, dataset_revision: str, identity: dict[str, Any], scores: dict, ranked: Run,
              per_query: dict, *, evaluation_time: float, phases: list[dict[str, Any]],
              kept: dict[str, list[dict]] | None = None, cost: dict[str, Any] | None = None) -> None:
        """Write a task's files as one: each is prepared beside its target, then all are put in
        place (the TaskResult last, so readers see the previous result until the new one is whole),
        then the manifest of their hashes that marks the task finished. A failure before that point
        (a full disk) leaves the previous result as it was; a kill during it leaves files the
        manifest does not match, so the task is recomputed. The bytes are mteb's, written without
        importing mteb (the warm path of a run never does). ``kept``: rows a component asked to
        keep (``context.keep``), written as ``<Task>.<name>.jsonl`` with the rest. ``cost``: what
        computing it cost (``{"seconds": {...}, "usage": {...} or None}``, see ``ResultsFolder.cost``),
        written as ``r2med/<Task>.cost.json`` with the rest (never part of the identity); without one,
        an earlier computation's is removed."""
        from ..mteb_adapter import task_result_text

        if not self.model_meta_file.exists():
            atomic.write_text(self.model_meta_file, self.model_meta_text())
        record = self.record_text(task_name)
        files = {
            self.trec(task_name): trec_text(ranked, slug(self.display_name) or "r2med"),
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
                                 self.spec.encode_kwargs)

    def model_meta_object(self):
        """The mteb ModelMeta naming these results (mteb's own entry when it has one), with the
        variant as ``experiment_kwargs``; an unregistered name's is built from what the component
        told us."""
        from ..mteb_adapter import model_meta

        return model_meta(*self._model_meta_args(), registered=not self.spec.composite)

    def model_meta_text(self) -> str:
        """``model_meta.json``: :meth:`model_meta_object` as mteb writes it (without importing mteb
        when it need not)."""
        from ..mteb_adapter import model_meta_text

        return model_meta_text(*self._model_meta_args(), registered=not self.spec.composite)

    def _model_meta_args(self) -> tuple[dict[str, Any], dict[str, Any]]:
        info = {**self.spec.model, "name": self.name, "revision": self.revision}
        return info, {"experiment_kwargs": canonical(self.spec.variant) or None}

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
def locked(folders: list[PipelineFolder], on_wait) -> Iterator[None]:
    """Hold every folder's lock (in path order, so two runs never wait on each other in a cycle)."""
    unique = {f.path: f for f in folders}
    with ExitStack() as stack:
        for path in sorted(unique):
            stack.enter_context(unique[path].locked(on_wait))
        yield


def differences(stored: dict[str, Any], planned: dict[str, Any], limit: int = 3) -> list[str]:
    """What changed between two identities, as short lines ("data revision: a -> b")."""
    old, new = _flatten(stored), _flatten(canonical(planned))
    keys = [k for k in dict.fromkeys([*new, *old]) if old.get(k, _MISSING) != new.get(k, _MISSING)]
    sections = ("task", "data", "config", "models", "code")  # what a reader looks for first
    keys.sort(key=lambda k: sections.index(k.split(".")[0]) if k.split(".")[0] in sections else len(sections))
    lines = []
    for key in keys[:limit]:
        before, after = old.get(key, _MISSING), new.get(key, _MISSING)
        lines.append(f"{key.replace('.options.', '.')}: {_short(before)} -> {_short(after)}")
    if len(keys) > limit:
        lines.append(f"{len(keys) - limit} more")
    return lines


_MISSING = "(none)"


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _in_namespace(name: str, namespace: str) -> str:
    """A model name in r2med's own namespace (``r2med/hybrid``) as ``namespace``'s (the package of
    the pipeline's first third-party component); any other name as it is."""
    org, slash, rest = name.partition("/")
    return f"{namespace}/{rest}" if slash and org == "r2med" and namespace != "r2med" else name


def _without_options(config: dict[str, Any]) -> dict[str, Any]:
    """The components of a configuration, without option values (those name the experiment)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and "component" in value:
            out[key] = {k: v for k, v in value.items() if k != "options"}
        elif key == "members":
            out[key] = [_without_options(m) for m in value]
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def different_data(folders: Sequence[ResultsFolder], tasks: list[str]) -> dict[str, list[str]]:
    """Per task, what differs between the two runs' stored data identities ("data.revision: a ->
    b"); a run without a stored identity for the task cannot be checked, and says so."""
    out = {}
    for task in tasks:
        identities = [f.identity(task) for f in folders]
        missing = [str(f.identity_file(task)) for f, i in zip(folders, identities) if i is None]
        if missing:
            out[task] = [f"no stored identity in {', '.join(missing)}"]
            continue
        changed = differences({"data": identities[0]["data"]}, {"data": identities[1]["data"]})
        if changed:
            out[task] = changed
    return out
