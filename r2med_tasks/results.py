"""Run identity and the results layout: what produced a stored score, and where it lives.

A result is reused, compared or merged only when its identity matches: the task, the data (hub
path at its revision, or the checksum of local files), the pipeline's full configuration (every
component and option value, defaults included), the models that score (name and revision) and the
versions of the code. Names are for people; identities decide.

The layout is mteb 2.x's ``ResultCache`` layout, so ``mteb.ResultCache`` loads every result::

    <output>/<org__model>/<revision>/                      the default configuration
        model_meta.json, <Task>.json (TaskResult), <Task>.trec, <Task>.per_query.tsv
        r2med/pipeline.json, r2med/<Task>.identity.json, r2med/lock
    <output>/<org__model>/<revision>/experiments/<name>/   an option variant (mteb's experiment,
        ...same files; model_meta.json carries experiment_kwargs)

Each file is written atomically; a task's TaskResult is written last and removed first when the
task is recomputed, so a TaskResult on disk always sits beside the identity it was computed with.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from . import atomic
from .errors import UserError
from .evaluation import PER_QUERY, SCORING
from .runs import Run, read_trec, write_trec

FORMAT = 2  # of the identity files; results without one were written by r2med before run identities
EXPERIMENTS = "experiments"  # mteb's folder for experiment variants
MAX_COMPONENT = 120  # characters of one path component derived from input


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
    from .mteb_adapter import installed_version as mteb_version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "unknown"

    # mteb's as mteb_adapter finds it (mteb-core, if that is where its code comes from)
    return {"r2med": installed("r2med"), "mteb": mteb_version() or "unknown",
            "pytrec-eval-terrier": installed("pytrec-eval-terrier")}


def experiment_name(kwargs: dict[str, Any] | None) -> str | None:
    """mteb's folder name for ``experiment_kwargs`` (``b_0.9__k1_1.5``), made safe as a path.

    The same serialisation as mteb's ``ModelMeta.experiment_name`` for JSON-shaped values (a test
    compares them), written here so naming a folder never imports mteb."""
    if not kwargs:
        return None
    return safe_component("__".join(f"{k}_{_serialized(v)}" for k, v in sorted(canonical(kwargs).items())))


def _serialized(value: Any) -> str:
    if isinstance(value, list):
        return f"[{','.join(_serialized(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_serialized(v)}" for k, v in sorted(value.items())) + "}"
    return re.sub(r'[<>:"|?*\\/\0]', "_", str(value))


@dataclass(frozen=True)
class RunSpec:
    """What a pipeline is, in plain data: enough to place its results and identify them.

    ``config``: components, plugins and every option value; ``models``: name and revision of the
    models that score; ``variant``: the options set away from their defaults (mteb's
    ``experiment_kwargs``); ``model``: the retriever's model metadata, which names a bare
    retriever's folder so its results merge with MTEB's; a ``composite`` pipeline (rewriter,
    reranker or fusion) is filed under ``r2med/<its name>`` instead.
    """

    display_name: str
    model: dict[str, Any]
    config: dict[str, Any]
    models: dict[str, Any]
    code: dict[str, str]
    variant: dict[str, Any]
    composite: bool

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


class ResultFolder:
    """One configuration's results folder: its paths, what it holds, and how it is written."""

    def __init__(self, output: Path, spec: RunSpec) -> None:
        self.spec = spec
        self.display_name, self.label = spec.display_name, spec.label
        if spec.composite:
            self.name = f"r2med/{slug(spec.display_name) or 'pipeline'}"
            self.revision = digest({"config": _without_options(spec.config), "models": spec.models})
        else:
            self.name, self.revision = spec.model["name"], safe_component(str(spec.model["revision"]))
        self.experiment = experiment_name(spec.variant)
        path = output / safe_component(self.name.replace("/", "__").replace(" ", "_")) / self.revision
        self.path = path / EXPERIMENTS / self.experiment if self.experiment else path
        if not _inside(self.path, output):  # sanitising makes this impossible; a last guard all the same
            raise UserError(f"results folder {self.path} would lie outside --output {output}")

    def task_json(self, task_name: str) -> Path:
        return self.path / f"{task_name}.json"

    def trec(self, task_name: str) -> Path:
        return self.path / f"{task_name}.trec"

    def per_query(self, task_name: str) -> Path:
        return self.path / f"{task_name}.per_query.tsv"

    def identity_file(self, task_name: str) -> Path:
        return self.path / "r2med" / f"{task_name}.identity.json"

    @property
    def pipeline_file(self) -> Path:
        return self.path / "r2med" / "pipeline.json"

    @property
    def lock_file(self) -> Path:
        return self.path / "r2med" / "lock"

    def check_claim(self) -> None:
        """Refuse a folder whose recorded configuration is another one (two configurations never
        share a folder by construction; this catches a hand-edited or colliding one)."""
        try:
            stored = json.loads(self.pipeline_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(stored, dict) or stored.get("format") != FORMAT:
            return  # an earlier layout's claim: its tasks are recomputed (they carry no identity)
        if stored.get("config") != canonical(self.spec.config):
            raise UserError(f"{self.path} holds results of a different configuration "
                            f"({stored.get('label', '?')}); pass another --output or delete that folder")

    def claim(self) -> None:
        """Record the configuration as this folder's. Every writer claims holding the folder's lock,
        so the temp files found now were left by a killed run, and go."""
        self.check_claim()
        self.remove_stale_temp_files()
        atomic.write_json(self.pipeline_file, canonical({
            "format": FORMAT, "name": self.display_name, "label": self.label, "config": self.spec.config,
            "models": self.spec.models, "code": self.spec.code, "experiment_kwargs": self.spec.variant or None}))

    def status(self, task_name: str, identity: dict[str, Any]) -> Status:
        """Reuse only a complete, readable result whose stored identity equals ``identity``."""
        if not self.task_json(task_name).exists():
            return Status(False)
        try:
            stored = json.loads(self.identity_file(task_name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return Status(False, "its stored result has no identity (written by an earlier r2med)")
        except (OSError, ValueError) as e:
            return Status(False, f"{self.identity_file(task_name)} is unreadable ({type(e).__name__})")
        changes = differences(stored, identity)
        if changes:
            return Status(False, "; ".join(changes))
        try:
            self.load(task_name)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            return Status(False, f"its stored result is unreadable or incomplete ({type(e).__name__})")
        return Status(True)

    def load(self, task_name: str) -> tuple[float, int]:
        """The stored main score and number of evaluated queries of a finished task."""
        data = json.loads(self.task_json(task_name).read_text(encoding="utf-8"))
        main = float(data["scores"]["test"][0]["main_score"])
        with self.per_query(task_name).open(encoding="utf-8") as f:
            n = sum(1 for _ in f) - 1
        if n < 1 or not self.trec(task_name).stat().st_size:
            raise ValueError("empty run or per-query file")
        return main, n

    def write(self, task_name: str, dataset_revision: str, identity: dict[str, Any], scores: dict, ranked: Run,
              per_query: dict, *, evaluation_time: float, phases: list[dict[str, Any]]) -> None:
        """Write a task's files; the TaskResult, which marks the task finished, goes last (the bytes
        mteb writes, without importing mteb: the warm path of a run never does)."""
        from .mteb_adapter import task_result_text

        self.task_json(task_name).unlink(missing_ok=True)  # a kill from here on leaves the task unfinished
        meta_file = self.path / "model_meta.json"
        if not meta_file.exists():
            atomic.write_text(meta_file, self.model_meta_text())
        write_trec(self.trec(task_name), ranked, slug(self.display_name) or "r2med")
        atomic.write_lines(self.per_query(task_name), [
            "\t".join(["query_id", *PER_QUERY]),
            *("\t".join([qid, *(repr(m[k]) for k in PER_QUERY)]) for qid, m in sorted(per_query.items()))])
        atomic.write_json(self.identity_file(task_name), identity)
        atomic.write_text(self.task_json(task_name),
                          task_result_text(task_name, dataset_revision, scores, evaluation_time, phases))

    def model_meta(self):
        """The mteb ModelMeta naming these results (mteb's own entry when it has one), with the
        variant as ``experiment_kwargs``; an unregistered name's is built from what the component
        told us."""
        from .mteb_adapter import model_meta

        return model_meta(*self._model_meta_args(), registered=not self.spec.composite)

    def model_meta_text(self) -> str:
        """``model_meta.json``: :meth:`model_meta` as mteb writes it (without importing mteb when
        it need not)."""
        from .mteb_adapter import model_meta_text

        return model_meta_text(*self._model_meta_args(), registered=not self.spec.composite)

    def _model_meta_args(self) -> tuple[dict[str, Any], dict[str, Any]]:
        info = {**self.spec.model, "name": self.name, "revision": self.revision}
        return info, {"experiment_kwargs": canonical(self.spec.variant) or None}

    def read_run(self, task_name: str) -> Run:
        """The saved top-k run of a finished task, in rank order."""
        return read_trec(self.trec(task_name))

    def remove_stale_temp_files(self) -> None:
        """Half-written temp files a killed run left behind (nothing reads them)."""
        for tmp in (*self.path.glob(".*.tmp"), *self.path.glob("r2med/.*.tmp")):
            tmp.unlink(missing_ok=True)

    @contextmanager
    def locked(self, on_wait) -> Iterator[None]:
        from .locking import folder_lock

        with folder_lock(self.lock_file, lambda who: on_wait(f"{self.path} is in use by {who}; "
                                                            "waiting until it is free")):
            yield


@contextmanager
def locked(folders: list[ResultFolder], on_wait) -> Iterator[None]:
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


def _without_options(config: dict[str, Any]) -> dict[str, Any]:
    """The components of a configuration, without option values (those name the experiment)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and "component" in value:
            out[key] = {k: v for k, v in value.items() if k != "options"}
        elif key == "members":
            out[key] = [_without_options(m) for m in value]
    return out


def _inside(path: Path, root: Path) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(root) + os.sep)


def run_folder(path: Path) -> Path:
    """The results folder a result file lies in (the folder itself when given one)."""
    return path if path.is_dir() else path.parent


def pipeline_record(folder: Path) -> dict[str, Any]:
    """What a results folder's ``r2med/pipeline.json`` records (empty when it has none)."""
    try:
        data = json.loads((folder / "r2med" / "pipeline.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def pipeline_name(revision_folder: Path) -> str | None:
    """The display name a results folder's ``r2med/pipeline.json`` records, if any."""
    name = pipeline_record(revision_folder).get("name")
    return name if isinstance(name, str) else None


def run_name(path: Path) -> str:
    """A run's display name: its pipeline's name for a results folder (or a run file in one), else
    the file name."""
    return pipeline_name(run_folder(path)) or path.stem


def read_per_query_ndcg(folder: Path) -> dict[str, dict[str, float]]:
    """task -> query -> nDCG@10, from a results folder's per-query files."""
    files = sorted(folder.glob("*.per_query.tsv"))
    if not files:
        raise UserError(f"{folder}: no <Task>.per_query.tsv files; pass a results folder written by r2med-run")
    out: dict[str, dict[str, float]] = {}
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); pass a results folder "
                            "written by r2med-run") from None
        header = lines[0].split("\t") if lines else []
        if "ndcg_at_10" not in header:
            raise UserError(f"{path}:1: no ndcg_at_10 column")
        col = header.index("ndcg_at_10")
        scores = {}
        for n, line in enumerate(lines[1:], 2):
            fields = line.split("\t")
            try:
                scores[fields[0]] = float(fields[col])
            except (IndexError, ValueError):
                raise UserError(f"{path}:{n}: expected a query id and an nDCG@10 value") from None
        out[path.name.removesuffix(".per_query.tsv")] = scores
    return out
