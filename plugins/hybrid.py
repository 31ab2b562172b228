"""``hybrid``: fuse several retrievers' rankings (RRF by default, Cormack et al. 2009).

Each member runs as its own pipeline (with the selected rewriter), its results saved beside the
fused ones and reused when they already exist, so fusing never recomputes a member.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from r2med_tasks.components import RetrieverSpec
from r2med_tasks.errors import UserError
from r2med_tasks.hookspecs import hookimpl
from r2med_tasks.options import options_model

FUSIONS = ("rrf", "zscore", "minmax", "linear")
HYBRID_OPTIONS = options_model(
    "HybridOptions",
    members=(tuple[str, ...], Field(("bm25", "nvembed"),
                                    description="comma-separated retrievers (member options: -o MEMBER.key=value)")),
    fusion=(Literal[FUSIONS], Field("rrf", description="rrf, zscore, minmax or linear")),
    weights=(tuple[Annotated[float, Field(ge=0)], ...],
             Field((), description="comma-separated, one weight per member (default: equal)")),
    rrf_k=(int, Field(60, ge=0, description="RRF's k: a document at rank r scores 1/(k + r)")),
    depth=(int, Field(100, ge=1, description="documents taken from each member's run")),
    tune=(str, Field("", description="JSON file {task: [query ids]}: tune weights on those queries, score only "
                                     "the others")),
)


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="hybrid",
        factory=HybridRetriever,
        description="fuse member retrievers' top-k runs: RRF (k=60) or z-score / min-max / linear score fusion",
        options=HYBRID_OPTIONS,
        model_options=("members",),  # the members' own configurations identify them
        reference="https://doi.org/10.1145/1571941.1572114",
    ))


class HybridRetriever:
    def __init__(self, members: tuple[str, ...], fusion: str, weights: tuple[str, ...], rrf_k: int, depth: int,
                 tune: str) -> None:
        if len(members) < 2:
            raise UserError("-o hybrid.members: name at least two retrievers, e.g. members=bm25,nvembed")
        if fusion not in FUSIONS:
            raise UserError(f"-o hybrid.fusion={fusion}: use one of {', '.join(FUSIONS)}")
        try:
            self.weights = [float(w) for w in weights] or None
        except ValueError:
            raise UserError(f"-o hybrid.weights={','.join(weights)}: weights are numbers") from None
        if self.weights is not None and len(self.weights) != len(members):
            raise UserError(f"-o hybrid.weights: {len(self.weights)} weights for {len(members)} members")
        self.member_names, self.fusion, self.rrf_k, self.depth = list(members), fusion, rrf_k, depth
        self.tuning = _read_tuning(tune) if tune else None
        if self.tuning is not None and self.weights is not None:
            raise UserError("-o hybrid.tune and -o hybrid.weights exclude each other: tuning chooses the weights")

    def model_meta(self) -> dict:
        return {"name": "r2med/hybrid", "revision": "1", "display_name": "hybrid"}

    def fuse(self, runs, top_k: int, weights: list[float] | None = None):
        from r2med_tasks.fusion import fuse

        return fuse(runs, method=self.fusion, weights=weights or self.weights, rrf_k=self.rrf_k, depth=self.depth,
                    top_k=top_k)

    def tuning_queries(self, task) -> set[str]:
        """The queries to tune on for ``task`` (by mteb name or short name); none if not listed."""
        if self.tuning is None:
            return set()
        return set(self.tuning.get(task.name, self.tuning.get(task.short_name, [])))

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

    def index(self, corpus, *, task, context) -> None:  # the runner runs the members; these are never called
        raise UserError("hybrid runs its members through r2med-run")

    def search(self, queries, *, task, top_k, context):
        raise UserError("hybrid runs its members through r2med-run")


def _read_tuning(path: str) -> dict[str, list[str]]:
    import json
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"-o hybrid.tune={path}: cannot read a JSON {{task: [query ids]}} ({type(e).__name__})") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise UserError(f"-o hybrid.tune={path}: expected a JSON object {{task: [query ids]}}")
    return {str(k): [str(q) for q in v] for k, v in data.items()}
