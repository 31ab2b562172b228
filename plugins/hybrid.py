"""``hybrid``: fuse several retrievers' rankings (RRF by default, Cormack et al. 2009).

Each member runs as its own pipeline, its results saved beside the fused ones, so fusing never
recomputes a member. With ``-o tune=FILE`` the weights are chosen per task group on the listed
queries, which are then left out of scoring; the file is read through ``inputs()`` (the bytes the
task's identity holds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from r2med_tasks.plugin import DEFAULT_TOP_K, FusionOptions, Identified, RetrieverSpec, UserError, file_content, hookimpl


class HybridOptions(FusionOptions):
    """The members, and how their runs are fused."""

    members: tuple[str, ...] = Field(("bm25", "nvembed"), description="comma-separated retrievers (member options: "
                                                                      "-o MEMBER.key=value)")
    tune: Annotated[str, Identified(file_content)] = Field(
        "", description="JSON file {task: [query ids]}: tune weights on those queries, score only the others")

    @model_validator(mode="after")
    def fusable(self):
        """Two members at least; weights, when given, one per member, not all 0, and not with ``tune``."""
        if len(self.members) < 2:
            raise ValueError("-o hybrid.members: name at least two retrievers, e.g. members=bm25,nvembed")
        if self.weights and len(self.weights) != len(self.members):
            raise ValueError(f"-o hybrid.weights: {len(self.weights)} weights for {len(self.members)} members")
        if self.weights and not any(self.weights):
            raise ValueError("-o hybrid.weights: every weight is 0, so every fused score would be 0; give at least "
                             "one member a weight > 0")
        if self.weights and self.tune:
            raise ValueError("-o hybrid.tune and -o hybrid.weights exclude each other: tuning chooses the weights")
        return self


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="hybrid",
        factory=HybridRetriever,
        description="fuse member retrievers' top-k runs: RRF (k=60) or z-score / min-max / linear score fusion",
        options=HybridOptions,
        model_options=("members",),  # the members' own identities identify them
        members_option="members",
        tuning_option="tune",  # tuned weights: a task group's tasks run as one job
        combines_generated=True,  # each member combines the rewriter's documents by its own rule
        reference="https://doi.org/10.1145/1571941.1572114",
    ))


class HybridRetriever:
    def __init__(self, options: HybridOptions, members: list) -> None:
        """``members``: the retrievers ``options.members`` names (cheap: models load later)."""
        self.weights = [float(w) for w in options.weights] or None
        self.member_names, self.members = list(options.members), list(members)
        self.fusion, self.rrf_k, self.depth = options.fusion, options.rrf_k, options.depth
        self.tune = options.tune
        self._tuned: dict[tuple[str, bytes], list[float]] = {}  # (group, tuning file's bytes) -> weights

    def model_meta(self) -> dict:
        """"BM25 ⊕ NV-Embed-v2 (RRF)"; the members' models (names and revisions) make the revision."""
        import hashlib
        import json

        metas = [dict(m.model_meta()) if hasattr(m, "model_meta") else {} for m in self.members]
        shown = [meta.get("display_name") or meta.get("name", f"r2med/{name}").split("/")[-1]
                 for meta, name in zip(metas, self.member_names)]
        models = [[name, meta.get("name"), str(meta.get("revision"))] for meta, name in zip(metas, self.member_names)]
        revision = hashlib.sha256(json.dumps(models).encode()).hexdigest()[:12]
        return {"name": "r2med/hybrid", "revision": revision, "model_type": ["hybrid"],
                "display_name": " ⊕ ".join(shown) + f" ({self.fusion.upper()})"}

    def inputs(self, task, *, folder) -> dict:
        """``-o tune``'s file, by its file name: the same split for every task."""
        if not self.tune:
            return {}
        path = Path(self.tune).expanduser()
        if not path.is_file():
            raise UserError(f"-o hybrid.tune={self.tune}: no such file; give a JSON file {{task: [query ids]}}")
        return {path.name: path}

    def index(self, corpus, *, task, context) -> None:
        """Nothing: each member indexes the corpus when its saved run is computed."""

    def search(self, queries, *, task, top_k, context):
        weights = self.weights
        if self.tune:
            data = context.input(Path(self.tune).name)
            tuning = _parse_tuning(data, self.tune)
            weights = self.tuned_weights(task, context, tuning, data)
            judged = context.tuning_judgments(task, tuning_queries(tuning, task))
            left = context.hold_out(tuning_queries(tuning, task), r2med_tuned_weights=weights,
                                    r2med_tuning_queries=len(judged))
            _check_split(task, len(judged), left)
        runs = [context.saved_run(m, queries=queries) for m in self.members]
        return self.fuse(runs, top_k=top_k, weights=weights)

    def fuse(self, runs, top_k: int, weights: list[float] | None = None):
        from r2med_tasks.plugin import fuse

        return fuse(runs, method=self.fusion, weights=weights or self.weights, rrf_k=self.rrf_k, depth=self.depth,
                    top_k=top_k)

    def tuned_weights(self, task, context, tuning: dict[str, list[str]], data: bytes) -> list[float]:
        """The weighting of ``task``'s group maximising the mean over its tasks of nDCG@10 on the
        tuning queries (``tuning``, parsed from the file's ``data``); ties keep the grid's order."""
        from r2med_tasks.plugin import score

        group = task.group or task.name
        if (group, data) not in self._tuned:
            members = []
            for t in (t for t in context.tasks if (t.group or t.name) == group):
                judged = context.tuning_judgments(t, tuning_queries(tuning, t))
                _check_split(t, len(judged), None)
                runs = [context.saved_run(m, task=t) for m in self.members]
                members.append((runs, judged))
            best, best_value = None, -1.0
            for weights in self.weight_grid():
                values = []
                for runs, judged in members:
                    fused = self.fuse(runs, top_k=DEFAULT_TOP_K, weights=weights)
                    values.append(score({q: d for q, d in fused.items() if q in judged}, judged)[0]["ndcg_at_10"])
                value = sum(values) / len(values)
                if value > best_value:
                    best, best_value = weights, value
            self._tuned[group, data] = best
            context.log(f"{group}: weights {best} tuned on {sum(len(j) for _, j in members)} queries of "
                        f"{len(members)} task{'s' if len(members) != 1 else ''}")
        return self._tuned[group, data]

    def weight_grid(self, step: float = 0.1) -> list[list[float]]:
        """Every weighting with weights in multiples of ``step`` summing to 1, each member > 0."""
        n, units = len(self.member_names), round(1 / step)

        def split(total: int, parts: int):
            if parts == 1:
                yield [total]
                return
            for first in range(1, total - parts + 2):
                for rest in split(total - first, parts - 1):
                    yield [first, *rest]

        return [[u / units for u in combo] for combo in split(units, n)]


def tuning_queries(tuning: dict[str, list[str]], task) -> set[str]:
    """The queries to tune on for ``task`` (by mteb name or short name); none if not listed."""
    return set(tuning.get(task.name, tuning.get(task.short_name, [])))


def _check_split(task, n_tuning: int, left: int | None) -> None:
    """A split must leave judged queries both to tune on and to score."""
    if not n_tuning or left == 0:
        shown = "" if left is None else f", {left} left"
        raise UserError(f"{task.name}: -o hybrid.tune needs judged queries both to tune on and to score "
                        f"({n_tuning} to tune{shown})")


def _parse_tuning(data: bytes, path: str) -> dict[str, list[str]]:
    """``-o tune``'s file's bytes as ``{task: [query ids]}``; anything else is refused in one line."""
    import json

    try:
        split = json.loads(data.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError included
        raise UserError(f"-o hybrid.tune={path}: cannot read a JSON {{task: [query ids]}} ({type(e).__name__})") from None
    if not isinstance(split, dict) or not all(isinstance(v, list) for v in split.values()):
        raise UserError(f"-o hybrid.tune={path}: expected a JSON object {{task: [query ids]}}")
    return {str(k): [str(q) for q in v] for k, v in split.items()}
