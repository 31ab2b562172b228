"""What identifies a result, and how two identities differ. A result is reused, compared or merged
only when its identity matches: the task, the data (hub path at its revision, or the checksum of
local files), the pipeline's full configuration (defaults included, files named by their content and
LLMs by their model), the models that score (a local model's by its files' content) and the versions
of the code. Names are for people; identities decide. Identities hold no machine paths and no
endpoints, so the same run on another machine has the same identity.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from ..scoring.evaluation import SCORING

if TYPE_CHECKING:
    from .folder import ResultsFolder

FORMAT = 3  # of the identity files and records; results without one were written by an earlier r2med


def canonical(value: Any) -> Any:
    """JSON-shaped, key-sorted: tuples become lists, unknown types their ``str``."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def digest(value: Any, length: int = 12) -> str:
    return hashlib.sha256(json.dumps(canonical(value), sort_keys=True).encode()).hexdigest()[:length]


def code_versions(packages: dict[str, str | None]) -> dict[str, str]:
    """The versions of the code that computes and scores a run, the plugin ``packages`` included."""
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
    ``variant``: the options set away from their defaults (mteb's ``experiment_kwargs``). A bare
    retriever is filed under its ``model``'s name, so its results merge with MTEB's; a ``composite``
    pipeline under ``<namespace>/<its name>``, ``namespace`` being the package of its first
    third-party component. ``command``: the words that reproduce it, or None with ``command_note``
    saying why."""

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

    def task_identity(self, task: str, data: dict[str, Any], inputs: dict[str, Any] | None = None,
                      served: dict[str, Any] | None = None) -> dict[str, Any]:
        """A task result's identity: the run's spec, the task's ``data``, and, each only when there
        is one, the files the stages read for the task (``inputs``: stage -> label -> sha256) and
        what the LLM servers serve beyond the model's name (``served``: model -> served key)."""
        extra = {**({"inputs": inputs} if inputs else {}), **({"served": served} if served else {})}
        return canonical({"format": FORMAT, "task": task, "data": data, "scoring": SCORING, "config": self.config,
                          "models": self.models, "code": self.code, **extra})


def _show(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def differences(stored: dict[str, Any], planned: dict[str, Any], limit: int = 3) -> list[str]:
    """What changed between two identities, as short lines ("data revision: a -> b")."""
    old, new = _flatten(stored), _flatten(canonical(planned))
    keys = [k for k in dict.fromkeys([*new, *old]) if old.get(k, _MISSING) != new.get(k, _MISSING)]
    sections = ("task", "data", "inputs", "served", "config", "models", "code")  # what a reader looks for first
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
