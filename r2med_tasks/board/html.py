"""The leaderboard as one self-contained HTML page, meant to be shared: the filters, the search, the
sort and the open detail view live in the address (``#q=bm25&hide=local&sort=Biology``), so a copied
address opens the same view, and each row's rank is its permalink (``#row=<id>``). Everything in a
results file is untrusted input: every name, path and note is HTML-escaped where the page is
written, the data the detail view reads is JSON with ``<``, ``>`` and ``&`` escaped, and the script
only ever sets ``textContent``. The page loads nothing from the network.
"""

from __future__ import annotations

import functools
import json
import math
import re
from html import escape
from pathlib import Path

from ..components.overlap import OVERLAP_MARK, overlap_text
from ..scoring.evaluation import SCORE_FAMILIES, leaderboard_average
from ..results.perquery import PAGE_RUNS, PageJudgments, page_queries
from .published import PUBLISHED_KINDS
from .sections import BOARD_SECTION, ELSEWHERE_SECTION, LOCAL_SECTION, SECTION_LABELS, SECTION_TITLES, SECTIONS, \
    group_label, section_ranks
from ..tasks.specs import GROUPS, R2MED_TASKS, SHORT_NAMES
from ..terminal import number, printable

GROUP_OF = {t.name: t.group for t in R2MED_TASKS}
GROUP_LABELS = {"qa-reference": "Q&A reference", "clinical-evidence": "Clinical evidence",
                "clinical-case": "Clinical case"}
ORIGIN_LABELS = {"leaderboard": "Leaderboard", "repository": "Paper / repository run",
                 "paper": "Another paper's run", "mteb": "MTEB result", "run": "Your run", "local": "Local data"}
# Each kind of source, explained once in the legend: the badge its rows carry (none for the
# leaderboard's own rows, most of the board), what it is, and its colour in the charts.
KINDS = {
    "leaderboard": ("", "a row of the published R2MED leaderboard (r2med.github.io); no badge", "#2f6f9f"),
    "repository": ("repo", "a run in the R2MED authors' repository that is not a leaderboard row", "#5aa0c8"),
    "paper": ("paper", "a run of R2MED published in another paper", "#7b68a6"),
    "mteb": ("MTEB", "a result from the MTEB results repository (embeddings-benchmark/results): the package's "
                     "dated record of it, or your clone's", "#3d8b57"),
    "run": ("your run", "a results folder you gave", "#d9822b"),
    "local": ("local data", "your run on data other than R2MED's official release: not comparable", "#8a8f96"),
}
YOURS_CLASS = ' class="yours"'
NO_PER_QUERY = "published rows have no per-query scores"  # where their intervals would be
NO_JUDGED = {True: "published rows carry no ranking, and judged@10 is read off each query's top 10",  # a – judged@10
             False: "this run's per-query files hold no judged@10 (written before r2med kept it)"}
# the rows of each section after the board's, as the lede and a row's detail view ("rank 2 among …") name them
SECTION_ROWS = {ELSEWHERE_SECTION: "the rows published elsewhere",
                LOCAL_SECTION: "the runs on local data over the same datasets"}
P_AT_10 = "= P@10"  # judged@10 where only relevant documents are judged
NOT_HOLES = "not a hole measure here"  # the condensed nDCG@10 there


@functools.cache
def page_asset(name: str) -> str:
    """The page's stylesheet or script, package data inlined into the page so that it loads nothing."""
    from importlib.resources import files

    return files("r2med_tasks").joinpath("data", "page", name).read_text(encoding="utf-8")


def _ranked(row) -> str:
    """What a row is ranked among, as the page's script groups rows (escaped for an attribute): its
    section, and a local row's datasets."""
    return escape(":".join([row.section, *row.peers]))


