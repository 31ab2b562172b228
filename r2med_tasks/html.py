"""The leaderboard as one self-contained HTML page: a sortable table and a per-dataset bar chart.

Everything in a results file is untrusted input, so every name and note is HTML-escaped; the page
loads nothing from the network.
"""

from __future__ import annotations

from html import escape

PALETTE = ("#1b6ca8", "#e07b39", "#3c9d5d", "#b8405e", "#7d5ba6")

STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;font-size:.85rem}
th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:right}
th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}
td.text,th.text{text-align:left}
tr.incomplete td{color:#888}
.charts{display:flex;flex-wrap:wrap;gap:1.5rem;margin:1.5rem 0}
.legend span{display:inline-block;margin-right:1rem}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem}
"""

SORT_SCRIPT = """
document.querySelectorAll('th').forEach((th, col) => th.addEventListener('click', () => {
  const body = th.closest('table').tBodies[0];
  const rows = Array.from(body.rows);
  const asc = th.dataset.order !== 'asc';
  th.dataset.order = asc ? 'asc' : 'desc';
  const key = r => { const t = r.cells[col].textContent.trim(); const n = parseFloat(t);
                     return t === '' ? (asc ? Infinity : -Infinity) : (isNaN(n) ? t.toLowerCase() : n); };
  rows.sort((a, b) => { const x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * (asc ? 1 : -1); });
  rows.forEach(r => body.appendChild(r));
}));
"""


def render_html(header: list[str], records: list[list], datasets: list[str], *, top: int = 5) -> str:
    """``records`` are table rows in rank order, matching ``header``; ``datasets`` name the score
    columns charted for the first ``top`` complete rows."""
    def cell(value, text: bool) -> str:
        shown = "" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)
        return f'<td class="text">{escape(shown)}</td>' if text else f"<td>{escape(shown)}</td>"

    text_columns = {"System", "Rewriter", "Retriever", "Reranker", "Source", "Command"}
    head = "".join(f'<th class="text">{escape(h)}</th>' if h in text_columns else f"<th>{escape(h)}</th>"
                   for h in header)
    body = []
    for record in records:
        incomplete = "(incomplete)" in str(record[-1])
        cells = "".join(cell(v, h in text_columns) for h, v in zip(header, record))
        body.append(f'<tr class="{"incomplete" if incomplete else ""}">{cells}</tr>')

    charted = [r for r in records if all(r[header.index(d)] is not None for d in datasets)][:top]
    names = [str(r[header.index("System")]) for r in charted]
    legend = "".join(f'<span><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{escape(n)}</span>'
                     for i, n in enumerate(names))
    charts = "".join(_bar_chart(d, [r[header.index(d)] for r in charted], names) for d in datasets)
    section = (f'<h2>Top systems per dataset</h2><div class="legend">{legend}</div><div class="charts">{charts}</div>'
               if datasets else "")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<title>R2MED leaderboard</title>"
        f"<style>{STYLE}</style></head><body>"
        "<h1>R2MED leaderboard</h1><p>nDCG@10 ×100; click a column to sort.</p>"
        f"{section}"
        f'<table id="leaderboard"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
        f"<script>{SORT_SCRIPT}</script></body></html>\n"
    )


def _bar_chart(dataset: str, values: list[float], names: list[str], width: int = 220, height: int = 150) -> str:
    """An inline SVG: one bar per system, scaled to 100."""
    if not values:
        return ""
    bar = (width - 20) / len(values)
    bars = []
    for i, (value, name) in enumerate(zip(values, names)):
        h = (height - 40) * max(value, 0.0) / 100.0
        x, y = 10 + i * bar, height - 20 - h
        bars.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar * 0.8:.1f}" height="{h:.1f}" '
                    f'fill="{PALETTE[i % len(PALETTE)]}"><title>{escape(name)}: {value:.2f}</title></rect>'
                    f'<text x="{x + bar * 0.4:.1f}" y="{y - 3:.1f}" font-size="9" text-anchor="middle">{value:.1f}</text>')
    return (f'<figure><svg width="{width}" height="{height}" role="img" aria-label="{escape(dataset)}">'
            f'{"".join(bars)}<line x1="5" y1="{height - 20}" x2="{width - 5}" y2="{height - 20}" stroke="#999"/>'
            f"</svg><figcaption>{escape(dataset)}</figcaption></figure>")
