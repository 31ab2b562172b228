"""The leaderboard as one self-contained HTML page: the ranked table with the paper's three task
groups, filters, search, sorting, per-dataset charts, quality against cost, and a detail view per
system.

The page is meant to be shared: the table's header and each row's rank and name stay in view while
it scrolls (both ways, also on a 400 px phone), and the filters, the search, the sort and the open
detail view live in the address (``#q=bm25&hide=local&sort=Biology``), so a copied address opens
the same view; each row's rank is its permalink (``#row=<id>``: opens that row's detail view and
highlights it).

Everything in a results file is untrusted input: every name, path and note is HTML-escaped where
the page is written, the data the detail view reads is JSON with ``<``, ``>`` and ``&`` escaped, and
the script only ever sets ``textContent``. The page loads nothing from the network.
"""

from __future__ import annotations

import json
import math
import re
from html import escape
from pathlib import Path

from .evaluation import leaderboard_average
from .tasks import GROUPS, R2MED_TASKS
from .terminal import printable

SHORT = {t.name: t.short_name for t in R2MED_TASKS}
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
    "mteb": ("MTEB", "a result from the MTEB results repository", "#3d8b57"),
    "run": ("your run", "a results folder you gave", "#d9822b"),
    "local": ("local data", "your run on data other than R2MED's official release: not comparable", "#8a8f96"),
}
# (as leaderboard.PUBLISHED_KINDS and SCORE_FAMILIES, which render() imports this module to use: a test
# keeps them equal) the kinds of published rows, and the metrics that are scores in [0, 1], shown ×100.
PUBLISHED_KINDS = ("leaderboard", "repository", "paper")
SCORE_FAMILIES = re.compile(r"^(ndcg|map|recall|precision|mrr|hit_rate)_at_\d+$|^(mrr|accuracy)$")
YOURS_CLASS = ' class="yours"'
NO_PER_QUERY = "published rows have no per-query scores"  # where their intervals would be

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2329;background:#fafbfc;
 font-size:15px;line-height:1.4}
