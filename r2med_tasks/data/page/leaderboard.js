(() => {
const $ = id => document.getElementById(id);
const data = JSON.parse($('data').textContent);
const table = $('leaderboard'), box = table.closest('.scroll');
// Each system's rows are a tbody; the rows published elsewhere and the rows on local data (each set of
// datasets apart) are each a group of their own (data-ranked), after the board's under their head,
// ranked and sorted among themselves (never between the board's rows).
const bodies = Array.from(table.tBodies).filter(b => !b.classList.contains('section-head'));
const heads = Object.fromEntries(Array.from(table.querySelectorAll('tbody.section-head')).map(h => [h.dataset.ranked, h]));
const rankedOrder = [...new Set(Array.from(table.tBodies).map(b => b.dataset.ranked))];
const sectionOf = b => rankedOrder.indexOf(b.dataset.ranked);
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
  const keyed = bodies.map((b, i) => [value(b, col), i, b, sectionOf(b)]);
  keyed.sort((x, y) => {
    if (x[3] !== y[3]) return x[3] - y[3];
    if (x[0] === null || y[0] === null) return (x[0] === null) - (y[0] === null) || x[1] - y[1];
    return (x[0] > y[0] ? sign : x[0] < y[0] ? -sign : 0) || x[1] - y[1];
  });
  keyed.forEach((k, i) => {
    const head = heads[k[2].dataset.ranked];
    if (head && (!i || keyed[i - 1][3] !== k[3])) table.appendChild(head);
    table.appendChild(k[2]);
  });
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
  Object.entries(heads).forEach(([ranked, head]) => head.classList.toggle('hidden',
    !bodies.some(b => b.dataset.ranked === ranked && !b.classList.contains('hidden'))));
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
// horizontal bars coloured by source, with the 95% interval as a whisker where the row has one. The
// sections are ranked apart: the top systems published elsewhere, then those on local data, each
// below the ones before, past a dashed line.
function chart(figure, ds, systems) {
  const parts = data.sections.map(section => systems.filter(s => ds in s.scores && s.section === section)
    .sort((a, b) => b.scores[ds] - a.scores[ds]).slice(0, data.top)).filter(part => part.length);
  const ranked = parts.flat();
  figure.querySelector('svg')?.remove();
  if (!ranked.length) return [];
  const width = 440, bar = 22, left = 200, right = 44, pad = 6, plot = width - left - right;
  const gap = bar;  // the room for the line above each section but the first shown
  const lines = [];  // [the line's y, the section below it]
  const ys = [];
  let at = pad;
  parts.forEach((part, i) => {
    if (i) { lines.push([at + gap / 2, part[0].section]); at += gap; }
    part.forEach(() => { ys.push(at); at += bar; });
  });
  const high = Math.max(...ranked.map(s => s.ci[ds] ? Math.max(s.ci[ds][1], s.scores[ds]) : s.scores[ds]));
  const axisMax = Math.max(10, Math.ceil(high / 10) * 10), step = axisMax <= 50 ? 10 : 20;
  const bottom = at, height = bottom + 34, mid = y => (y + bar * 0.65).toFixed(1);
  const x = v => left + plot * v / axisMax;
  const root = svg('svg', {viewBox: `0 0 ${width} ${height}`, role: 'img',
                           'aria-label': `${ds}: top ${ranked.length} systems by nDCG@10`});
  for (let tick = 0; tick <= axisMax; tick += step) {
    const at = x(tick).toFixed(1);
    root.append(svg('line', {x1: at, y1: pad, x2: at, y2: bottom, stroke: '#e1e6ea'}),
                svg('text', {x: at, y: bottom + 13, 'font-size': 10, 'text-anchor': 'middle', fill: '#48525c'}, `${tick}`));
  }
  lines.forEach(([y, section]) => {
    root.append(svg('line', {class: 'section', x1: 0, y1: y, x2: width, y2: y, stroke: '#8a8f96', 'stroke-dasharray': '4 3'}),
                svg('text', {x: 4, y: y - 3, 'font-size': 9, fill: '#48525c'}, `${data.section_labels[section]}, ranked apart`));
  });
  ranked.forEach((s, i) => {
    const v = s.scores[ds], y = ys[i], ci = s.ci[ds], name = nameOf(s);
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
  // the front among the systems on R2MED's data (runs on local data are not comparable with them), else the local ones
  const board = points.filter(p => p.s.section !== 'local');
  const byCost = (board.length ? board : points).slice().sort((a, b) => a.usd - b.usd || b.q - a.q);
  let best = -Infinity;
  points.forEach(p => { p.front = false; });
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
  const rank = s.section in data.section_rows
    ? `rank ${s.rank} among ${data.section_rows[s.section]} (ranked apart from the board)` : `rank ${s.rank}`;
  body.appendChild(el('p', `${s.origin_label} · ${rank} · ${avg}` +
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
  if (s.judged !== null) {
    const pct = `${(100 * s.judged).toFixed(1)}%`;
    fact('Judged@10', s.judged_means === 'P@10'
      ? `${pct} ${data.p_at_10}: only relevant documents are judged (no grade 0), so this is the share of the ` +
        'top 10 that is relevant, not a measure of holes'
      : `${pct} of the top 10 documents carry a judgment` +
        (s.judged_means === 'mixed' ? ` (${data.p_at_10} on the datasets whose judgments hold only relevant documents)` : ''));
  }
  if (s.usd !== null || s.sec !== null || s.reasoning !== null) {
    fact('Cost per query', [s.usd_text, s.sec_text, s.reasoning_text && `${s.reasoning_text} reasoning tokens`]
      .filter(Boolean).join(', '));
  }
  fact('Model', [s.model.size_text || 'size –', s.model.open === null ? 'open weights –' : s.model.open
                 ? 'open weights' : 'closed weights', `licence ${s.model.license || '–'}`].join(' · '));
  body.appendChild(facts);
  body.appendChild(el('h3', 'nDCG@10 ×100 per dataset'));
  const judged = Object.keys(s.judged_by).length > 0, condensed = Object.keys(s.condensed).length > 0;
  body.appendChild(grid(['Dataset', 'Group', 'nDCG@10', ...(s.has_ci ? ['95% interval'] : []),
                         ...(judged ? ['Judged@10'] : []), ...(condensed ? ['Condensed nDCG@10'] : []),
                         ...(s.published ? ['Published', 'Difference'] : [])],
    data.datasets.map(ds => [ds.name, ds.group_label, fmt(s.scores[ds.name]), ...(s.has_ci ? [interval(s.ci[ds.name])] : []),
      ...(judged ? [s.judged_by[ds.name] === undefined ? '–' : `${(100 * s.judged_by[ds.name]).toFixed(1)}%` +
                    (s.relevant_only[ds.name] ? ` ${data.p_at_10}` : '')] : []),
      ...(condensed ? [fmt(s.condensed[ds.name]) + (s.relevant_only[ds.name] && ds.name in s.condensed
                                                    ? ` (${data.not_holes})` : '')] : []),
      ...(s.published ? [fmt(s.published.scores[ds.name]), s.diffs[ds.name] === undefined ? '–'
         : (s.diffs[ds.name] >= 0 ? '+' : '') + s.diffs[ds.name].toFixed(2)] : [])])));
  if ((judged || condensed) && data.datasets.some(ds => s.relevant_only[ds.name])) {
    body.appendChild(el('p', `${data.p_at_10}, ${data.not_holes}: where a dataset's judgments hold only relevant ` +
      'documents (every grade above 0, as R2MED\'s), every judged document is relevant: judged@10 is the precision ' +
      'at 10, and the condensed list is the run\'s relevant documents alone, so its nDCG@10 says how many of the ' +
      'relevant documents the run found anywhere in its list (and how high), not what holes cost.', 'note'));
  }
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
  perQuery(id, body);
  body.appendChild(el('h3', 'Configuration'));
  body.appendChild(el('pre', JSON.stringify(s.config, null, 2)));
  body.appendChild(el('h3', 'Command'));
  body.appendChild(el('pre', s.command || 'none: not a run of r2med-run (see the source below)'));
  Object.entries(s.placeholders || {}).forEach(([word, what]) => body.appendChild(el('p', `${word}: ${what}`, 'note')));
  if ((s.overlap || []).length) {
    body.appendChild(el('h3', 'Training data overlap'));
    const said = el('ul');
    s.overlap.forEach(x => said.appendChild(el('li', x)));
    body.appendChild(said);
  }
  body.appendChild(el('h3', 'Source'));
  const list = el('ul');
  [s.source, ...s.provenance, ...s.notes].filter((x, i, a) => x && a.indexOf(x) === i)
    .forEach(x => list.appendChild(el('li', x)));
  body.appendChild(list);
  if (!d.open) d.showModal();
  save();
}
// Your runs' per-query view (data.queries[id], per dataset: query ids q, nDCG@10 n, top 10 ids d,
// their grades g and relevant counts r when the judgments were found, else no_grades; the first
// characters of what the LLM generated, a): each query folds open to its top 10; lowest nDCG@10 first.
function perQuery(id, body) {
  const s = data.systems[id], view = (data.queries || {})[id];
  if (s.origin !== 'run' && s.origin !== 'local') return;
  const section = el('section'); section.id = 'per-query';
  section.appendChild(el('h3', 'Per query'));
  body.appendChild(section);
  if (!view) {
    section.appendChild(el('p', `Not embedded: the page carries the per-query view of the first ${data.query_runs} of ` +
      'your runs (in rank order) whose folders hold per-query files. r2med show RUN --task TASK --query ID ' +
      'opens any query of any run.'));
    return;
  }
  const names = data.datasets.map(ds => ds.name).filter(n => view[n]);
  const folder = s.provenance[0] || 'RUN';
  const quoted = w => /^[\w@%+=:,.\/-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`;
  const pick = el('select'); pick.id = 'pq-dataset';
  names.forEach(n => { const o = el('option', n); o.value = n; pick.appendChild(o); });
  const label = el('label', 'Dataset ', 'pq-pick'); label.appendChild(pick);
  const note = el('p', null, 'pq-note'), list = el('div', null, 'pq-list');
  section.append(label, note, list);
  const draw = () => {
    const v = view[pick.value];
    list.replaceChildren();
    note.textContent = `${v.q.length} queries, lowest nDCG@10 first; open one for the run's top 10 ` +
      (v.g ? 'with their grades (0: judged not relevant; unjudged: no judgment)' : `(grades unknown: ${v.no_grades})`) +
      (v.a ? ' and the beginning of what its LLM generated' : '') +
      '; the command under each opens the whole view (texts, snippets, the relevant documents missed).';
    const order = v.q.map((_, i) => i).sort((a, b) => v.n[a] - v.n[b] || (v.q[a] < v.q[b] ? -1 : 1));
    order.forEach(i => {
      const item = el('details', null, 'pq'); item.dataset.query = v.q[i];
      const found = v.g ? v.g[i].filter(g => g !== null && g > 0).length : null;
      item.appendChild(el('summary', `${v.q[i]} · nDCG@10 ${fmt(100 * v.n[i])}` +
                                     (v.g ? ` · ${found} of ${v.r[i]} relevant in the top 10` : '')));
      const ol = el('ol');
      v.d[i].forEach((doc, j) => {
        const li = el('li'); li.appendChild(el('span', doc, 'doc'));
        if (v.g) {
          const g = v.g[i][j];
          li.appendChild(el('span', g === null ? 'unjudged' : `grade ${g}`, g !== null && g > 0 ? 'grade rel' : 'grade'));
        }
        ol.appendChild(li);
      });
      item.appendChild(ol);
      if (v.a && v.a[i] !== null) {
        item.appendChild(el('p', 'Generated', 'pq-label'));
        item.appendChild(el('blockquote', v.a[i]));
      }
      item.appendChild(el('code', 'r2med show ' + [folder, '--task', pick.value, '--query', v.q[i]].map(quoted).join(' ') +
                                  (s.origin === 'local' ? ' --data-dir DIR' : ''), 'pq-command'));
      list.appendChild(item);
    });
  };
  pick.addEventListener('change', draw);
  draw();
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
