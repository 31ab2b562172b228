"""The leaderboard as one self-contained HTML page: the ranked table with the paper's three task
groups, filters, search, sorting, per-dataset charts and a detail view per system.

Everything in a results file is untrusted input: every name, path and note is HTML-escaped where
the page is written, the data the detail view reads is JSON with ``<``, ``>`` and ``&`` escaped, and
the script only ever sets ``textContent``. The page loads nothing from the network.
"""

from __future__ import annotations

import json
import math
from html import escape

from .evaluation import leaderboard_average
from .tasks import GROUPS, R2MED_TASKS

SHORT = {t.name: t.short_name for t in R2MED_TASKS}
GROUP_OF = {t.name: t.group for t in R2MED_TASKS}
GROUP_LABELS = {"qa-reference": "Q&A reference", "clinical-evidence": "Clinical evidence",
                "clinical-case": "Clinical case"}
ORIGIN_LABELS = {"leaderboard": "Leaderboard", "repository": "Paper / repository run",
                 "paper": "Another paper's run", "mteb": "MTEB result", "run": "Your run", "local": "Local data"}
BAR, YOURS = "#2f6f9f", "#d9822b"
YOURS_CLASS = ' class="yours"'

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2329;background:#fafbfc;
 font-size:15px;line-height:1.4}
