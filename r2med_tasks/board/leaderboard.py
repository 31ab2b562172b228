"""The board itself: rows of every source joined by identity (a run joins the published row whose
configuration it ran), ranked with each section apart (the board's, the rows published elsewhere,
runs on local data), filtered, with ties and intervals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .render import json_records, render
from .sections import LOCAL_SECTION, SECTIONS, rank_group
from .sources import Row, command_config, published_rows
from ..results.identity import canonical
from ..tasks.specs import R2MED_TASKS, SHORT_NAMES


def published_row(system: str) -> Row | None:
    """The published row of this name (as the leaderboard spells it, any case), if there is one."""
    return next((r for r in published_rows() if r.system.lower() == system.lower()), None)


def published_row_for(system: str, config: dict) -> Row | None:
    """The published row a run of ``config`` reproduces: the row of that name whose command builds
    exactly that configuration (the command built once: :func:`command_config`). Whether the run
    used official data is the caller's to check."""
    row = published_row(system)
    if row is None or not row.command:
        return None
    return row if command_config(row.command) == canonical(config) else None


def merge(rows: list[Row]) -> list[Row]:
    """One row per identity; a later source with different numbers adds a note to the first. A run
    joins a published row only when it is that row's configuration on official data: the row of
    the run's name, else a row named by it and a parenthesis ("NV-Embed-v2 + monoBERT
    (rerank_k=100)", a repository run of another setting)."""
    merged: dict[tuple, Row] = {}
    for row in rows:
        key = row.key
        if row.config is not None and not row.local:
            name = row.display_name.lower()
            published_keys = [k for k in merged if len(k) == 2 and k[0] == "published"]  # (a run's key has 4 parts)
            candidates = [merged[k] for k in published_keys if k[1] == name]
            candidates += [merged[k] for k in published_keys if k[1].startswith(name + " (")]
            for published in candidates:
                if published.command and command_config(published.command) == canonical(row.config):
                    key = published.key
                    break
        if key not in merged:
            merged[key] = row
            continue
        first = merged[key]
        if key != row.key:  # a run of a published row's configuration: pages show it beside the row
            first.joined.append(row)
        differing = [SHORT_NAMES[t] for t in row.scores if t in first.scores and abs(first.scores[t] - row.scores[t]) > 1e-9]
        if differing:
            first.notes.append(f"{row.source} differs on {', '.join(differing)}")
        if first.kind != "run":
            continue  # a published row's figures are the published ones: a run never fills one in
        for task, value in row.scores.items():
            if task not in first.scores and task in row.per_query:  # its per-query scores come with it
                first.per_query[task], first.data[task] = row.per_query[task], row.data[task]
                for mine, theirs in ((first.judged, row.judged), (first.condensed, row.condensed),
                                     (first.relevant_only, row.relevant_only)):
                    if task in theirs:
                        mine[task] = theirs[task]
            first.scores.setdefault(task, value)
    return list(merged.values())


def ranked(rows: list[Row]) -> list[Row]:
    """The board's rows, the rows published elsewhere, then the local rows (:data:`SECTIONS`), each
    section ranked on its own: systems with an average first (highest first, ties in listed order),
    then the incomplete. Another paper's row, an MTEB result or a run on local data never ranks
    between the board's rows, nor moves a leaderboard row's rank."""
    out = []
    for section in SECTIONS:
        rows_in = [r for r in rows if r.section == section]
        with_average = [r for r in rows_in if r.average is not None]
        without = [r for r in rows_in if r.average is None]
        with_average.sort(key=lambda r: -r.average)
        without.sort(key=lambda r: -(sum(r.scores.values()) / max(len(r.scores), 1)))
        out += with_average + without
    return out


def select(rows: list[Row], *, tasks: list[str] | None = None, rewriter: str | None = None,
           retriever: str | None = None, reranker: str | None = None, top: int | None = None,
           include_local: bool = False) -> tuple[list[Row], list[str]]:
    """Filters; ``tasks`` (mteb task names) narrows the columns and the average to those datasets,
    and ranks by their average, each section apart (:func:`ranked`); ``top``: the first rows of each
    section. Runs on local data are left out unless ``include_local``."""
    tasks = [t.name for t in R2MED_TASKS if tasks is None or t.name in tasks]

    def has(text: str | None, *values: str) -> bool:
        return text is None or any(text.lower() in v.lower() for v in values)

    out = [r for r in rows if (include_local or not r.local) and has(rewriter, *r.component_names("rewriter"))
           and has(retriever, *r.component_names("retriever"), r.system)
           and has(reranker, *r.component_names("reranker"))]
    if len(tasks) < len(R2MED_TASKS):  # rank by these datasets' own average (stable: ties keep the overall order)
        out.sort(key=lambda r: (SECTIONS.index(r.section), r.average_over(tasks) is None,
                                -(r.average_over(tasks) or 0.0)))
    out = _local_by_datasets(out, tasks)
    if top:  # the first of each section (of each local group)
        groups = list(dict.fromkeys(map(rank_group, out)))
        out = [r for group in groups for r in [r for r in out if rank_group(r) == group][:top]]
    return out, tasks