def render_html(rows, tasks: list[str], *, top: int = 5, data_dir: Path | None = None,
                cache_dir: Path | None = None, reproductions: list[dict] | None = None) -> str:
    """The page for ``rows`` (in rank order) over the datasets ``tasks``; each dataset's chart shows
    its ``top`` systems. ``data_dir``: the folder runs on local data read, for their per-query
    views' grades."""
    groups = [(g, [t for t in tasks if GROUP_OF[t] == g]) for g in GROUPS]
    groups = [(g, ts) for g, ts in groups if ts]
    with_group_average = [g for g, ts in groups if len(ts) == sum(GROUP_OF[t] == g for t in GROUP_OF) > 1]
    systems: dict[str, dict] = {}
    ids = _Ids()
    listed = []  # (row, its id, its joined runs' ids)
    for rank, row in zip(section_ranks(rows), rows):
        sid = ids.new(row.system)
        systems[sid] = _system(row, sid, rank, tasks, with_group_average)
        runs = []
        for j, run in enumerate(row.joined, 1):
            runs.append(ids.new(f"{row.system} run {j}"))
            systems[runs[-1]] = _system(run, runs[-1], rank, tasks, with_group_average, published=systems[sid])
        listed.append((row, sid, runs))

    judged = any(s["judged"] is not None for s in systems.values())
    columns = [("avg", "Avg", None)] + ([("judged", "Judged@10", None)] if judged else [])
    for g, ts in groups:
        columns += [(SHORT_NAMES[t], SHORT_NAMES[t], g) for t in ts]
        if g in with_group_average:
            columns.append((f"g-{g}", "Group avg", g))
    trailing = [("model", "Model", None)]
    trailing += [(key, label, None) for key, label in (("usd", "$/query"), ("sec", "s/query"))
                 if any(s[key] is not None or key == "usd" and s["reasoning"] for s in systems.values())]
    trailing.append(("source", "Source", None))
    columns += trailing
    shade = _shading(columns, [systems[sid] for _, sid, _ in listed])

    head_groups = [f'<th class="c-rank"></th><th class="c-sys"></th><th colspan="{1 + judged}"></th>']
    for g, ts in groups:
        span = len(ts) + (g in with_group_average)
        head_groups.append(f'<th colspan="{span}" data-group="{g}" class="first">{escape(GROUP_LABELS[g])}</th>')
    head_groups.append(f'<th colspan="{len(trailing)}"></th>')
    head = [('<th data-col="rank" data-first="ascending" aria-sort="ascending" class="c-rank">'
             '<button type="button">#<span class="ind" aria-hidden="true">▲</span></button></th>'),
            ('<th data-col="system" data-first="ascending" aria-sort="none" class="text c-sys"><button type="button">'
             'System<span class="ind" aria-hidden="true"></span></button></th>')]
    previous = None
    for key, label, g in columns:
        cls = " ".join(c for c in ("gavg" if key.startswith("g-") or key == "avg" else "",
                                   "first" if g and g != previous else "", "text" if key in ("model", "source") else "")
                       if c)
        previous = g
        group_attr = f' data-group="{g}"' if g else ""
        first = ' data-first="ascending"' if key in ("usd", "sec", "source") else ""
        title = f' title="{escape(COLUMN_TITLES[key])}"' if key in COLUMN_TITLES else ""
        head.append(f'<th data-col="{escape(key)}"{group_attr}{first}{title} aria-sort="none" class="{cls}" scope="col">'
                    f'<button type="button">{escape(label)}<span class="ind" aria-hidden="true"></span></button></th>')

    bodies = []
    previous = (BOARD_SECTION, ())
    for row, sid, runs in listed:
        system = systems[sid]
        if (row.section, row.peers) != previous:  # a group after the board's: its head above its first row
            title = [SECTION_TITLES[row.section]] if row.section != previous[0] else []
            if group_label(row, tasks) != SECTION_LABELS[row.section]:  # a group of local runs
                title.append(group_label(row, tasks))
            previous = row.section, row.peers
            bodies.append(f'<tbody class="section-head" data-section="{row.section}" data-ranked="{_ranked(row)}"><tr>'
                          f'<th colspan="{2 + len(columns)}" class="text" scope="rowgroup">'
                          f'{escape(". ".join(title))}</th></tr></tbody>')
        yours = system["origin"] in ("run", "local")
        origins = " ".join(dict.fromkeys([system["origin"], *(systems[r]["origin"] for r in runs)]))
        search = " ".join([row.system, row.rewriter, row.retriever, row.reranker, row.source,
                           *(systems[r]["source"] for r in runs)]).lower()
        attrs = (f' data-origin="{origins}" data-section="{system["section"]}" data-ranked="{_ranked(row)}"'
                 f' data-rewriter="{escape(row.rewriter)}"'
                 f' data-retriever="{escape(row.retriever)}" data-reranker="{escape(row.reranker)}"'
                 f' data-search="{escape(search)}"')
        trs = [_tr(system, columns, shade, sub=False)] + [_tr(systems[r], columns, shade, sub=True) for r in runs]
        bodies.append(f'<tbody{attrs}{YOURS_CLASS if yours else ""}>{"".join(trs)}</tbody>')

    def options(name: str, attr: str) -> str:
        values = sorted({getattr(r, attr) for r in rows} - {"-"}, key=lambda v: (v.lower(), v))  # one order whatever the hash seed
        items = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
        none = '<option value="-">none</option>' if any(getattr(r, attr) == "-" for r in rows) else ""
        return f'<label>{name}<select id="f-{attr}"><option value="">Any</option>{none}{items}</select></label>'

    counts = {o: sum(s["origin"] == o for s in systems.values()) for o in ORIGIN_LABELS}
    origin_boxes = "".join(f'<label><input type="checkbox" value="{o}" checked> {escape(label)} ({counts[o]})</label>'
                           for o, label in ORIGIN_LABELS.items() if counts[o])
    kinds = "".join(f'<li data-kind="{o}"><span class="swatch" style="background:{KINDS[o][2]}"></span>{_badge(o)}'
                    f'<span>{escape(ORIGIN_LABELS[o])}: {escape(KINDS[o][1])}</span></li>'
                    for o in ORIGIN_LABELS if counts[o])
    group_options = "".join(f'<option value="{g}">{escape(GROUP_LABELS[g])}</option>' for g in with_group_average)
    controls = (
        '<form class="controls" role="search" onsubmit="return false">'
        '<label>Search<input type="search" id="q" placeholder="system, model, path…" autocomplete="off"></label>'
        f'<label>Task group<select id="group"><option value="">All datasets</option>{group_options}</select></label>'
        f'{options("Rewriter", "rewriter")}{options("Retriever", "retriever")}{options("Reranker", "reranker")}'
        f'<fieldset id="origins"><legend>Source</legend>{origin_boxes}</fieldset>'
        '<output id="count" aria-live="polite"></output></form>'
        f'<ul class="kinds" id="kinds" aria-label="Kinds of source">{kinds}</ul>')
    datasets = [{"name": SHORT_NAMES[t], "group_label": GROUP_LABELS[GROUP_OF[t]]} for t in tasks]
    charts = "".join(f'<figure data-dataset="{escape(SHORT_NAMES[t])}" data-group="{GROUP_OF[t]}"><figcaption>'
                     f'{escape(SHORT_NAMES[t])}</figcaption></figure>' for t in tasks)  # drawn by the script
    queries = per_query_views(listed, systems, tasks, data_dir=data_dir, cache_dir=cache_dir)
    payload = json.dumps(_plain({
        "systems": systems, "datasets": datasets, "top": top, "published": list(PUBLISHED_KINDS),
        "sections": list(SECTIONS), "section_labels": {k: v.lower() for k, v in SECTION_LABELS.items()},
        "section_rows": SECTION_ROWS,
        "no_per_query": NO_PER_QUERY, "queries": queries, "query_runs": QUERY_RUNS, "p_at_10": P_AT_10,
        "not_holes": NOT_HOLES,
        "kinds": {o: {"label": ORIGIN_LABELS[o], "colour": KINDS[o][2]} for o in ORIGIN_LABELS}}),
        allow_nan=False, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    yours = sum(s["origin"] in ("run", "local") for s in systems.values())
    apart = " and ".join(SECTION_ROWS[s] for s in SECTIONS[1:] if any(x["section"] == s for x in systems.values()))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>R2MED leaderboard</title><style>\n{page_asset('leaderboard.css')}</style></head><body><main>"
        "<h1>R2MED leaderboard</h1>"
        f'<p class="lede">nDCG@10 ×100 on {len(tasks)} of R2MED\'s {len(R2MED_TASKS)} datasets, {len(rows)} systems'
        f'{f"; your {yours} runs highlighted, a run of a published configuration under its row" if yours else ""}'
        f'{f"; {apart} below the board, each ranked apart" if apart else ""}'
        ". Averages are the leaderboard's: the mean "
        "of the 2-decimal values, rounded half-up; a group's average is over its datasets. Sort by any column "
        "(scores: highest first), filter, and open a system for its every metric, configuration and command. "
        "The address keeps the view (filters, sort, open system): share it; a row's rank links to that row.</p>"
        f"{controls}"
        f'<div class="scroll" id="table-box"><table id="leaderboard"><thead><tr class="groups">{"".join(head_groups)}'
        f'</tr><tr>{"".join(head)}</tr></thead>{"".join(bodies)}</table></div>'
        f'<section id="cost-section" class="hidden"><h2>Quality against cost</h2><p class="lede">Among the systems '
        'the filters show that have a cost per query (what the run paid its LLMs; the published rows have none).</p>'
        '<figure id="cost" class="wide"><figcaption>nDCG@10 against US$ per query</figcaption>'
        '<ul class="legend" id="cost-legend"></ul></figure></section>'
        f"{_reproduction_section(reproductions or [])}"
        f'<h2 id="charts-title">Top {top} systems per dataset</h2><p class="lede">Among the systems the filters show, coloured by '
        'source.</p><ul class="legend" id="chart-legend"></ul>'
        f'<div class="charts">{charts}</div>'
        '<dialog id="detail" aria-labelledby="detail-title"><button type="button" class="close" id="detail-close">'
        'Close</button><h2 id="detail-title"></h2><div id="detail-body"></div></dialog>'
        f'<script type="application/json" id="data">{payload}</script>'
        f"<script>\n{page_asset('leaderboard.js')}</script></main></body></html>\n"
    )