main{max-width:1480px;margin:0 auto;padding:1rem}
h1{font-size:1.6rem;margin:.2rem 0}
h2{font-size:1.15rem;margin:1.6rem 0 .6rem}
p.lede{margin:.2rem 0 1rem;color:#48525c;max-width:60rem}
.controls{display:flex;flex-wrap:wrap;gap:.6rem 1rem;align-items:flex-end;margin:0 0 .6rem}
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
ul.kinds{list-style:none;margin:0 0 .6rem;padding:0;display:flex;flex-wrap:wrap;gap:.2rem 1.2rem;font-size:.8rem;
 color:#48525c}
ul.kinds li{display:flex;align-items:baseline;gap:.35rem}
.swatch{display:inline-block;width:.75rem;height:.75rem;border-radius:2px;flex:none;align-self:center}
.scroll{overflow:auto;max-width:100%;max-height:calc(100vh - 1.5rem);border:1px solid #d5dbe1;border-radius:6px;
 background:#fff;overscroll-behavior-x:contain}
table{border-collapse:separate;border-spacing:0;font-size:.85rem;width:100%}
th,td{padding:.3rem .45rem;text-align:right;white-space:nowrap;border-bottom:1px solid #e6eaee}
#leaderboard thead{position:sticky;top:0;z-index:3}
thead th{background:#eef2f5;font-weight:600;vertical-align:bottom;white-space:normal;min-width:4.2rem}
#leaderboard thead tr:last-child th{border-bottom:1px solid #c5ced6}
thead th.c-rank{min-width:0}
thead tr.groups th{text-align:center;border-bottom:2px solid #c5ced6;font-size:.8rem}
th.text,td.text{text-align:left}
.c-rank,.c-sys{position:sticky;z-index:1;background:#fff}
.c-rank{left:0}
.c-sys{left:var(--rank-width,2.4rem);box-shadow:inset -1px 0 0 #d5dbe1}
thead .c-rank,thead .c-sys{background:#eef2f5}
td.c-sys{white-space:normal;min-width:13rem;max-width:15rem;width:15rem}
th button{all:unset;cursor:pointer;display:inline-flex;gap:.2rem;align-items:center}
th button:focus-visible,button.sys:focus-visible,a.permalink:focus-visible{outline:2px solid #1b6ca8;
 outline-offset:2px}
th .ind{display:inline-block;width:.8em;color:#1b6ca8}
th.gavg,td.gavg{border-left:1px solid #d5dbe1;font-weight:600}
th.first,td.first{border-left:2px solid #c5ced6}
a.permalink{color:inherit;text-decoration:none}
a.permalink:hover{text-decoration:underline}
button.sys{all:unset;cursor:pointer;color:#13507e;font-weight:600;overflow-wrap:anywhere;display:-webkit-box;
 -webkit-box-orient:vertical;-webkit-line-clamp:2;overflow:hidden;text-align:left}
button.sys:hover{text-decoration:underline}
.meta{display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:1;overflow:hidden;font-size:.75rem;
 color:#5b6670;overflow-wrap:anywhere}
td.model .meta{display:block;white-space:nowrap;max-width:9rem;text-overflow:ellipsis}
.badge{display:inline-block;font-size:.7rem;padding:0 .35rem;border-radius:3px;background:#e6eaee;color:#333;
 margin-right:.3rem;vertical-align:1px;white-space:nowrap}
.badge.run{background:#fbe3c8;color:#6b3a06}
.badge.local{background:#e4e6e9;color:#3a3f45;outline:1px dashed #8a8f96}
.badge.mteb{background:#dceee0;color:#1f5130}
.badge.repository{background:#dcebf5;color:#1d4a66}
.badge.paper{background:#e8e3f3;color:#3f3366}
tbody.yours td,tr.sub td{background-color:#fff6e8}
tbody.yours td.c-sys,tr.sub td.c-sys{box-shadow:inset 4px 0 0 #d9822b,inset -1px 0 0 #d5dbe1}
tr.sub td{font-size:.8rem;color:#4a3410}
tr.target td{background-color:#fff3b0}
tr.target td.c-sys{box-shadow:inset 4px 0 0 #1b6ca8,inset -1px 0 0 #d5dbe1}
.diff,.ci{display:block;font-size:.7rem;color:#5b6670;font-weight:400}
.diff.up{color:#1f7a3a}.diff.down{color:#b03030}
.tie{color:#8a5a00;font-weight:700;margin-left:.15rem;cursor:help}
tr.incomplete td{color:#7a838c}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,420px),1fr));gap:1rem}
figure{margin:0;background:#fff;border:1px solid #d5dbe1;border-radius:6px;padding:.5rem}
figcaption{font-weight:600;font-size:.9rem;margin-bottom:.2rem}
figure svg{width:100%;height:auto;display:block}
figure.wide{max-width:760px}
.legend{display:flex;flex-wrap:wrap;gap:.2rem 1rem;font-size:.8rem;color:#48525c;margin:0 0 .6rem;padding:0;
 list-style:none}
.legend li{display:flex;align-items:center;gap:.35rem}
dialog{max-width:min(960px,96vw);width:96vw;border:1px solid #b9c2cb;border-radius:8px;padding:1rem}
dialog::backdrop{background:rgba(20,30,40,.45)}
dialog h2{margin-top:0;overflow-wrap:anywhere}
dialog h3{font-size:1rem;margin:1rem 0 .4rem}
dialog .scroll{max-height:none}
dialog pre,dialog code{white-space:pre-wrap;overflow-wrap:anywhere;background:#f3f5f7;border-radius:4px}
dialog pre{padding:.5rem;font-size:.8rem;max-height:16rem;overflow:auto}
dialog .close{float:right;font:inherit;padding:.2rem .6rem}
dialog ul,dialog dl{padding-left:1.2rem;overflow-wrap:anywhere}
dialog dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .8rem;padding:0;margin:.4rem 0}
dialog dt{color:#48525c}dialog dd{margin:0}
.hidden{display:none}
@media (max-width:600px){main{padding:.5rem}h1{font-size:1.3rem}.controls select{max-width:10.5rem}
 td.c-sys{min-width:10.5rem;max-width:10.5rem;width:10.5rem}th,td{padding:.3rem .35rem}
 thead th{min-width:3.6rem}}
"""

SCRIPT = r"""
(() => {
const $ = id => document.getElementById(id);
const data = JSON.parse($('data').textContent);
const table = $('leaderboard'), box = table.closest('.scroll');
const bodies = Array.from(table.tBodies);
const rowOf = id => table.querySelector(`tr[data-id="${CSS.escape(id)}"]`);
const SELECTS = ['rewriter', 'retriever', 'reranker'];
let sorted = {col: 'rank', dir: 'ascending'};
// An address naming a row scrolls to it, not to where the page was when it was last shown.
if (new URLSearchParams(location.hash.slice(1)).has('row')) history.scrollRestoration = 'manual';

// The rank and name columns stay put while the table scrolls sideways: the name's offset is the
// rank column's width.
function stick() {
  const rank = table.querySelector('thead tr:last-child th.c-rank');
  table.style.setProperty('--rank-width', rank.getBoundingClientRect().width + 'px');
}

function value(body, col) {
  const c = body.rows[0].querySelector(`[data-col="${col}"]`);
  if (!c) return null;
  if (c.dataset.key !== undefined) return c.dataset.key;
  return c.dataset.v === '' ? null : parseFloat(c.dataset.v);
}
function defaultSort() {
  const g = $('group').value;
  return g ? {col: 'g-' + g, dir: 'descending'} : {col: 'rank', dir: 'ascending'};
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
  sortBy(col, sorted.col === col ? (sorted.dir === 'ascending' ? 'descending' : 'ascending') : first);
  save();
}));

const checked = () => new Set(Array.from(document.querySelectorAll('#origins input:checked')).map(i => i.value));
function filter() {
  const q = $('q').value.trim().toLowerCase();
  const origins = checked();
  let shown = 0;
  bodies.forEach(b => {
    const ok = (!q || b.dataset.search.includes(q)) && b.dataset.origin.split(' ').some(o => origins.has(o))
      && SELECTS.every(k => !$('f-' + k).value || b.dataset[k] === $('f-' + k).value);
    b.classList.toggle('hidden', !ok);
    Array.from(b.rows).slice(1).forEach(tr => tr.classList.toggle('hidden', !origins.has(tr.dataset.kind)));
    shown += ok;
  });
  $('count').textContent = `${shown} of ${bodies.length} systems`;
  charts();
}
function columns() {
  const g = $('group').value;
  table.querySelectorAll('[data-group]').forEach(c => c.classList.toggle('hidden', !!g && c.dataset.group !== g));
}

// The address holds the view: q, group, rewriter, retriever, reranker, hide (sources not shown),
// sort (column, and :asc or :desc where it is not the column's first direction), row (open detail).
function state() {
  const p = new URLSearchParams();
  if ($('q').value) p.set('q', $('q').value);
  if ($('group').value) p.set('group', $('group').value);
  SELECTS.forEach(k => { if ($('f-' + k).value) p.set(k, $('f-' + k).value); });
  const hidden = Array.from(document.querySelectorAll('#origins input:not(:checked)')).map(i => i.value);
  if (hidden.length) p.set('hide', hidden.join(','));
  const d = defaultSort();
  if (sorted.col !== d.col || sorted.dir !== d.dir) {
    const th = table.querySelector(`th[data-col="${CSS.escape(sorted.col)}"]`);
    const first = (th && th.dataset.first) || 'descending';
    p.set('sort', sorted.col + (sorted.dir === first ? '' : sorted.dir === 'ascending' ? ':asc' : ':desc'));
  }
  if ($('detail').open && $('detail').dataset.id) p.set('row', $('detail').dataset.id);
  return p;
}
function save() {  // (':', ',' and '/' need no escaping after '#': kept readable)
  const p = state().toString().replace(/%3A/gi, ':').replace(/%2C/gi, ',').replace(/%2F/gi, '/');
  history.replaceState(null, '', p ? '#' + p : location.href.split('#')[0]);
}
function restore() {
  const p = new URLSearchParams(location.hash.slice(1));
  const set = (el, v) => { el.value = Array.from(el.options || []).some(o => o.value === v) ? v : ''; };
  $('q').value = p.get('q') || '';
  set($('group'), p.get('group') || '');
  SELECTS.forEach(k => set($('f-' + k), p.get(k) || ''));
  const hide = new Set((p.get('hide') || '').split(','));
  document.querySelectorAll('#origins input').forEach(i => { i.checked = !hide.has(i.value); });
  columns();
  let [col, dir] = (p.get('sort') || '').split(':');
  const th = col && table.querySelector(`th[data-col="${CSS.escape(col)}"]`);
  if (th) {
    dir = dir === 'asc' ? 'ascending' : dir === 'desc' ? 'descending' : th.dataset.first || 'descending';
    sortBy(col, dir);
  } else {
    const d = defaultSort();
    sortBy(d.col, d.dir);
  }
  filter();
  const id = p.get('row');
  if (id && Object.hasOwn(data.systems, id)) {
    highlight(id);
    detail(id);
  } else if ($('detail').open) {
    $('detail').close();
  }
}
function highlight(id) {
  table.querySelectorAll('tr.target').forEach(tr => tr.classList.remove('target'));
  const tr = rowOf(id);
  if (!tr) return;
  tr.classList.add('target');
  // into view: the page to the table, the table to the row (below its sticky header)
  box.scrollIntoView({block: 'start'});
  box.scrollTop += tr.getBoundingClientRect().top - box.getBoundingClientRect().top - table.tHead.offsetHeight - 8;
}
['q', ...SELECTS.map(k => 'f-' + k)].forEach(id => $(id).addEventListener('input', () => { filter(); save(); }));
document.querySelectorAll('#origins input').forEach(i => i.addEventListener('change', () => { filter(); save(); }));
$('group').addEventListener('change', () => {
  columns();
  const d = defaultSort();
  sortBy(d.col, d.dir);
  charts();
  save();
});
window.addEventListener('hashchange', restore);
table.querySelectorAll('a.permalink').forEach(a => a.addEventListener('click', e => {
  e.preventDefault();  // the filters stay as they are; the address gets the row
  const id = a.closest('tr').dataset.id;
  highlight(id);
  detail(id);
}));

// Charts draw the systems the table shows whose own source is shown (a run of a published
// configuration sits in its published row's group, but is drawn only when its source is shown).
function shownSystems() {
  const origins = checked();
  return bodies.filter(b => !b.classList.contains('hidden'))
    .flatMap(b => Array.from(b.rows).filter(tr => !tr.classList.contains('hidden')))
    .map(tr => data.systems[tr.dataset.id]).filter(s => origins.has(s.origin));
}
// Text shortened as the terminal shortens it: paths to their last part, then at a word boundary.
function shorten(text, width) {
  if (text.length <= width) return text;
  const tail = w => {
    const eq = w.indexOf('='), head = eq >= 0 && w.indexOf('/') > eq ? w.slice(0, eq + 1) : '';
    const parts = w.slice(head.length).split('/').filter(Boolean);
    const t = head + '…/' + parts[parts.length - 1];
    return w.slice(head.length).includes('/') && parts.length > 1 && t.length < w.length ? t : w;
  };
  const words = text.split(' ');
  Array.from(words.keys()).sort((a, b) => words[b].length - words[a].length).forEach(i => {
    if (words.join(' ').length > width) words[i] = tail(words[i]);
  });
  text = words.join(' ');
  if (text.length <= width) return text;
  const room = width - 1;
  let cut = text.lastIndexOf(' ', room);
  if (cut < room / 2) {
    let p = room;
    while (p > 0 && !'-_'.includes(text[p])) p--;
    cut = Math.max(cut, p);
  }
  return (cut > 0 ? text.slice(0, cut).replace(/[\s+\-_·,;:/]+$/, '') : text.slice(0, room)) + '…';
}
const NS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
  if (text !== undefined) e.textContent = text;
  return e;
}
const nameOf = s => s.published === null ? s.system : `your ${s.system}`;
const fmt = v => v === null || v === undefined ? '–' : v.toFixed(2);
const interval = ci => ci ? `${ci[0].toFixed(2)}–${ci[1].toFixed(2)}` : '–';
// Each dataset's chart: the top systems by its score among those shown (ties in rank order), as
// horizontal bars coloured by source, with the 95% interval as a whisker where the row has one.
function chart(figure, ds, systems) {
  const ranked = systems.filter(s => ds in s.scores).sort((a, b) => b.scores[ds] - a.scores[ds]).slice(0, data.top);
  figure.querySelector('svg')?.remove();
  if (!ranked.length) return [];
  const width = 440, bar = 22, left = 200, right = 44, pad = 6, plot = width - left - right;
  const high = Math.max(...ranked.map(s => s.ci[ds] ? Math.max(s.ci[ds][1], s.scores[ds]) : s.scores[ds]));
  const axisMax = Math.max(10, Math.ceil(high / 10) * 10), step = axisMax <= 50 ? 10 : 20;
  const bottom = pad + bar * ranked.length, height = bottom + 34, mid = y => (y + bar * 0.65).toFixed(1);
  const x = v => left + plot * v / axisMax;
  const root = svg('svg', {viewBox: `0 0 ${width} ${height}`, role: 'img',
                           'aria-label': `${ds}: top ${ranked.length} systems by nDCG@10`});
  for (let tick = 0; tick <= axisMax; tick += step) {
    const at = x(tick).toFixed(1);
    root.append(svg('line', {x1: at, y1: pad, x2: at, y2: bottom, stroke: '#e1e6ea'}),
                svg('text', {x: at, y: bottom + 13, 'font-size': 10, 'text-anchor': 'middle', fill: '#48525c'}, `${tick}`));
  }
  ranked.forEach((s, i) => {
    const v = s.scores[ds], y = pad + i * bar, ci = s.ci[ds], name = nameOf(s);
    const g = svg('g', {'data-kind': s.origin});
    g.append(svg('title', {}, `${name}: ${v.toFixed(2)}` + (ci ? ` (95% interval ${interval(ci)})` : '')),
             svg('text', {x: left - 6, y: mid(y), 'font-size': 11, 'text-anchor': 'end', fill: '#1d2329'},
                 shorten(name, 30)),
             svg('rect', {x: left, y: y + 3, width: (x(v) - left).toFixed(1), height: bar - 6, rx: 2,
                          fill: data.kinds[s.origin].colour}));
    let end = x(v);
    if (ci) {
      const [a, b, c] = [x(ci[0]), x(ci[1]), y + bar / 2];
      g.append(svg('path', {class: 'whisker', d: `M${a.toFixed(1)} ${c - 5}v10M${a.toFixed(1)} ${c}H${b.toFixed(1)}` +
                            `M${b.toFixed(1)} ${c - 5}v10`, stroke: '#1d2329', 'stroke-width': 1.2, fill: 'none'}));
      end = Math.max(end, b);
    }
    g.append(svg('text', {x: (end + 4).toFixed(1), y: mid(y), 'font-size': 11, fill: '#1d2329'}, v.toFixed(2)));
    root.append(g);
  });
  root.append(svg('line', {x1: left, y1: bottom, x2: left + plot, y2: bottom, stroke: '#7a838c'}),
              svg('line', {x1: left, y1: pad, x2: left, y2: bottom, stroke: '#7a838c'}),
              svg('text', {x: (left + plot / 2).toFixed(1), y: height - 4, 'font-size': 10, 'text-anchor': 'middle',
                           fill: '#48525c'}, 'nDCG@10 ×100'));
  figure.append(root);
  return ranked;
}
function legend(list, drawn) {
  list.replaceChildren();
  const kinds = Object.keys(data.kinds).filter(k => drawn.some(s => s.origin === k));
  kinds.forEach(k => {
    const li = document.createElement('li'), sw = document.createElement('span');
    li.dataset.kind = k;
    sw.className = 'swatch';
    sw.style.background = data.kinds[k].colour;
    li.append(sw, data.kinds[k].label);
    list.append(li);
  });
  const note = document.createElement('li');
  note.className = 'intervals';
  const withCi = drawn.some(s => s.has_ci), published = drawn.some(s => data.published.includes(s.origin));
  note.textContent = (withCi ? '├─┤ 95% interval (bootstrap over queries)' : 'No intervals') +
    (published ? `; ${data.no_per_query}` : withCi ? '' : ': no per-query scores');
  if (drawn.length) list.append(note);
}
function charts() {
  const systems = shownSystems(), g = $('group').value;
  const drawn = [];
  document.querySelectorAll('.charts figure').forEach(f => {
    const ranked = !g || f.dataset.group === g ? chart(f, f.dataset.dataset, systems) : [];
    f.classList.toggle('hidden', !ranked.length);
    drawn.push(...ranked);
  });
  legend($('chart-legend'), drawn);
  cost(systems);
}

// Quality against cost per query: every shown system with a cost, dollars on a log scale (free ones
// at the axis' left end), the Pareto front (no other system both as cheap and better) marked and joined.
function cost(systems) {
  const g = $('group').value, figure = $('cost');
  const quality = s => g ? (s.groups[g] ?? null) : s.avg;
  const points = systems.filter(s => s.usd !== null && quality(s) !== null)
    .map(s => ({s, usd: s.usd, q: quality(s)}));
  figure.querySelector('svg')?.remove();
  $('cost-section').classList.toggle('hidden', !points.length);
  if (!points.length) return;
  const byCost = points.slice().sort((a, b) => a.usd - b.usd || b.q - a.q);
  let best = -Infinity;
  byCost.forEach(p => { p.front = p.q > best; if (p.front) best = p.q; });
  const width = 640, height = 360, left = 56, right = 16, top = 12, bottom = 44;
  const positive = points.filter(p => p.usd > 0).map(p => p.usd);
  let lo = positive.length ? Math.floor(Math.log10(Math.min(...positive))) : -3;
  let hi = positive.length ? Math.ceil(Math.log10(Math.max(...positive))) : 0;
  if (hi === lo) hi = lo + 1;
  const free = points.some(p => p.usd === 0), x0 = left + (free ? 52 : 0), plot = width - right - x0;
  const x = v => v > 0 ? x0 + plot * (Math.log10(v) - lo) / (hi - lo) : left + 14;
  const qs = points.map(p => p.q), qlo = Math.floor(Math.min(...qs) / 5) * 5, qhi = Math.ceil(Math.max(...qs) / 5) * 5 || 5;
  const y = v => top + (height - top - bottom) * (1 - (v - qlo) / Math.max(qhi - qlo, 1));
  const root = svg('svg', {viewBox: `0 0 ${width} ${height}`, role: 'img',
                           'aria-label': 'nDCG@10 against US dollars per query, Pareto front marked'});
  for (let e = lo; e <= hi; e++) {
    const at = x(10 ** e).toFixed(1);
    root.append(svg('line', {x1: at, y1: top, x2: at, y2: height - bottom, stroke: '#e1e6ea'}),
                svg('text', {x: at, y: height - bottom + 14, 'font-size': 10, 'text-anchor': 'middle', fill: '#48525c'},
                    `$${10 ** e >= 1 ? 10 ** e : (10 ** e).toFixed(-e)}`));
  }
  if (free) root.append(svg('text', {x: left + 14, y: height - bottom + 14, 'font-size': 10, 'text-anchor': 'middle',
                                      fill: '#48525c'}, '$0'));
  for (let v = qlo; v <= qhi; v += Math.max(5, Math.ceil((qhi - qlo) / 25) * 5)) {
    root.append(svg('line', {x1: left, y1: y(v).toFixed(1), x2: width - right, y2: y(v).toFixed(1), stroke: '#eef1f4'}),
                svg('text', {x: left - 6, y: (y(v) + 3).toFixed(1), 'font-size': 10, 'text-anchor': 'end', fill: '#48525c'},
                    `${v}`));
  }
  const front = byCost.filter(p => p.front);
  root.append(svg('path', {class: 'front', fill: 'none', stroke: '#1d2329', 'stroke-width': 1.2, 'stroke-dasharray': '4 3',
    d: front.map((p, i) => (i ? `H${x(p.usd).toFixed(1)}V${y(p.q).toFixed(1)}` : `M${x(p.usd).toFixed(1)} ${y(p.q).toFixed(1)}`)).join('')}));
  points.forEach(p => {
    const c = svg('g', {class: p.front ? 'point pareto' : 'point', 'data-kind': p.s.origin});
    c.append(svg('title', {}, `${nameOf(p.s)}: ${p.q.toFixed(2)} at ${p.s.usd_text} per query` +
                                (p.front ? ' (Pareto front)' : '')),
             svg('circle', {cx: x(p.usd).toFixed(1), cy: y(p.q).toFixed(1), r: p.front ? 6 : 4.5,
                            fill: data.kinds[p.s.origin].colour, stroke: p.front ? '#1d2329' : '#fff', 'stroke-width': 1.5}));
    if (p.front) c.append(svg('text', {x: (x(p.usd) + 8).toFixed(1), y: (y(p.q) - 6).toFixed(1), 'font-size': 10,
                                       fill: '#1d2329'}, shorten(nameOf(p.s), 28)));
    root.append(c);
  });
  root.append(svg('line', {x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: '#7a838c'}),
              svg('line', {x1: left, y1: top, x2: left, y2: height - bottom, stroke: '#7a838c'}),
              svg('text', {x: (left + width - right) / 2, y: height - 6, 'font-size': 10, 'text-anchor': 'middle',
                           fill: '#48525c'}, 'US$ per query (log scale)'),
              svg('text', {x: 12, y: (top + height - bottom) / 2, 'font-size': 10, 'text-anchor': 'middle',
                           fill: '#48525c', transform: `rotate(-90 12 ${(top + height - bottom) / 2})`},
                  g ? 'group average nDCG@10 ×100' : 'average nDCG@10 ×100'));
  figure.append(root);
  const drawn = points.map(p => p.s);
  legend($('cost-legend'), drawn);
  const li = document.createElement('li');
  li.textContent = '◯ Pareto front: no other system is both as cheap and better (dashed)';
  li.className = 'pareto-note';
  $('cost-legend').querySelector('.intervals')?.remove();
  $('cost-legend').append(li);
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function grid(head, rows) {
  const t = el('table'), h = t.createTHead().insertRow(), b = t.createTBody();
  const text = x => /^[+-]?[\d.e-]+%?$|^–$|^[\d.]+–[\d.]+$/.test(x) ? '' : 'text';
  head.forEach((x, i) => h.appendChild(el('th', x, i ? '' : 'text')));
  rows.forEach(r => { const tr = b.insertRow(); r.forEach(x => tr.appendChild(el('td', x, text(x)))); });
  const box = el('div', null, 'scroll'); box.appendChild(t); return box;
}
const byName = (a, b) => a.replace(/\d+$/, '').localeCompare(b.replace(/\d+$/, ''))
  || parseInt(a.match(/\d+$/) || 0) - parseInt(b.match(/\d+$/) || 0);
function detail(id) {
  const s = data.systems[id], d = $('detail'), body = $('detail-body');
  body.replaceChildren();
  d.dataset.id = id;
  $('detail-title').textContent = s.system;
  const avg = `average ${fmt(s.avg)}` + (s.avg_ci ? ` (95% interval ${interval(s.avg_ci)})` : '');
  body.appendChild(el('p', `${s.origin_label} · rank ${s.rank} · ${avg}` +
                      (s.published ? ` · published ${fmt(s.published.avg)} (${s.published.system})` : '')));
  const facts = el('dl');
  const fact = (name, text) => { facts.append(el('dt', name), el('dd', text)); };
  if (s.tied !== null) {
    const best = s.tie_best === s.system || s.tie_best === null;
    fact('Tie', s.tied ? (best && s.tie_p === null ? '≈ tied for first: the best of the rows it is compared with'
                          : `≈ tied for first: not separable from ${s.tie_best}`)
                       : `behind ${s.tie_best}: separable from it`);
    if (s.tie_p !== null) facts.lastChild.append(` (paired randomization test, Holm-adjusted p = ${s.tie_p.toFixed(4)})`);
  }
  fact('Intervals', s.has_ci ? '95% bootstrap over queries (10,000 resamples)' : s.no_ci);
  if (s.judged !== null) fact('Judged@10', `${(100 * s.judged).toFixed(1)}% of the top 10 documents carry a judgment`);
  if (s.usd !== null || s.sec !== null) fact('Cost per query', [s.usd_text, s.sec_text].filter(Boolean).join(', '));
  fact('Model', [s.model.size_text || 'size –', s.model.open === null ? 'open weights –' : s.model.open
                 ? 'open weights' : 'closed weights', `licence ${s.model.license || '–'}`].join(' · '));
  body.appendChild(facts);
  body.appendChild(el('h3', 'nDCG@10 ×100 per dataset'));
  const judged = Object.keys(s.judged_by).length > 0, condensed = Object.keys(s.condensed).length > 0;
  body.appendChild(grid(['Dataset', 'Group', 'nDCG@10', ...(s.has_ci ? ['95% interval'] : []),
                         ...(judged ? ['Judged@10'] : []), ...(condensed ? ['Condensed nDCG@10'] : []),
                         ...(s.published ? ['Published', 'Difference'] : [])],
    data.datasets.map(ds => [ds.name, ds.group_label, fmt(s.scores[ds.name]), ...(s.has_ci ? [interval(s.ci[ds.name])] : []),
      ...(judged ? [s.judged_by[ds.name] === undefined ? '–' : `${(100 * s.judged_by[ds.name]).toFixed(1)}%`] : []),
      ...(condensed ? [fmt(s.condensed[ds.name])] : []),
      ...(s.published ? [fmt(s.published.scores[ds.name]), s.diffs[ds.name] === undefined ? '–'
         : (s.diffs[ds.name] >= 0 ? '+' : '') + s.diffs[ds.name].toFixed(2)] : [])])));
  const names = Array.from(new Set(data.datasets.flatMap(ds => Object.keys(s.metrics[ds.name] || {})))).sort(byName);
  body.appendChild(el('h3', `Every score shipped (×100), ${names.length}`));
  body.appendChild(grid(['Metric', ...data.datasets.map(ds => ds.name)],
    names.map(m => [m, ...data.datasets.map(ds => fmt((s.metrics[ds.name] || {})[m]))])));
  const others = Array.from(new Set(data.datasets.flatMap(ds => Object.keys(s.stored[ds.name] || {})))).sort(byName);
  if (others.length) {
    body.appendChild(el('h3', `Other metrics, as stored (not scores: not ×100), ${others.length}`));
    body.appendChild(grid(['Metric', ...data.datasets.map(ds => ds.name)],
      others.map(m => [m, ...data.datasets.map(ds => { const v = (s.stored[ds.name] || {})[m];
                                                       return v === undefined ? '–' : String(v); })])));
  }
  body.appendChild(el('h3', 'Configuration'));
  body.appendChild(el('pre', JSON.stringify(s.config, null, 2)));
  body.appendChild(el('h3', 'Command'));
  body.appendChild(el('pre', s.command || 'none: not a run of r2med-run (see the source below)'));
  body.appendChild(el('h3', 'Source'));
  const list = el('ul');
  [s.source, ...s.provenance, ...s.notes].filter((x, i, a) => x && a.indexOf(x) === i)
    .forEach(x => list.appendChild(el('li', x)));
  body.appendChild(list);
  if (!d.open) d.showModal();
  save();
}
document.querySelectorAll('button.sys').forEach(b => b.addEventListener('click', () => detail(b.dataset.id)));
function closed() {  // (Close, or Escape) the address no longer names the row
  delete $('detail').dataset.id;
  save();
}
$('detail-close').addEventListener('click', () => { $('detail').close(); closed(); });
$('detail').addEventListener('close', closed);
window.addEventListener('resize', stick);
stick();
restore();
})();
"""


def render_html(rows, tasks: list[str], *, top: int = 5) -> str:
    """The page for ``rows`` (leaderboard rows in rank order) over the datasets ``tasks``; each
    dataset's chart shows its ``top`` systems by that dataset's score."""
    groups = [(g, [t for t in tasks if GROUP_OF[t] == g]) for g in GROUPS]
    groups = [(g, ts) for g, ts in groups if ts]
    with_group_average = [g for g, ts in groups if len(ts) == sum(GROUP_OF[t] == g for t in GROUP_OF) > 1]
    systems: dict[str, dict] = {}
    ids = _Ids()
    listed = []  # (row, its id, its joined runs' ids)
    for rank, row in enumerate(rows, 1):
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
        columns += [(SHORT[t], SHORT[t], g) for t in ts]
        if g in with_group_average:
            columns.append((f"g-{g}", "Group avg", g))
    trailing = [("model", "Model", None)]
    trailing += [(key, label, None) for key, label in (("usd", "$/query"), ("sec", "s/query"))
                 if any(s[key] is not None for s in systems.values())]
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
                                   "first" if g and g != previous else "", "text" if key == "model" else "") if c)
        previous = g
        group_attr = f' data-group="{g}"' if g else ""
        first = ' data-first="ascending"' if key in ("usd", "sec") else ""
        title = f' title="{escape(COLUMN_TITLES[key])}"' if key in COLUMN_TITLES else ""
        head.append(f'<th data-col="{escape(key)}"{group_attr}{first}{title} aria-sort="none" class="{cls}" scope="col">'
                    f'<button type="button">{escape(label)}<span class="ind" aria-hidden="true"></span></button></th>')

    bodies = []
    for row, sid, runs in listed:
        system = systems[sid]
        yours = system["origin"] in ("run", "local")
        origins = " ".join(dict.fromkeys([system["origin"], *(systems[r]["origin"] for r in runs)]))
        search = " ".join([row.system, row.rewriter, row.retriever, row.reranker, row.source,
                           *(systems[r]["source"] for r in runs)]).lower()
        attrs = (f' data-origin="{origins}" data-rewriter="{escape(row.rewriter)}"'
                 f' data-retriever="{escape(row.retriever)}" data-reranker="{escape(row.reranker)}"'
                 f' data-search="{escape(search)}"')
        trs = [_tr(system, columns, shade, sub=False)] + [_tr(systems[r], columns, shade, sub=True) for r in runs]
        bodies.append(f'<tbody{attrs}{YOURS_CLASS if yours else ""}>{"".join(trs)}</tbody>')

    def options(name: str, attr: str) -> str:
        values = sorted({getattr(r, attr) for r in rows} - {"-"}, key=str.lower)
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
    datasets = [{"name": SHORT[t], "group_label": GROUP_LABELS[GROUP_OF[t]]} for t in tasks]
    charts = "".join(f'<figure data-dataset="{escape(SHORT[t])}" data-group="{GROUP_OF[t]}"><figcaption>'
                     f'{escape(SHORT[t])}</figcaption></figure>' for t in tasks)  # drawn by the script
    payload = json.dumps(_plain({
        "systems": systems, "datasets": datasets, "top": top, "published": list(PUBLISHED_KINDS),
        "no_per_query": NO_PER_QUERY,
        "kinds": {o: {"label": ORIGIN_LABELS[o], "colour": KINDS[o][2]} for o in ORIGIN_LABELS}}),
        allow_nan=False, separators=(",", ":"))
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
        "(scores: highest first), filter, and open a system for its every metric, configuration and command. "
        "The address keeps the view (filters, sort, open system): share it; a row's rank links to that row.</p>"
        f"{controls}"
        f'<div class="scroll" id="table-box"><table id="leaderboard"><thead><tr class="groups">{"".join(head_groups)}'
        f'</tr><tr>{"".join(head)}</tr></thead>{"".join(bodies)}</table></div>'
        f'<section id="cost-section" class="hidden"><h2>Quality against cost</h2><p class="lede">Among the systems '
        'the filters show that have a cost per query (what the run paid its LLMs; the published rows have none).</p>'
        '<figure id="cost" class="wide"><figcaption>nDCG@10 against US$ per query</figcaption>'
        '<ul class="legend" id="cost-legend"></ul></figure></section>'
        f'<h2 id="charts-title">Top {top} systems per dataset</h2><p class="lede">Among the systems the filters show, coloured by '
        'source.</p><ul class="legend" id="chart-legend"></ul>'
        f'<div class="charts">{charts}</div>'
        '<dialog id="detail" aria-labelledby="detail-title"><button type="button" class="close" id="detail-close">'
        'Close</button><h2 id="detail-title"></h2><div id="detail-body"></div></dialog>'
        f'<script type="application/json" id="data">{payload}</script>'
        f"<script>{SCRIPT}</script></main></body></html>\n"
    )


COLUMN_TITLES = {
    "judged": "judged@10: the share of each query's top 10 documents that carry a judgment (any grade), "
              "averaged over queries and datasets",
    "model": "model size (parameters), open weights and licence, as the run's model_meta.json records them "
             "(mteb's ModelMeta); – where unknown",
    "usd": "US dollars per query paid to LLMs (where the model's price is known)",
    "sec": "wall seconds per query, every stage",
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
    scores = {SHORT[t]: row.scores[t] for t in tasks if t in row.scores}
    metrics = {t: sorted(row.metrics.get(t, {}).items()) for t in tasks}
    ci = {SHORT[t]: c for t in tasks if (c := _interval(_mapping(row, "ci").get(t)))}
    avg = row.average_over(tasks)
    usd, sec = _number(getattr(row, "usd_per_query", None)), _number(getattr(row, "seconds_per_query", None))
    judged = _number(row.judged_over(tasks) if hasattr(row, "judged_over") else getattr(row, "judged_at_10", None))
    tied, tie_p, tie_best = getattr(row, "tied", None), _number(getattr(row, "tie_p", None)), getattr(row, "tie_best", None)
    per_task = {"judged": {SHORT[t]: v for t in tasks if (v := _number(_mapping(row, "judged").get(t))) is not None},
                "condensed": {SHORT[t]: v for t in tasks if (v := _number(_mapping(row, "condensed").get(t))) is not None}}
    system = {
        "id": sid, "rank": rank, "system": row.system, "rewriter": row.rewriter, "retriever": row.retriever,
        "reranker": row.reranker, "origin": row.origin, "origin_label": ORIGIN_LABELS[row.origin],
        "source": row.source, "notes": row.notes, "provenance": row.provenance, "command": row.command,
        "avg": avg, "scores": scores,
        "groups": {g: _average([row.scores.get(t) for t in GROUP_OF if GROUP_OF[t] == g]) for g in group_averages},
        # scores (nDCG, MAP, recall, …: 0–1) as the board shows them, ×100; anything else (mteb's
        # nAUC, -1 to 1) is no score: shown as stored
        "metrics": {SHORT[t]: {k: round(100 * v, 2) for k, v in ms if SCORE_FAMILIES.match(k)} for t, ms in metrics.items()},
        "stored": {SHORT[t]: {k: v for k, v in ms if not SCORE_FAMILIES.match(k)} for t, ms in metrics.items()},
        "config": row.config if row.config is not None else
        {"rewriter": row.rewriter, "retriever": row.retriever, "reranker": row.reranker},
        "published": None, "diffs": {},
        "judged": judged if judged is not None and 0 <= judged <= 1 else None,
        "ci": ci, "has_ci": bool(ci),
        "avg_ci": _interval(getattr(row, "average_ci", None)),
        "judged_by": per_task["judged"], "condensed": per_task["condensed"],
        "no_ci": f"none: {NO_PER_QUERY}" if row.origin in PUBLISHED_KINDS else "none: no per-query scores",
        "tied": tied if isinstance(tied, bool) else None, "tie_p": tie_p,
        "tie_best": tie_best if isinstance(tie_best, str) else None,
        "usd": usd if usd is not None and usd >= 0 else None, "sec": sec if sec is not None and sec >= 0 else None,
        "model": model_facts(row),
    }
    system["usd_text"] = _money(system["usd"]) if system["usd"] is not None else ""
    system["sec_text"] = _seconds(system["sec"]) if system["sec"] is not None else ""
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
            from .layout import RunFolder

            meta = RunFolder(Path(row.provenance[0])).model_meta()
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
        if key in ("model", "usd", "sec"):
            continue
        values = [v for s in systems if (v := _value(s, key)) is not None]
        if values:
            out[key] = (min(values), max(values))
    return out


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
                 f'{escape(system["system"])}</button><span class="meta"{title}>{badge}{escape(parts)}</span></td>')
    cells = []
    previous = None
    for key, _, g in columns:
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
                extra = f'<span class="diff {"up" if d > 0 else "down" if d < 0 else ""}">{d:+.2f}</span>'
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
        return "–" if v is None else f"{100 * v:.0f}%"
    if key in ("usd", "sec"):
        return system[f"{key}_text"] or "–"
    return "" if v is None else f"{v:.2f}"
