"""The Python API: evaluate a retriever or a pipeline on R2MED as ``mteb.evaluate`` evaluates a model.

    import r2med_tasks as r2med
    res = r2med.evaluate("bm25", tasks="qa-reference", data_dir="~/r2med-data")
    res = r2med.evaluate(SentenceTransformer("BAAI/bge-large-en-v1.5"), tasks=["Biology"])
    res = r2med.evaluate(r2med.pipeline("hyde", "bm25", llm="openai:gpt-4o"), tasks="r2med")
    res["R2MEDBiologyRetrieval"].ndcg_at_10

``evaluate`` is what ``r2med-run`` runs: the same results folders, run identities, resume, caches
and errors (a :class:`~r2med_tasks.errors.UserError` says what to fix), quiet unless asked for
progress. ``as_mteb_model`` turns an r2med retriever or pipeline into an mteb search model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UserError
from .fusion import DEFAULT_DEPTH, DEFAULT_METHOD, DEFAULT_RRF_K
from .runs import DEFAULT_TOP_K

if TYPE_CHECKING:
    from .outcomes import RunOutcome
    from .pipelines import Pipeline
    from .registry import Registry
    from .tasks import TaskSpec

OBJECT = "python-object"  # the component name of a retriever object passed to evaluate()


def registry() -> Registry:
    """The components and tasks of the installed plugins."""
    from .plugins import get_plugins
    from .registry import build_registry

    return build_registry(get_plugins())


def pipeline(*components: str, top_k: int = 100, device: str | None = None,
             options: Mapping[str, Any] | None = None, **shared: Any) -> Pipeline:
    """A pipeline ``[rewriter] -> retriever -> [reranker]`` from component names, as ``--plugin``
    names them. Keyword options go to every selected component that accepts them (``-o key=value``);
    ``options={"bm25.k1": 1.2}`` addresses one component (``-o name.key=value``)."""
    from .options import option_text
    from .pipelines import build_pipeline, instantiate

    reg = registry()
    tokens = [f"{key}={option_text(value)}" for key, value in {**shared, **(options or {})}.items()]
    built = build_pipeline(reg, list(components), tokens, top_k=top_k, device=device)
    instantiate(built, reg)
    return built


def evaluate(model: Any, tasks: str | Sequence[str] | None = None, *, data_dir: str | Path | None = None,
             output: str | Path = "results", cache_dir: str | Path | None = None, overwrite: bool = False,
             top_k: int = 100, device: str | None = None, progress: bool = False) -> RunOutcome:
    """Evaluate ``model`` on ``tasks`` and return the scores; results are written under ``output``.

    ``model``: a component name (``"bm25"``), a :func:`pipeline`, a sentence-transformers model
    object, or any object with the retriever protocol's ``index`` and ``search``. ``tasks``: names,
    aliases, groups or ``"r2med"``, as ``--tasks`` takes them; by default the task folders found
    in ``data_dir``, else all eight R2MED tasks. Runs what ``r2med-run`` runs
    (:func:`r2med_tasks.request.execute`).
    """
    from rich.console import Console

    from .request import RunRequest, execute

    request = RunRequest(components=(model,) if isinstance(model, str) else (),
                         tasks=((tasks,) if isinstance(tasks, str) else tuple(tasks)) if tasks is not None else None,
                         data_dir=Path(data_dir).expanduser() if data_dir is not None else None,
                         output=Path(output).expanduser(),
                         cache_dir=Path(cache_dir).expanduser() if cache_dir is not None else None,
                         overwrite=overwrite, top_k=top_k, device=device)
    reg = registry()
    built = None if isinstance(model, str) else _as_pipeline(model, reg, top_k=top_k, device=device)
    console = Console(stderr=True, quiet=not progress, highlight=False)
    return execute(request, console=console, log=lambda line: console.print(line, markup=False), pipeline=built,
                   registry=reg)


def _as_pipeline(model: Any, reg: Registry, *, top_k: int, device: str | None) -> Pipeline:
    from .components import Retriever
    from .pipelines import Pipeline, build_pipeline, check_interface, instantiate

    if isinstance(model, Pipeline):
        if top_k != 100 and model.top_k != top_k:
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

    from .components import RetrieverSpec
    from .plugins import PluginInfo
    from .registry import Registered

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
    from .context import default_cache_dir
    from .mteb_model import SearchModel
    from .pipelines import base_context

    reg = registry()
    built = _as_pipeline(model, reg, top_k=100, device=None)
    for stage in built.ordered():
        if stage.spec.members_option:  # mteb hands over one task's corpus and queries, never the saved runs it needs
            raise UserError(f"as_mteb_model: '{stage.spec.name}' is built of other retrievers' saved runs, which mteb "
                            f"cannot give it; evaluate it with r2med_tasks.evaluate(...) (or r2med-run) instead")
    return SearchModel(built, base_context(reg, cache_dir=cache_dir or default_cache_dir()), task_spec)


def task_spec(name: str) -> TaskSpec:
    """The r2med task of an mteb task name, or a plain spec for a task r2med does not know."""
    from .tasks import TaskSpec

    for entry in registry().entries["task"]:
        if entry.spec.name == name:
            return entry.spec
    return TaskSpec(name=name, short_name=name, description="")


def fuse_runs(inputs: Sequence[str | Path], *, qrels: str | Path | None = None, task_name: str | None = None,
              data_dir: str | Path | None = None, output: str | Path = "results", fusion: str = DEFAULT_METHOD,
              weights: Sequence[float] | None = None, rrf_k: int = DEFAULT_RRF_K, depth: int = DEFAULT_DEPTH,
              top_k: int = DEFAULT_TOP_K,
              cache_dir: str | Path | None = None, on_wait=lambda message: None) -> RunOutcome:
    """Fuse runs made anywhere into a new results folder (what ``r2med fuse`` does): ``inputs`` are
    TREC run files of one task (with ``qrels``) or results folders (every task they all have).
    ``cache_dir`` (default: the user's cache folder) keeps a local corpus's checked document ids."""
    import shlex

    from .evaluation import score
    from .fusion import fuse
    from .layout import RunFolder, run_name
    from .outcomes import RunOutcome, TaskOutcome, average_ci
    from .results import ResultFolder, RunSpec, code_versions, digest, locked, slug
    from .runs import read_trec
    from .validation import read_qrels

    if len(inputs) < 2:
        raise UserError("r2med fuse: give at least two runs")
    weight_list = list(weights) if weights else None
    reg = registry()
    given = [str(p) for p in inputs]
    inputs = [Path(p) for p in inputs]
    folders = [RunFolder(p) for p in inputs if p.is_dir()]
    if folders and len(folders) != len(inputs):
        raise UserError("r2med fuse: give either TREC files or results folders, not both")
    if folders:
        common = set.intersection(*(set(f.run_task_names()) for f in folders))
        if not common:
            raise UserError("r2med fuse: the folders have no task in common (no shared <Task>.trec)")
        jobs = [(reg.tasks([name])[0], [f.trec(name) for f in folders]) for name in sorted(common)]
    else:
        if qrels is None:
            raise UserError("r2med fuse: TREC-file inputs need --qrels FILE")
        jobs = [(reg.tasks([task_name or "sample"])[0], list(inputs))]
    for _, paths in jobs:
        for path in paths:
            if not path.exists():
                raise UserError(f"{path}: no such run file")
            if not path.is_file():
                raise UserError(f"{path}: not a regular file; give a TREC run file")
    names = [run_name(p) for p in inputs]
    display = " ⊕ ".join(names) + f" ({fusion.upper()})"
    inputs_id = [{"name": name, "runs": _content_digest(paths)}
                 for name, paths in zip(names, zip(*(p for _, p in jobs)))]
    config = {"fusion": fusion, "weights": weight_list, "rrf_k": rrf_k, "depth": depth, "top_k": top_k,
              "inputs": inputs_id}
    defaults = {"weights": None, "rrf_k": DEFAULT_RRF_K, "depth": DEFAULT_DEPTH, "top_k": DEFAULT_TOP_K}
    words = ["r2med", "fuse", *given, "--fusion", fusion]
    words += [w for flag, value in (("--qrels", qrels), ("--task", task_name), ("--data-dir", data_dir))
              if value is not None for w in (flag, str(value))]
    words += ["--weights", ",".join(map(repr, weight_list))] if weight_list else []
    words += [w for flag, key in (("--rrf-k", "rrf_k"), ("--depth", "depth"), ("--top-k", "top_k"))
              if config[key] != defaults[key] for w in (flag, str(config[key]))]
    if Path(output) != Path("results"):
        words += ["--output", str(output)]
    spec = RunSpec(display_name=display, model={"name": f"r2med/{slug(display)}", "revision": digest(inputs_id)},
                   config=config, models={}, code=code_versions({}), composite=False,
                   variant={k: config[k] for k, v in defaults.items() if config[k] != v}, command=tuple(words),
                   components={"retriever": {"component": "fuse", "plugin": "r2med", "label": display,
                                             "members": [{"component": "run", "label": n} for n in names]}})
    fused_runs = []  # everything read and checked before the results folder is touched
    for task, paths in jobs:
        try:
            fused = fuse([read_trec(p) for p in paths], method=fusion, weights=weight_list, rrf_k=rrf_k,
                         depth=depth, top_k=top_k)
        except ValueError as e:
            raise UserError(f"r2med fuse: {e}") from None
        if qrels is not None:
            judgments = read_qrels(Path(qrels))
            data_id = {"source": "qrels-file", "revision": _content_digest([qrels]), "official": False}
        else:
            judgments, data_id = _task_qrels(task, Path(data_dir) if data_dir is not None else None,
                                             Path(cache_dir).expanduser() if cache_dir is not None else None)
        judged = {q: docs for q, docs in fused.items() if q in judgments}
        if not judged:
            where = qrels if qrels is not None else f"the judgments of {task.name}"
            raise UserError(f"r2med fuse: {where} judge none of the {len(fused)} queries the runs rank; are the "
                            "runs and the judgments of the same task?")
        fused_runs.append((task, judged, judgments, data_id))
    by_kind = {local: ResultFolder(Path(output), spec, local=local)
               for local in dict.fromkeys(d["source"] != "hub" for *_, d in fused_runs)}
    for folder in by_kind.values():
        folder.check_claim()
    outcomes = []
    with locked(list(by_kind.values()), on_wait):
        for folder in by_kind.values():
            folder.claim()
        for task, fused, judgments, data_id in fused_runs:
            folder = by_kind[data_id["source"] != "hub"]
            scores, per_query = score(fused, judgments)
            folder.write(task.name, data_id["revision"], spec.task_identity(task.name, data_id),
                         scores, fused, per_query, evaluation_time=0.0, phases=[])
            outcomes.append(TaskOutcome.read(task, folder, status="computed", official_data=data_id["official"]))
    main = next(iter(by_kind.values()))
    return RunOutcome(main.display_name, main.label, main.name, main.revision, main.experiment,
                      [str(f.path) for f in by_kind.values()], outcomes, command=shlex.join(words),
                      average_ci=average_ci(outcomes))


def _task_qrels(task, data_dir: Path | None, cache_dir: Path | None) -> tuple[dict, dict]:
    """A task's judgments; the corpus ids kept in the cache folder spare parsing the corpus again."""
    from .context import default_cache_dir

    data = task.load(data_dir, cache_dir=cache_dir or default_cache_dir())
    return data.qrels, task.data_identity(data_dir, revision=data.revision)


def _content_digest(paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:16]