main{max-width:1480px;margin:0 auto;padding:1rem}
h1{font-size:1.6rem;margin:.2rem 0}
h2{font-size:1.15rem;margin:1.6rem 0 .6rem}
p.lede{margin:.2rem 0 1rem;color:#48525c;max-width:60rem}
.controls{display:flex;flex-wrap:wrap;gap:.6rem 1rem;align-items:flex-end;margin:0 0 .8rem}
.controls label{display:flex;flex-direction:column;font-size:.8rem;color:#48525c;gap:.15rem;min-width:0}
.controls input,.controls select{font:inherit;font-size:.9rem;padding:.3rem .4rem;border:1px solid #b9c2cb;
 border-radius:4px;background:#fff;max-width:100%}
.controls input[type=search]{width:16rem;max-width:calc(100vw - 2rem)}
.controls select{max-width:14rem}
fieldset{border:1px solid #d5dbe1;border-radius:4px;padding:.2rem .5rem;margin:0;display:flex;flex-wrap:wrap;
 gap:.1rem .7rem;font-size:.85rem;min-width:0}
fieldset legend{font-size:.8rem;color:#48525c;padding:0 .2rem}
fieldset label{flex-direction:row;align-items:center;font-size:.85rem;color:#1d2329}
#count{font-size:.85rem;color:#48525c}
.scroll{overflow-x:auto;max-width:100%;border:1px solid #d5dbe1;border-radius:6px;background:#fff}
table{border-collapse:collapse;font-size:.85rem;width:100%}
th,td{padding:.3rem .45rem;text-align:right;white-space:nowrap;border-bottom:1px solid #e6eaee}
thead th{background:#eef2f5;font-weight:600;vertical-align:bottom;white-space:normal;min-width:4.2rem}
thead th[data-col=rank]{min-width:0}
thead tr.groups th{text-align:center;border-bottom:2px solid #c5ced6;font-size:.8rem}
th.text,td.text{text-align:left}
td.system{white-space:normal;min-width:15rem;max-width:26rem}
th button{all:unset;cursor:pointer;display:inline-flex;gap:.2rem;align-items:center}
th button:focus-visible,button.sys:focus-visible{outline:2px solid #1b6ca8;outline-offset:2px}
th .ind{display:inline-block;width:.8em;color:#1b6ca8}
th.gavg,td.gavg{border-left:1px solid #d5dbe1;font-weight:600}
th.first,td.first{border-left:2px solid #c5ced6}
button.sys{all:unset;cursor:pointer;color:#13507e;font-weight:600;overflow-wrap:anywhere}
button.sys:hover{text-decoration:underline}
.meta{display:block;font-size:.75rem;color:#5b6670;overflow-wrap:anywhere}
.badge{display:inline-block;font-size:.7rem;padding:0 .35rem;border-radius:3px;background:#e6eaee;color:#333;
 margin-left:.3rem;vertical-align:1px}
.badge.run,.badge.local{background:#fbe3c8;color:#6b3a06}
.badge.mteb{background:#dceee0;color:#1f5130}
tbody.yours td,tr.sub td{background-color:#fff6e8}
tbody.yours td.system,tr.sub td.system{box-shadow:inset 4px 0 0 #d9822b}
tr.sub td{font-size:.8rem;color:#4a3410}
.diff{display:block;font-size:.7rem;color:#5b6670}
.diff.up{color:#1f7a3a}.diff.down{color:#b03030}
tr.incomplete td{color:#7a838c}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,420px),1fr));gap:1rem}
figure{margin:0;background:#fff;border:1px solid #d5dbe1;border-radius:6px;padding:.5rem}
figcaption{font-weight:600;font-size:.9rem;margin-bottom:.2rem}
figure svg{width:100%;height:auto;display:block}
dialog{max-width:min(960px,96vw);width:96vw;border:1px solid #b9c2cb;border-radius:8px;padding:1rem}
dialog::backdrop{background:rgba(20,30,40,.45)}
dialog h2{margin-top:0;overflow-wrap:anywhere}
dialog h3{font-size:1rem;margin:1rem 0 .4rem}
dialog pre,dialog code{white-space:pre-wrap;overflow-wrap:anywhere;background:#f3f5f7;border-radius:4px}
dialog pre{padding:.5rem;font-size:.8rem;max-height:16rem;overflow:auto}
dialog .close{float:right;font:inherit;padding:.2rem .6rem}
dialog ul{padding-left:1.2rem;overflow-wrap:anywhere}
.hidden{display:none}
@media (max-width:600px){main{padding:.5rem}h1{font-size:1.3rem}.controls select{max-width:10.5rem}}
"""

SCRIPT = r"""
(() => {
const data = JSON.parse(document.getElementById('data').textContent);
const table = document.getElementById('leaderboard');
const bodies = Array.from(table.tBodies);
const $ = id => document.getElementById(id);
let sorted = {col: 'rank', dir: 'ascending'};

function value(body, col) {
  const c = body.rows[0].querySelector(`[data-col="${col}"]`);
  if (!c) return null;
  if (c.dataset.key !== undefined) return c.dataset.key;
  return c.dataset.v === '' ? null : parseFloat(c.dataset.v);
}
function sortBy(col, dir) {
  sorted = {col, dir};
  const sign = dir === 'ascending' ? 1 : -1;
  const keyed = bodies.map((b, i) => [value(b, col), i, b]);
  keyed.sort((x, y) => {
    if (x[0] === null || y[0] === null) return (x[0] === null) - (y[0] === null) || x[1] - y[1];
    return (x[0] > y[0] ? sign : x[0] < y[0] ? -sign : 0) || x[1] - y[1];
  });
  keyed.forEach(k => table.appendChild(k[2]));
  table.querySelectorAll('th[data-col]').forEach(th => {
    const on = th.dataset.col === col;
    th.setAttribute('aria-sort', on ? dir : 'none');
    th.querySelector('.ind').textContent = on ? (dir === 'ascending' ? '▲' : '▼') : '';
  });
}
table.querySelectorAll('th[data-col] button').forEach(button => button.addEventListener('click', () => {
  const th = button.closest('th'), col = th.dataset.col;
  const first = th.dataset.first || 'descending';
  const dir = sorted.col === col ? (sorted.dir === 'ascending' ? 'descending' : 'ascending') : first;
  sortBy(col, dir);
}));

function filter() {
  const q = $('q').value.trim().toLowerCase();
  const pick = {rewriter: $('f-rewriter').value, retriever: $('f-retriever').value, reranker: $('f-reranker').value};
  const origins = new Set(Array.from(document.querySelectorAll('#origins input:checked')).map(i => i.value));
  let shown = 0;
  bodies.forEach(b => {
    const ok = (!q || b.dataset.search.includes(q)) && b.dataset.origin.split(' ').some(o => origins.has(o))
      && Object.entries(pick).every(([k, v]) => !v || b.dataset[k] === v);
    b.classList.toggle('hidden', !ok);
    shown += ok;
  });
  $('count').textContent = `${shown} of ${bodies.length} systems`;
  charts();
}
function group() {
  const g = $('group').value;
  table.querySelectorAll('[data-group]').forEach(c => c.classList.toggle('hidden', !!g && c.dataset.group !== g));
  sortBy(g ? 'g-' + g : 'rank', g ? 'descending' : 'ascending');
  charts();
}

// Each dataset's chart: the top systems by its score among the rows the filters show (ties in rank
// order), as horizontal bars with the name, the value and an x axis; your runs in another colour.
const NS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
  if (text !== undefined) e.textContent = text;
  return e;
}
function chart(figure, ds, systems) {
  const ranked = systems.filter(s => ds in s.scores).sort((a, b) => b.scores[ds] - a.scores[ds]).slice(0, data.top);
  figure.querySelector('svg')?.remove();
  if (!ranked.length) return false;
  const width = 440, bar = 22, left = 200, right = 44, pad = 6, plot = width - left - right;
  const axisMax = Math.max(10, Math.ceil(ranked[0].scores[ds] / 10) * 10), step = axisMax <= 50 ? 10 : 20;
  const bottom = pad + bar * ranked.length, height = bottom + 34, mid = y => (y + bar * 0.65).toFixed(1);
  const root = svg('svg', {viewBox: `0 0 ${width} ${height}`, role: 'img',
                           'aria-label': `${ds}: top ${ranked.length} systems by nDCG@10`});
  for (let tick = 0; tick <= axisMax; tick += step) {
    const x = (left + plot * tick / axisMax).toFixed(1);
    root.append(svg('line', {x1: x, y1: pad, x2: x, y2: bottom, stroke: '#e1e6ea'}),
                svg('text', {x, y: bottom + 13, 'font-size': 10, 'text-anchor': 'middle', fill: '#48525c'}, `${tick}`));
  }
  ranked.forEach((s, i) => {
    const v = s.scores[ds], y = pad + i * bar, w = plot * v / axisMax;
    const name = s.published === null ? s.system : `your ${s.system}`;
    const yours = s.origin === 'run' || s.origin === 'local' || s.published !== null;
    const g = svg('g', {});
    g.append(svg('title', {}, `${name}: ${v.toFixed(2)}`),
             svg('text', {x: left - 6, y: mid(y), 'font-size': 11, 'text-anchor': 'end', fill: '#1d2329'},
                 name.length <= 28 ? name : name.slice(0, 27) + '…'),
             svg('rect', {x: left, y: y + 3, width: w.toFixed(1), height: bar - 6, rx: 2,
                          fill: yours ? data.colours.yours : data.colours.bar}),
             svg('text', {x: (left + w + 4).toFixed(1), y: mid(y), 'font-size': 11, fill: '#1d2329'}, v.toFixed(2)));
    root.append(g);
  });
  root.append(svg('line', {x1: left, y1: bottom, x2: left + plot, y2: bottom, stroke: '#7a838c'}),
              svg('line', {x1: left, y1: pad, x2: left, y2: bottom, stroke: '#7a838c'}),
              svg('text', {x: (left + plot / 2).toFixed(1), y: height - 4, 'font-size': 10, 'text-anchor': 'middle',
                           fill: '#48525c'}, 'nDCG@10 ×100'));
  figure.append(root);
  return true;
}
function charts() {
  const shown = new Set(bodies.filter(b => !b.classList.contains('hidden'))
    .flatMap(b => Array.from(b.querySelectorAll('button.sys'), x => x.dataset.id)));
  const systems = Object.keys(data.systems).filter(id => shown.has(id)).map(id => data.systems[id]);
  const g = $('group').value;
  document.querySelectorAll('.charts figure').forEach(f => {
    const drawn = (!g || f.dataset.group === g) && chart(f, f.dataset.dataset, systems);
    f.classList.toggle('hidden', !drawn);
  });
}
['q', 'f-rewriter', 'f-retriever', 'f-reranker'].forEach(id => $(id).addEventListener('input', filter));
document.querySelectorAll('#origins input').forEach(i => i.addEventListener('change', filter));
$('group').addEventListener('change', group);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function grid(head, rows) {
  const t = el('table'), h = t.createTHead().insertRow(), b = t.createTBody();
  const text = x => /^[+-]?[\d.]+$|^–$/.test(x) ? '' : 'text';
  head.forEach((x, i) => h.appendChild(el('th', x, i ? '' : 'text')));
  rows.forEach(r => { const tr = b.insertRow(); r.forEach(x => tr.appendChild(el('td', x, text(x)))); });
  const box = el('div', null, 'scroll'); box.appendChild(t); return box;
}
const fmt = v => v === null || v === undefined ? '–' : v.toFixed(2);
function detail(id) {
  const s = data.systems[id], d = $('detail'), body = $('detail-body');
  body.replaceChildren();
  $('detail-title').textContent = s.system;
  body.appendChild(el('p', `${s.origin_label} · rank ${s.rank} · average ${fmt(s.avg)}` +
                      (s.published ? ` · published ${fmt(s.published.avg)} (${s.published.system})` : '')));
  body.appendChild(el('h3', 'nDCG@10 ×100 per dataset'));
  body.appendChild(grid(['Dataset', 'Group', 'nDCG@10', ...(s.published ? ['Published', 'Difference'] : [])],
    data.datasets.map(ds => [ds.name, ds.group_label, fmt(s.scores[ds.name]),
      ...(s.published ? [fmt(s.published.scores[ds.name]), s.diffs[ds.name] === undefined ? '–'
         : (s.diffs[ds.name] >= 0 ? '+' : '') + s.diffs[ds.name].toFixed(2)] : [])])));
  const names = Array.from(new Set(data.datasets.flatMap(ds => Object.keys(s.metrics[ds.name] || {})))).sort(
    (a, b) => a.replace(/\d+$/, '').localeCompare(b.replace(/\d+$/, ''))
              || parseInt(a.match(/\d+$/) || 0) - parseInt(b.match(/\d+$/) || 0));
  body.appendChild(el('h3', `Every metric shipped (×100), ${names.length}`));
  body.appendChild(grid(['Metric', ...data.datasets.map(ds => ds.name)],
    names.map(m => [m, ...data.datasets.map(ds => fmt((s.metrics[ds.name] || {})[m]))])));
  body.appendChild(el('h3', 'Configuration'));
  body.appendChild(el('pre', JSON.stringify(s.config, null, 2)));
  body.appendChild(el('h3', 'Command'));
  body.appendChild(el('pre', s.command || 'none: not a run of r2med-run (see the source below)'));
  body.appendChild(el('h3', 'Source'));
  const list = el('ul');
  [s.source, ...s.provenance, ...s.notes].filter((x, i, a) => x && a.indexOf(x) === i)
    .forEach(x => list.appendChild(el('li', x)));
  body.appendChild(list);
  d.showModal();
}
document.querySelectorAll('button.sys').forEach(b => b.addEventListener('click', () => detail(b.dataset.id)));
$('detail-close').addEventListener('click', () => $('detail').close());
filter();
})();
"""


def render_html(rows, tasks: list[str], *, top: int = 5) -> str:
    """The page for ``rows`` (leaderboard rows in rank order) over the datasets ``tasks``; each
    dataset's chart shows its ``top`` systems by that dataset's score."""
    groups = [(g, [t for t in tasks if GROUP_OF[t] == g]) for g in GROUPS]
    groups = [(g, ts) for g, ts in groups if ts]
    with_group_average = [g for g, ts in groups if len(ts) == sum(GROUP_OF[t] == g for t in GROUP_OF) > 1]
    systems: dict[str, dict] = {}
    for rank, row in enumerate(rows, 1):
        systems[f"s{rank}"] = _system(row, rank, tasks, with_group_average)
        for j, run in enumerate(row.joined, 1):
            systems[f"s{rank}-{j}"] = _system(run, rank, tasks, with_group_average, published=systems[f"s{rank}"])

    columns = [("avg", "Avg", None)]
    for g, ts in groups:
        columns += [(SHORT[t], SHORT[t], g) for t in ts]
        if g in with_group_average:
            columns.append((f"g-{g}", "Group avg", g))
    shade = _shading(columns, [s for k, s in systems.items() if "-" not in k])

    head_groups = ['<th colspan="2"></th><th></th>']
    for g, ts in groups:
        span = len(ts) + (g in with_group_average)
        head_groups.append(f'<th colspan="{span}" data-group="{g}" class="first">{escape(GROUP_LABELS[g])}</th>')
    head = [('<th data-col="rank" data-first="ascending" aria-sort="ascending"><button type="button">#'
             '<span class="ind" aria-hidden="true">▲</span></button></th>'),
            ('<th data-col="system" data-first="ascending" aria-sort="none" class="text"><button type="button">System'
             '<span class="ind" aria-hidden="true"></span></button></th>')]
    previous = None
    for key, label, g in columns:
        cls = " ".join(c for c in ("gavg" if key.startswith("g-") or key == "avg" else "",
                                   "first" if g and g != previous else "") if c)
        previous = g
        group_attr = f' data-group="{g}"' if g else ""
        head.append(f'<th data-col="{escape(key)}"{group_attr} aria-sort="none" class="{cls}" scope="col">'
                    f'<button type="button">{escape(label)}<span class="ind" aria-hidden="true"></span></button></th>')

    bodies = []
    for rank, row in enumerate(rows, 1):
        system = systems[f"s{rank}"]
        runs = [systems[f"s{rank}-{j}"] for j in range(1, len(row.joined) + 1)]
        yours = system["origin"] in ("run", "local")
        origins = " ".join(dict.fromkeys([system["origin"], *(r["origin"] for r in runs)]))
        search = " ".join([row.system, row.rewriter, row.retriever, row.reranker, row.source,
                           *(r["source"] for r in runs)]).lower()
        attrs = (f' data-origin="{origins}" data-rewriter="{escape(row.rewriter)}"'
                 f' data-retriever="{escape(row.retriever)}" data-reranker="{escape(row.reranker)}"'
                 f' data-search="{escape(search)}"')
        trs = [_tr(f"s{rank}", system, columns, shade, sub=False)]
        trs += [_tr(f"s{rank}-{j}", r, columns, shade, sub=True) for j, r in enumerate(runs, 1)]
        bodies.append(f'<tbody{attrs}{YOURS_CLASS if yours else ""}>{"".join(trs)}</tbody>')

    def options(name: str, attr: str) -> str:
        values = sorted({getattr(r, attr) for r in rows} - {"-"}, key=str.lower)
        items = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
        none = '<option value="-">none</option>' if any(getattr(r, attr) == "-" for r in rows) else ""
        return f'<label>{name}<select id="f-{attr}"><option value="">Any</option>{none}{items}</select></label>'

    counts = {o: sum(r.origin == o for r in [*rows, *(j for r in rows for j in r.joined)]) for o in ORIGIN_LABELS}
    origin_boxes = "".join(f'<label><input type="checkbox" value="{o}" checked> {escape(label)} ({counts[o]})</label>'
                           for o, label in ORIGIN_LABELS.items() if counts[o])
    group_options = "".join(f'<option value="{g}">{escape(GROUP_LABELS[g])}</option>' for g in with_group_average)
    controls = (
        '<form class="controls" role="search" onsubmit="return false">'
        '<label>Search<input type="search" id="q" placeholder="system, model, path…" autocomplete="off"></label>'
        f'<label>Task group<select id="group"><option value="">All datasets</option>{group_options}</select></label>'
        f'{options("Rewriter", "rewriter")}{options("Retriever", "retriever")}{options("Reranker", "reranker")}'
        f'<fieldset id="origins"><legend>Source</legend>{origin_boxes}</fieldset>'
        '<output id="count" aria-live="polite"></output></form>')
    datasets = [{"name": SHORT[t], "group_label": GROUP_LABELS[GROUP_OF[t]]} for t in tasks]
    charts = "".join(f'<figure data-dataset="{escape(SHORT[t])}" data-group="{GROUP_OF[t]}"><figcaption>'
                     f'{escape(SHORT[t])}</figcaption></figure>' for t in tasks)  # drawn by the script
    payload = json.dumps(_plain({"systems": systems, "datasets": datasets, "top": top,
                                 "colours": {"bar": BAR, "yours": YOURS}}), allow_nan=False, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    yours = sum(s["origin"] in ("run", "local") for s in systems.values())
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>R2MED leaderboard</title><style>{STYLE}</style></head><body><main>"
        "<h1>R2MED leaderboard</h1>"
        f'<p class="lede">nDCG@10 ×100 on {len(tasks)} of R2MED\'s {len(R2MED_TASKS)} datasets, {len(rows)} systems'
        f'{f"; your {yours} runs highlighted, a run of a published configuration under its row" if yours else ""}'
        ". Averages are the leaderboard's: the mean "
        "of the 2-decimal values, rounded half-up; a group's average is over its datasets. Sort by any column "
        "(scores: highest first), filter, and open a system for its every metric, configuration and command.</p>"
        f"{controls}"
        f'<div class="scroll"><table id="leaderboard"><thead><tr class="groups">{"".join(head_groups)}</tr>'
        f'<tr>{"".join(head)}</tr></thead>{"".join(bodies)}</table></div>'
        f'<h2>Top {top} systems per dataset</h2><p class="lede">Among the systems the filters show.</p>'
        f'<div class="charts">{charts}</div>'
        '<dialog id="detail" aria-labelledby="detail-title"><button type="button" class="close" id="detail-close">'
        'Close</button><h2 id="detail-title"></h2><div id="detail-body"></div></dialog>'
        f'<script type="application/json" id="data">{payload}</script>'
        f"<script>{SCRIPT}</script></main></body></html>\n"
    )


def _system(row, rank: int, tasks: list[str], group_averages: list[str], published: dict | None = None) -> dict:
    """What the table and the detail view show of one row (or of a run joined to a published row)."""
    scores = {SHORT[t]: row.scores[t] for t in tasks if t in row.scores}
    system = {
        "rank": rank, "system": row.system, "rewriter": row.rewriter, "retriever": row.retriever,
        "reranker": row.reranker, "origin": row.origin, "origin_label": ORIGIN_LABELS[row.origin],
        "source": row.source, "notes": row.notes, "provenance": row.provenance, "command": row.command,
        "avg": row.average_over(tasks), "scores": scores,
        "groups": {g: _average([row.scores.get(t) for t in GROUP_OF if GROUP_OF[t] == g]) for g in group_averages},
        "metrics": {SHORT[t]: {k: round(100 * v, 2) for k, v in sorted(row.metrics.get(t, {}).items())}
                    for t in tasks},
        "config": row.config if row.config is not None else
        {"rewriter": row.rewriter, "retriever": row.retriever, "reranker": row.reranker},
        "published": None, "diffs": {},
    }
    if published is not None:
        system["published"] = {"system": published["system"], "avg": published["avg"], "scores": published["scores"]}
        system["diffs"] = {d: round(v - published["scores"][d], 2) for d, v in scores.items()
                           if d in published["scores"]}
        if system["avg"] is not None and published["avg"] is not None:
            system["avg_diff"] = round(system["avg"] - published["avg"], 2)
    return system


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
    return system["scores"].get(key)


def _shading(columns, systems: list[dict]) -> dict[str, tuple[float, float]]:
    """Each score column's range over the table's rows: a cell is shaded by its place in it."""
    out = {}
    for key, _, _ in columns:
        values = [v for s in systems if (v := _value(s, key)) is not None]
        if values:
            out[key] = (min(values), max(values))
    return out


def _tr(sid: str, system: dict, columns, shade, *, sub: bool) -> str:
    """One table row: a system, or (``sub``) a run of its configuration with the differences."""
    if sub:
        label = (f'<td></td><td class="text system">↳ <button type="button" class="sys" data-id="{sid}">your run'
                 f'</button><span class="meta">{escape(system["source"])}</span></td>')
    else:
        badge = f'<span class="badge {system["origin"]}">{escape(system["origin_label"])}</span>'
        parts = [p for p in (system["rewriter"], system["retriever"], system["reranker"]) if p != "-"]
        parts = "" if all(p in system["system"] for p in parts) else " · ".join(escape(p) for p in parts)
        label = (f'<td data-col="rank" data-v="{system["rank"]}">{system["rank"]}</td>'
                 f'<td class="text system" data-col="system" data-key="{escape(system["system"].lower())}">'
                 f'<button type="button" class="sys" data-id="{sid}">'
                 f'{escape(system["system"])}</button>{badge}<span class="meta">{parts}</span></td>')
    cells = []
    previous = None
    for key, _, g in columns:
        v = _value(system, key)
        cls = " ".join(c for c in ("gavg" if key.startswith("g-") or key == "avg" else "",
                                   "first" if g and g != previous else "") if c)
        previous = g
        style = ""
        if v is not None and key in shade:
            low, high = shade[key]
            t = 1.0 if high == low else max(0.0, min(1.0, (v - low) / (high - low)))
            style = f' style="background-color:rgba(47,111,159,{0.04 + 0.4 * t:.3f})"'
        diff = ""
        if sub:
            d = system["diffs"].get(key) if key in system["scores"] else None
            d = system.get("avg_diff") if key == "avg" else d
            if d is not None:
                diff = f'<span class="diff {"up" if d > 0 else "down" if d < 0 else ""}">{d:+.2f}</span>'
        shown = "" if v is None else f"{v:.2f}"
        col = "" if sub else f' data-col="{escape(key)}" data-v="{"" if v is None else v}"'
        group_attr = f' data-group="{g}"' if g else ""
        cells.append(f'<td class="{cls}"{col}{group_attr}{style if not sub else ""}>{shown}{diff}</td>')
    incomplete = system["avg"] is None and not sub
    cls = " ".join(c for c in ("sub" if sub else "", "incomplete" if incomplete else "") if c)
    return f'<tr class="{cls}">{label}{"".join(cells)}</tr>'