def _local_by_datasets(rows: list[Row], tasks: list[str]) -> list[Row]:
    """The local rows (last) grouped by which of ``tasks`` they cover, each group ranked apart by its
    datasets' average: the groups covering more datasets first, then in the order of the tasks."""
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in [r for r in rows if r.section == LOCAL_SECTION]:
        row.peers = tuple(t for t in tasks if t in row.scores)
        groups.setdefault(row.peers, []).append(row)
    order = sorted(groups, key=lambda k: (-len(k), [tasks.index(t) for t in k]))
    return [r for r in rows if r.section != LOCAL_SECTION] + \
        [r for k in order for r in sorted(groups[k], key=lambda r: -(r.average_over(list(k)) or 0.0) if k else 0.0)]


def add_intervals(rows: list[Row], tasks: list[str]) -> None:
    """Each row's 95% percentile bootstrap intervals, ×100 like its scores: ``ci`` per task it has
    per-query scores for, and ``average_ci`` of its average over ``tasks`` (each task's queries
    resampled within the task) when it has them all. Rows without per-query scores (published ones)
    keep none."""
    from ..scoring.uncertainty import average_interval_of, mean_interval, x100

    for row in [r for top in rows for r in (top, *top.joined)]:
        row.ci = {t: ci for t in tasks if t in row.per_query  # none over one query: nothing to resample
                  if (ci := x100(mean_interval(list(row.per_query[t].values())))) is not None}
        row.average_ci = x100(average_interval_of({t: list(row.per_query[t].values()) for t in tasks})) \
            if tasks and all(t in row.per_query for t in tasks) else None


def mark_ties(rows: list[Row], tasks: list[str], *, alpha: float | None = None, trials: int = 10000,
              seed: int = 0) -> None:
    """Which rows cannot be told apart from the best, on the average over ``tasks``. Among rows with
    per-query scores for every task on the same data, each is compared with the best (the highest
    average) by a paired sign-flip randomization test on the difference of averages, the p-values
    adjusted with Holm's method; a row is ``tied`` when its adjusted p-value is at least ``alpha``
    (the best is tied too), ``tie_p``/``tie_best`` saying against what. A row in no such group (a
    published row, a lone run) has ``tied`` None."""
    from ..scoring.significance import ALPHA, ties_with_best

    groups: dict[str, list[Row]] = {}
    for row in rows:
        row.tied = row.tie_p = row.tie_best = None
        if tasks and all(t in row.per_query for t in tasks):
            groups.setdefault(json.dumps([row.data[t] for t in tasks], sort_keys=True), []).append(row)
    for members in groups.values():
        if len(members) < 2:
            continue
        best = min(range(len(members)), key=lambda i: (-members[i].average_over(tasks), i))
        result = ties_with_best({i: [r.per_query[t] for t in tasks] for i, r in enumerate(members)}, best,
                                alpha=ALPHA if alpha is None else alpha, trials=trials, seed=seed)
        for i, row in enumerate(members):
            row.tied, row.tie_p, row.tie_best = result[i]["tied"], result[i]["p_holm"], members[best].system


@dataclass
class Leaderboard:
    """The leaderboard as ``r2med leaderboard`` shows it: ``rows`` ranked, filtered and marked, in
    rank order; ``tasks``, the datasets shown, whose average ranks; ``warnings``, what reading the
    folders skipped or doubted, one line each."""

    rows: list[Row]
    tasks: list[str]
    warnings: list[str] = field(default_factory=list)
    reproductions: list[dict] = field(default_factory=list)  # r2med reproduce's verdicts kept in the folders
    local_left_out: int = 0  # runs on local data the filters kept but --include-local did not ask for

    def records(self, *, commands: bool = False) -> list[dict]:
        """The rows as ``--format json`` writes them (:func:`json_records`)."""
        return json_records(self.rows, self.tasks, commands)

    def render(self, fmt: str = "table", *, commands: bool = False, wide: bool = False, width: int = 120,
               data_dir: Path | None = None) -> str:
        """The text ``--format`` writes (:func:`render`); ``data_dir``: for the HTML page's per-query
        view, the folder runs on local data read (their grades)."""
        return render(self.rows, self.tasks, fmt, commands=commands, wide=wide, width=width, data_dir=data_dir,
                      reproductions=self.reproductions, local_left_out=self.local_left_out)