QUERY_RUNS = PAGE_RUNS


def _reproduction_section(matrix: list[dict]) -> str:
    """The rows reproduced so far (``r2med reproduce``), each dataset's verdict and difference; none: nothing."""
    if not matrix:
        return ""
    from .verdicts import matrix_cells

    header, rows = matrix_cells(matrix)
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f'<td class="verdict-{escape(c.split()[0].lower())}">{escape(c)}</td>'
                                    if c.split()[:1] and c.split()[0] in ("OK", "OKish", "FAIL")
                                    else f"<td>{escape(c)}</td>" for c in cells) + "</tr>" for cells in rows)
    return ('<section id="reproductions"><h2>Reproductions</h2><p class="lede">The published rows reproduced with '
            '<code>r2med reproduce</code>: each dataset\'s verdict and difference to the published figure (OK: as '
            'printed; OKish: within the tolerance of its kind of system; FAIL: beyond it).</p>'
            f'<div class="scroll"><table class="matrix"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            "</div></section>")


def per_query_views(listed, systems: dict[str, dict], tasks: list[str], *, data_dir: Path | None = None,
                    cache_dir: Path | None = None) -> dict[str, dict]:
    """Your runs' per-query views, by system id, for the first :data:`QUERY_RUNS` runs in rank order
    that hold per-query files (a page embeds a few hundred KB per run)."""
    from ..results.folder import ResultsFolder

    specs = [t for t in R2MED_TASKS if t.name in tasks]
    judgments = PageJudgments(data_dir, cache_dir)
    views: dict[str, dict] = {}
    for row, sid, runs in listed:
        for run, rid in ((row, sid), *zip(row.joined, runs)):
            if len(views) >= QUERY_RUNS or systems[rid]["origin"] not in ("run", "local"):
                continue
            view = page_queries([ResultsFolder(Path(p)) for p in run.provenance], specs, judgments)
            if view:
                views[rid] = view
    return views


COLUMN_TITLES = {
    "judged": "judged@10: the share of each query's top 10 documents that carry a judgment (any grade), "
              "averaged over queries and datasets; where the judgments hold only relevant documents (no grade 0, "
              "as R2MED's) it is P@10, marked so; – for published rows, which carry no ranking",
    "model": "model size (parameters), open weights and licence, as the run's model_meta.json records them "
             "(mteb's ModelMeta); – where unknown",
    "usd": "US dollars per query paid to LLMs (where the model's price is known)",
    "sec": "wall seconds per query, every stage",
    "source": "where the row's figures come from: a paper and its table, the leaderboard's page, MTEB's results "
              "repository, your results folder (the whole source is the cell's tooltip)",
}


class _Ids:
    """Row ids for permalinks: the system's name as a slug (stable while the name is), numbered
    when two rows would share one."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def new(self, name: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60].strip("-") or "row"
        sid, n = base, 1
        while sid in self.taken:
            n += 1
            sid = f"{base}-{n}"
        self.taken.add(sid)
        return sid


def _system(row, sid: str, rank: int, tasks: list[str], group_averages: list[str],
            published: dict | None = None) -> dict:
    """What the table and the detail view show of one row (or of a run joined to a published row)."""
    scores = {SHORT_NAMES[t]: row.scores[t] for t in tasks if t in row.scores}
    metrics = {t: sorted(row.metrics.get(t, {}).items()) for t in tasks}
    ci = {SHORT_NAMES[t]: c for t in tasks if (c := _interval(_mapping(row, "ci").get(t)))}
    avg = row.average_over(tasks)
    usd, sec = _number(getattr(row, "usd_per_query", None)), _number(getattr(row, "seconds_per_query", None))
    judged = _number(row.judged_over(tasks) if hasattr(row, "judged_over") else getattr(row, "judged_at_10", None))
    tied, tie_p, tie_best = getattr(row, "tied", None), _number(getattr(row, "tie_p", None)), getattr(row, "tie_best", None)
    per_task = {"judged": {SHORT_NAMES[t]: v for t in tasks if (v := _number(_mapping(row, "judged").get(t))) is not None},
                "condensed": {SHORT_NAMES[t]: v for t in tasks if (v := _number(_mapping(row, "condensed").get(t))) is not None},
                "relevant_only": {SHORT_NAMES[t]: v for t in tasks
                                  if isinstance(v := _mapping(row, "relevant_only").get(t), bool)}}
    means = row.judged_means(tasks) if hasattr(row, "judged_means") else None
    system = {
        "id": sid, "rank": rank, "section": published["section"] if published else row.section,
        "system": row.system, "rewriter": row.rewriter, "retriever": row.retriever,
        "reranker": row.reranker, "origin": row.origin, "origin_label": ORIGIN_LABELS[row.origin],
        "source": row.source, "notes": row.notes, "provenance": row.provenance, "command": row.command,
        "overlap": [overlap_text(n) for n in getattr(row, "overlaps", [])],
        "placeholders": {str(k): str(v) for k, v in _mapping(row, "placeholders").items()},
        "avg": avg, "scores": scores,
        "groups": {g: _average([row.scores.get(t) for t in GROUP_OF if GROUP_OF[t] == g]) for g in group_averages},
        # scores (nDCG, MAP, recall, …: 0–1) as the board shows them, ×100; anything else (mteb's
        # nAUC, -1 to 1) is no score: shown as stored
        "metrics": {SHORT_NAMES[t]: {k: round(100 * v, 2) for k, v in ms if SCORE_FAMILIES.match(k)} for t, ms in metrics.items()},
        "stored": {SHORT_NAMES[t]: {k: v for k, v in ms if not SCORE_FAMILIES.match(k)} for t, ms in metrics.items()},
        "config": row.config if row.config is not None else
        {"rewriter": row.rewriter, "retriever": row.retriever, "reranker": row.reranker},
        "published": None, "diffs": {},
        "judged": judged if judged is not None and 0 <= judged <= 1 else None,
        "ci": ci, "has_ci": bool(ci),
        "avg_ci": _interval(getattr(row, "average_ci", None)),
        "judged_by": per_task["judged"], "condensed": per_task["condensed"],
        "relevant_only": per_task["relevant_only"],
        "judged_means": means if means in ("P@10", "coverage", "mixed") else None,
        "no_ci": f"none: {NO_PER_QUERY}" if row.origin in PUBLISHED_KINDS else "none: no per-query scores",
        "tied": tied if isinstance(tied, bool) else None, "tie_p": tie_p,
        "tie_best": tie_best if isinstance(tie_best, str) else None,
        "usd": usd if usd is not None and usd >= 0 else None, "sec": sec if sec is not None and sec >= 0 else None,
        "model": model_facts(row),
    }
    reasoning = _number(getattr(row, "reasoning_tokens_per_query", None))
    system["reasoning"] = reasoning if reasoning is not None and reasoning >= 0 else None
    system["usd_text"] = _money(system["usd"]) if system["usd"] is not None else ""
    system["sec_text"] = _seconds(system["sec"]) if system["sec"] is not None else ""
    system["reasoning_text"] = _tokens(system["reasoning"]) if system["reasoning"] is not None else ""
    if published is not None:
        system["published"] = {"system": published["system"], "avg": published["avg"], "scores": published["scores"]}
        system["diffs"] = {d: round(v - published["scores"][d], 2) for d, v in scores.items()
                           if d in published["scores"]}
        if system["avg"] is not None and published["avg"] is not None:
            system["avg_diff"] = round(system["avg"] - published["avg"], 2)
    return system


def _mapping(row, name: str) -> dict:
    value = getattr(row, name, None)
    return value if isinstance(value, dict) else {}


def _number(value) -> float | None:
    """A finite real number (not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _interval(ci) -> list[float] | None:
    """A 95% interval ``[lo, hi]`` as the row holds it (×100, as its scores), or None."""
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return None
    lo, hi = _number(ci[0]), _number(ci[1])
    return [round(lo, 2), round(hi, 2)] if lo is not None and hi is not None and lo <= hi else None


def model_facts(row) -> dict:
    """The model's size (``n_parameters``), open weights and licence as mteb's ModelMeta records
    them: the row's ``model_meta`` where it carries one, else a run's ``model_meta.json``; None
    where unknown (the published rows: the package records none of these)."""
    meta = getattr(row, "model_meta", None)
    if not isinstance(meta, dict):
        meta = {}
        if row.kind == "run" and row.provenance:
            from ..results.folder import ResultsFolder

            meta = ResultsFolder(Path(row.provenance[0])).model_meta()
    params = _number(meta.get("n_parameters"))
    params = int(params) if params is not None and 1 <= params < 1e15 else None
    weights = meta.get("open_weights")
    licence = meta.get("license")
    licence = printable(" ".join(licence.split()))[:120] if isinstance(licence, str) and licence.strip() else None
    return {"params": params, "size_text": _size(params) if params else "", "open": weights if isinstance(
        weights, bool) else None, "license": licence}


def _size(n: int) -> str:
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            text = f"{n / scale:.1f}" if n < 10 * scale else f"{n / scale:.0f}"
            return text.removesuffix(".0") + unit
    return str(n)


def _money(v: float) -> str:
    """US dollars to three significant digits (at least cents): $0.0123, $0.500, $12.30."""
    return "$0" if v == 0 else f"${v:.{max(2, 2 - math.floor(math.log10(v)))}f}"


def _seconds(v: float) -> str:
    """Seconds to two significant digits: 0.042 s, 1.3 s, 12 s."""
    return "0 s" if v == 0 else f"{v:.{max(0, 1 - math.floor(math.log10(v)))}f} s"


def _tokens(v: float) -> str:
    """Tokens per query: whole tokens with thousands separated (1,234), two significant digits below 10."""
    return f"{v:,.0f}" if v >= 10 else f"{v:.2g}"


def _middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle: a source's beginning (which paper,
    which repository) and its end (the table, the commit, the run's folder) both tell rows apart."""
    if len(text) <= width:
        return text
    head = width // 2  # of the width - 1 characters kept, the beginning's share (the larger, for odd widths)
    return text[:head].rstrip() + "…" + text[len(text) - (width - 1 - head):].lstrip()


def _plain(value):
    """``value`` as strict JSON can hold it: a number that is not finite (a NaN or 1e999 in a run's
    recorded configuration, which JSON's readers accept) as its text."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _average(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else leaderboard_average(values)


def _value(system: dict, key: str) -> float | None:
    if key == "avg":
        return system["avg"]
    if key.startswith("g-"):
        return system["groups"].get(key[2:])
    if key in ("judged", "usd", "sec"):
        return system[key]
    if key == "model":
        return system["model"]["params"]
    return system["scores"].get(key)


def _shading(columns, systems: list[dict]) -> dict[str, tuple[float, float]]:
    """Each score column's range over the table's rows: a cell is shaded by its place in it."""
    out = {}
    for key, _, _ in columns:
        if key in ("model", "usd", "sec", "source"):
            continue
        values = [v for s in systems if (v := _value(s, key)) is not None]
        if values:
            out[key] = (min(values), max(values))
    return out


def _overlap_mark(system: dict) -> str:
    """The mark beside a system whose training data overlaps a dataset's source; its title (and the
    system's details) say which."""
    if not system["overlap"]:
        return ""
    return f'<span class="overlap" title="{escape(" · ".join(system["overlap"]))}">{OVERLAP_MARK}</span>'


def _tr(system: dict, columns, shade, *, sub: bool) -> str:
    """One table row: a system, or (``sub``) a run of its configuration with the differences."""
    sid = system["id"]
    link = (f'<a class="permalink" href="#row={sid}" title="Link to this row (opens its details)">'
            f'{"↳" if sub else system["rank"]}</a>')
    badge = _badge(system["origin"])
    if sub:
        label = (f'<td class="c-rank">{link}</td><td class="text c-sys"><button type="button" class="sys" '
                 f'data-id="{sid}" title="your run of {escape(system["system"])}">your run</button>'
                 f'<span class="meta" title="{escape(system["source"])}">{escape(_tail(system["source"]))}</span></td>')
    else:
        parts = [p for p in (system["rewriter"], system["retriever"], system["reranker"]) if p != "-"]
        parts = "" if all(p in system["system"] for p in parts) else " · ".join(parts)
        title = f' title="{escape(parts)}"' if parts else ""
        label = (f'<td class="c-rank" data-col="rank" data-v="{system["rank"]}">{link}</td>'
                 f'<td class="text c-sys" data-col="system" data-key="{escape(system["system"].lower())}">'
                 f'<button type="button" class="sys" data-id="{sid}" title="{escape(system["system"])}">'
                 f'{escape(system["system"])}</button>{_overlap_mark(system)}'
                 f'<span class="meta"{title}>{badge}{escape(parts)}</span></td>')
    cells = []
    previous = None
    for key, _, g in columns:
        if key == "source":
            cells.append(_source_cell(system, sub=sub))
            continue
        v = _value(system, key)
        cls = " ".join(c for c in ("gavg" if key.startswith("g-") or key == "avg" else "",
                                   "first" if g and g != previous else "", "text model" if key == "model" else "")
                       if c)
        previous = g
        style = ""
        if v is not None and key in shade and not sub:
            low, high = shade[key]
            t = 1.0 if high == low else max(0.0, min(1.0, (v - low) / (high - low)))
            style = f' style="background-color:rgba(47,111,159,{0.04 + 0.4 * t:.3f})"'
        extra = ""
        if sub and (key in system["scores"] or key == "avg"):
            d = system.get("avg_diff") if key == "avg" else system["diffs"].get(key)
            if d is not None:
                extra = f'<span class="diff {"up" if d > 0 else "down" if d < 0 else ""}">{number(d, signed=True)}</span>'
        if key == "avg":
            if system["tied"]:
                extra += ('<span class="tie" title="tied for first: the best row or not separable from it (paired '
                          'randomization test, Holm\'s correction)">≈</span>')
            if system["avg_ci"]:
                extra += f'<span class="ci" title="95% interval">{system["avg_ci"][0]:.2f}–{system["avg_ci"][1]:.2f}</span>'
        shown = _shown(system, key, v)
        col = "" if sub else f' data-col="{escape(key)}" data-v="{"" if v is None else v}"'
        group_attr = f' data-group="{g}"' if g else ""
        cells.append(f'<td class="{cls}"{col}{group_attr}{style}>{shown}{extra}</td>')
    incomplete = system["avg"] is None and not sub
    cls = " ".join(c for c in ("sub" if sub else "", "incomplete" if incomplete else "") if c)
    return f'<tr class="{cls}" data-id="{sid}" data-kind="{system["origin"]}">{label}{"".join(cells)}</tr>'


SOURCE_WIDTH = 44  # characters of a source the table shows (the rest: its tooltip)


def _source_cell(system: dict, *, sub: bool) -> str:
    """A row's source as the Source column shows it: a published row's without the word "published"
    (its section, its badge or its lack of one say that), cut in the middle; sorted by that text, A to Z."""
    source = system["source"]
    text = source[len("published ("):-1] if source.startswith("published (") and source.endswith(")") else source
    col = "" if sub else f' data-col="source" data-key="{escape(text.lower())}"'
    return f'<td class="text source"{col} title="{escape(source)}">{escape(_middle(text, SOURCE_WIDTH))}</td>'


def _tail(path: str) -> str:
    """A results folder's path by its last two parts (``…/r2med__bm25/0a1b2c3d``): where it ends is what
    tells runs apart."""
    parts = [p for p in path.split("/") if p]
    return path if len(parts) <= 2 else "…/" + "/".join(parts[-2:])


def _badge(origin: str) -> str:
    """The badge of a row of this kind of source (none for the leaderboard's rows)."""
    return f'<span class="badge {origin}">{escape(KINDS[origin][0])}</span>' if KINDS[origin][0] else ""


def _shown(system: dict, key: str, v) -> str:
    """A cell's text (HTML): a score to 2 decimals, judged@10 as a percentage, the model's size with
    its weights and licence below, a cost or a time; – where unknown (empty for a missing score)."""
    if key == "model":
        m = system["model"]
        if not (m["params"] or m["open"] is not None or m["license"]):
            return "–"
        weights = "–" if m["open"] is None else "open" if m["open"] else "closed"
        below = f'{weights} · {m["license"] or "–"}'
        return f'{m["size_text"] or "–"}<span class="meta" title="{escape(below)}">{escape(below)}</span>'
    if key == "judged":
        if v is None:
            return f'<span title="{escape(NO_JUDGED[system["origin"] in (*PUBLISHED_KINDS, "mteb")])}">–</span>'
        return f"{100 * v:.0f}%" + (f'<span class="meta" title="only relevant documents are judged: judged@10 is '
                                    f'the precision at 10, not a measure of holes">{escape(P_AT_10)}</span>'
                                    if system.get("judged_means") == "P@10" else "")
    if key == "usd" and system["reasoning"]:
        below = f'{system["reasoning_text"]} reasoning tok/query'
        return (f'{system["usd_text"] or "–"}<span class="meta reasoning" title="reasoning tokens the LLMs\' '
                f'servers reported, per query">{escape(below)}</span>')
    if key in ("usd", "sec"):
        return system[f"{key}_text"] or "–"
    return "" if v is None else f"{v:.2f}"
