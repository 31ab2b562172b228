"""The HTML leaderboard driven in headless Chromium (Debian's /usr/bin/chromium, as CI installs it):
filters, search, sorting by click and keyboard, the detail view, charts, hostile names shown as
text, no page-level horizontal overflow at 400 px and 1500 px; and what makes it worth sharing: the
header in view over the rows, the view in the address (and a permalink per row), each row's scores
readable at 400 px, names on two lines at most, one badge per kind of source, chart legends, local
runs charted only when shown, nAUC as stored, model size and licence, and the statistics (judged@10,
intervals, ties, cost and time per query, quality against cost). One browser for the module.

Expected values are computed here from the shipped CSV and the demonstration runs' own numbers.
"""

import csv
import importlib.util
import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from r2med_tasks.scoring.evaluation import leaderboard_average
from r2med_tasks.board.published import PUBLISHED_CSV, paper_runs
from r2med_tasks.tasks.specs import R2MED_TASKS

ROOT = Path(__file__).parent.parent
spec = importlib.util.spec_from_file_location("screenshots", ROOT / "docs" / "screenshots.py")
screenshots = importlib.util.module_from_spec(spec)
spec.loader.exec_module(screenshots)

HOSTILE = ["<script>alert(1)</script>", "</table><img src=x onerror=alert(2)>"]
SHORTS = [t.short_name for t in R2MED_TASKS]
LOCAL = "toy/local-retriever"  # a run on local data, scoring above every published system
MTEB = "intfloat/e5-base-v2"  # an MTEB result: published elsewhere, ranked in a section of its own


def published():
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def ours() -> dict[str, dict[str, float]]:
    """The demonstration runs' values (×100), as docs/screenshots.py writes them, by system."""
    return {"acme/med-embed": {s: round(100 * (0.30 + 0.03 * i), 2) for i, s in enumerate(SHORTS)},
            "intfloat/e5-base-v2": {s: round(100 * (0.12 + 0.02 * i), 2) for i, s in enumerate(SHORTS)},
            **{name: {s: 1.0 + i for i, s in enumerate(SHORTS)} for name in HOSTILE},
            LOCAL: {s: round(100 * (0.80 + 0.01 * i), 2) for i, s in enumerate(SHORTS)}}


def every_row() -> dict[str, dict[str, float]]:
    rows = {r["name"]: {s: float(r[s]) for s in SHORTS if r[s]} for r in published()}
    return {**rows, **ours()}


def board_rows() -> dict[str, dict[str, float]]:
    """Every row but the MTEB result and the run on local data, which the page ranks and sorts
    apart, each in a section of its own below these."""
    return {n: s for n, s in every_row().items() if n not in (MTEB, LOCAL)}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if shutil.which("chromium") is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium for this test")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from r2med_tasks.running import discovery as plugins_module
    from r2med_tasks.cli import cli

    tmp = tmp_path_factory.mktemp("page")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("R2MED_LOAD_PLUGINS", "")
        mp.delenv("R2MED_PLUGINS", raising=False)
        mp.setattr(plugins_module, "_plugins", None)
        results, mteb = screenshots.demo_results(tmp)
        for i, name in enumerate(HOSTILE):
            for j, task in enumerate(R2MED_TASKS):
                screenshots.write_result(results / f"evil__{i}" / "v1", task.name, (1.0 + j) / 100, name)
        local = results / "local-data" / "toy__local-retriever" / "v1"
        for i, task in enumerate(R2MED_TASKS):
            screenshots.write_result(local, task.name, 0.80 + 0.01 * i, LOCAL)
            (local / "r2med").mkdir(exist_ok=True)
            (local / "r2med" / f"{task.name}.identity.json").write_text(json.dumps({"data": {"official": False}}))
        page = tmp / "board.html"
        result = CliRunner().invoke(cli, ["leaderboard", str(results), "--mteb-results", str(mteb), "--format", "html",
                                          "--include-local", "--output", str(page)], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        (tmp / "stats.html").write_text(statistics_page())
    chromium = screenshots.Chromium()
    chromium.send("Page.addScriptToEvaluateOnNewDocument",
                  {"source": "window.__alerts = 0; window.alert = () => { window.__alerts += 1; };"}, session=True)
    chromium.url = page.as_uri()
    chromium.results = str(results)
    chromium.stats_url = (tmp / "stats.html").as_uri()
    chromium.open(chromium.url, 1500)
    yield chromium
    chromium.close()


def visible(browser) -> list[str]:
    """System names of the shown rows, top to bottom."""
    return browser.js("Array.from(document.querySelectorAll('#leaderboard tbody:not(.hidden) tr:first-child "
                      "button.sys')).map(b => b.textContent)")


def reset(browser, width: int = 1500) -> None:
    browser.open(browser.url, width)


def select_value(browser, select: str, value: str, event: str = "input") -> None:
    browser.js(f"{{ const s = document.getElementById({json.dumps(select)}); s.value = {json.dumps(value)}; "
               f"s.dispatchEvent(new Event('{event}')); }}")


def open_afresh(browser, address: str) -> None:
    """``address`` loaded in a page of its own, as a shared address opens in a new tab: never the
    page open now, whose last tasks (a dialog's close event, which writes the address) may still be
    queued when the next address is set in it."""
    browser.open("about:blank", 1500)
    browser.open(address, 1500)


def eventually(browser, expression: str, until: str = "Boolean", seconds: float = 10):
    """The value of ``expression`` once the JavaScript function ``until`` holds of it, polled every
    few milliseconds (after its load event a page may still lay out and scroll: a reload restores
    the scroll position late), or its last value after ``seconds``. No test waits a fixed time and
    then looks."""
    return browser.js(f"""new Promise(resolve => {{
        const end = performance.now() + {seconds * 1000};
        const poll = () => {{
            const value = ({expression});
            if (({until})(value) || performance.now() > end) resolve(value); else setTimeout(poll, 10);
        }};
        poll();
    }})""")


def row_id(name: str) -> str:
    """A row's permalink id: its system's name as a slug."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def test_hostile_names_are_text_and_every_row_is_shown(browser):
    reset(browser)
    assert browser.js("document.querySelectorAll('script').length") == 2  # the data and the page's script
    assert browser.js("document.querySelectorAll('img').length") == 0
    assert browser.js("window.__alerts") == 0
    names = visible(browser)
    assert sorted(names) == sorted(every_row())  # BM25's reproduction sits in BM25's row, not a row of its own
    assert all(name in names for name in HOSTILE)
    count = len(every_row())
    assert browser.js("document.getElementById('count').textContent") == f"{count} of {count} systems"


def test_filters_and_search(browser):
    reset(browser)
    select_value(browser, "f-retriever", "BM25")
    assert visible(browser) == [r["name"] for r in published() if r["retriever"] == "BM25"]
    reset(browser)
    browser.js("document.getElementById('q').focus()")
    browser.send("Input.insertText", {"text": "QwQ"}, session=True)  # typed, as a user would
    assert visible(browser) == [r["name"] for r in published() if "qwq" in " ".join(r.values()).lower()]
    reset(browser)
    browser.click("#origins input[value=leaderboard]")
    assert sorted(visible(browser)) == sorted(["BM25", *ours()])  # BM25: holds your run
    browser.click("#origins input[value=run]")
    assert visible(browser) == [MTEB, LOCAL]  # the run on local data in its own section, last


def test_group_view_ranks_by_the_groups_average(browser):
    reset(browser)
    select_value(browser, "group", "clinical-case", "change")
    shown = browser.js("Array.from(document.querySelectorAll('#leaderboard thead tr:last-child th'))"
                       ".filter(th => !th.classList.contains('hidden')).map(th => th.textContent)")
    assert shown == ["#", "System", "Avg", "PMC-Clinical", "IIYi-Clinical", "Group avg▼", "Model", "Source"]
    averages = {n: leaderboard_average([s["PMC-Clinical"], s["IIYi-Clinical"]]) for n, s in board_rows().items()
                if "PMC-Clinical" in s}
    best = sorted(averages, key=lambda n: -averages[n])[:3]
    assert visible(browser)[:3] == best and visible(browser)[-1] == LOCAL  # the best local run: in its own section


def test_sorting_by_click_and_keyboard(browser):
    reset(browser)
    biology = {n: s["Biology"] for n, s in board_rows().items() if "Biology" in s}
    browser.click("th[data-col=Biology] button")
    assert browser.js("document.querySelector('th[data-col=Biology]').getAttribute('aria-sort')") == "descending"
    assert browser.js("document.querySelector('th[data-col=Biology] .ind').textContent") == "▼"
    # the local run has the highest Biology of all, yet sorts within its own section, after the board's
    # rows and the MTEB result's section
    names = visible(browser)
    assert names[0] == max(biology, key=biology.get) and names[-2:] == [MTEB, LOCAL]
    browser.click("th[data-col=Biology] button")
    names = visible(browser)
    assert names[0] == min(biology, key=biology.get) and names[-2:] == [MTEB, LOCAL]
    assert set(names[len(biology):-2]) == set(board_rows()) - set(biology)  # no value: last of the board

    browser.js("document.querySelector('th[data-col=system] button').focus()")
    browser.press("Enter", 13, "\r")
    assert browser.js("document.querySelector('th[data-col=system]').getAttribute('aria-sort')") == "ascending"
    assert visible(browser) == [*sorted(board_rows(), key=str.lower), MTEB, LOCAL]
    for section, first in (("elsewhere", MTEB), ("local", LOCAL)):  # each head above its section's rows
        head = f"document.querySelector('#leaderboard tbody.section-head[data-section={section}]')"
        assert browser.js(f"{head}.nextElementSibling.querySelector('button.sys').textContent") == first
    browser.js("document.querySelector('th[data-col=avg] button').focus()")
    browser.press(" ", 32, " ")
    averages = {r["name"]: float(r["avg"]) for r in published()}
    averages |= {n: leaderboard_average(list(s.values())) for n, s in ours().items() if n not in (MTEB, LOCAL)}
    assert visible(browser)[:5] == sorted(averages, key=lambda n: -averages[n])[:5]

    # by source, A to Z as shown (without "published"), ties in rank order: your runs' folders (acme__…,
    # evil__0, evil__1), the leaderboard's page (R2MED/r2med.github.io), then the ReasonEmbed paper's row (rank 1)
    browser.click("th[data-col=source] button")
    assert browser.js("document.querySelector('th[data-col=source]').getAttribute('aria-sort')") == "ascending"
    folder = f"{browser.results}/acme__med-embed/v2"  # a long source: cut in the middle, whole in the title
    text, title = browser.js(f"(td => [td.textContent, td.title])(document.querySelector("
                             f"'tr[data-id=\"{row_id('acme/med-embed')}\"] td[data-col=source]'))")
    head, tail = text.split("…")
    assert title == folder and len(text) <= 44 and folder.startswith(head) and folder.endswith(tail) and tail
    page = [r["name"] for r in published() if r["source"].startswith("R2MED/r2med.github.io ")]
    paper = [r["name"] for r in published() if r["name"] not in page]
    assert len(paper) == 1
    expected = ["acme/med-embed", *HOSTILE, *page, *paper]
    assert visible(browser) == [*expected, MTEB, LOCAL]
    browser.click("th[data-col=source] button")
    assert visible(browser) == [*paper, *page, *HOSTILE[::-1], "acme/med-embed", MTEB, LOCAL]


def tables(browser) -> list[list[list[str]]]:
    return browser.js("Array.from(document.querySelectorAll('#detail-body table')).map(t => "
                      "Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.textContent)))")


def facts(browser) -> dict[str, str]:
    return browser.js("Object.fromEntries(Array.from(document.querySelectorAll('#detail-body dt'))"
                      ".map(dt => [dt.textContent, dt.nextElementSibling.textContent]))")


def test_detail_view(browser):
    reset(browser)
    browser.click(f"button.sys[data-id={row_id('acme/med-embed')}]")
    assert browser.js("document.getElementById('detail').open") is True
    assert browser.js("document.getElementById('detail-title').textContent") == "acme/med-embed"
    per_dataset, scores, _ = tables(browser)
    assert per_dataset[1:] == [[s, g, f"{ours()['acme/med-embed'][s]:.2f}"] for s, g in zip(SHORTS, [
        "Q&A reference"] * 3 + ["Clinical evidence"] * 3 + ["Clinical case"] * 2)]
    recall = next(r for r in scores if r[0] == "recall_at_100")
    assert recall[1:] == [f"{100 * (0.6 + 0.02 * i):.2f}" for i in range(8)]
    assert facts(browser)["Intervals"] == "none: no per-query scores"  # a result without per-query files
    browser.click("#detail-close")
    assert browser.js("document.getElementById('detail').open") is False

    # your BM25 run, under the published row: its differences to it, its configuration and command
    bm25 = next(r for r in published() if r["name"] == "BM25")
    browser.click("tr.sub button.sys")
    rows = browser.js("Array.from(document.querySelector('#detail-body table').rows).slice(1)"
                      ".map(r => Array.from(r.cells).map(c => c.textContent))")
    for i, (row, short) in enumerate(zip(rows, SHORTS)):
        run = round(100 * round(float(bm25[short]) / 100 + (0.0012 if i % 2 else -0.0007), 5), 2)
        assert row[2:] == [f"{run:.2f}", bm25[short], f"{run - float(bm25[short]):+.2f}"]
    pre = browser.js("Array.from(document.querySelectorAll('#detail-body pre')).map(p => p.textContent)")
    # the results folder the page was made from is not the default ./results: the command names it
    assert json.loads(pre[0])["retriever"]["component"] == "bm25" and pre[1].startswith("r2med-run --plugin bm25 ")
    assert shlex.split(pre[1])[3:5] == ["--output", browser.results] and len(shlex.split(pre[1])) == 5
    browser.click("#detail-close")
    browser.click(f"button.sys[data-id={row_id('BM25')}]")
    assert facts(browser)["Intervals"] == "none: published rows have no per-query scores"


def test_nauc_is_shown_as_stored(browser):
    """mteb's nAUCs are no scores (they run from -1 to 1): shown as the TaskResult stores them, apart
    from the scores shown ×100."""
    reset(browser)
    browser.click(f"button.sys[data-id={row_id('acme/med-embed')}]")
    _, scores, stored = tables(browser)
    assert not any(r[0].startswith("nauc") for r in scores)
    assert stored[1:] == [["nauc_ndcg_at_10_max", *(repr(round(0.1234 + 0.01 * i, 4)) for i in range(8))]]


def test_model_size_open_weights_and_licence(browser):
    """From the MTEB result's model_meta.json (mteb's ModelMeta of intfloat/e5-base-v2); – where
    unknown: published rows, a run whose model_meta.json says nothing of it."""
    reset(browser)
    cells = browser.js("Object.fromEntries(Array.from(document.querySelectorAll('#leaderboard td[data-col=model]'))"
                       ".map(td => [td.closest('tr').dataset.id, td.innerText]))")
    assert cells[row_id(MTEB)] == "109M\nopen · mit"
    assert cells[row_id("BM25")] == cells[row_id("acme/med-embed")] == "–"
    assert {v for k, v in cells.items() if k != row_id(MTEB)} == {"–"}
    before = visible(browser)
    browser.click("th[data-col=model] button")  # largest first: none known on the board, which keeps its order
    assert visible(browser) == before and before[-2:] == [MTEB, LOCAL]
    browser.click(f"button.sys[data-id={row_id(MTEB)}]")
    assert facts(browser)["Model"] == "109M · open weights · licence mit"


def test_charts_show_each_datasets_own_top_systems(browser):
    reset(browser)
    for short, scores in [(s, {n: v[s] for n, v in every_row().items() if s in v}) for s in SHORTS]:
        # the board's top 5, then, apart, the MTEB result, and the run on local data (above them all, but
        # not comparable)
        top = [*sorted((n for n in scores if n in board_rows()), key=lambda n: -scores[n])[:5], MTEB, LOCAL]
        labels = browser.js(f"Array.from(document.querySelectorAll('figure[data-dataset=\"{short}\"] g title'))"
                            ".map(t => t.textContent)")
        assert [label.rsplit(": ", 1)[0] for label in labels] == top, short
        assert [float(label.rsplit(": ", 1)[1]) for label in labels] == [scores[n] for n in top]
        bars = browser.js(f"Array.from(document.querySelectorAll('figure[data-dataset=\"{short}\"] g rect'))"
                          ".map(r => parseFloat(r.getAttribute('y')))")
        lines = browser.js(f"Array.from(document.querySelectorAll('figure[data-dataset=\"{short}\"] line.section'))"
                           ".map(l => parseFloat(l.getAttribute('y1')))")
        assert len(lines) == 2 and max(bars[:5]) < lines[0] < bars[5] < lines[1] < bars[6]  # each below a line
        ticks = browser.js(f"Array.from(document.querySelectorAll('figure[data-dataset=\"{short}\"] svg > text'))"
                           ".map(t => t.textContent)")
        assert ticks[0] == "0" and ticks[-1] == "nDCG@10 ×100"


def chart_labels(browser, short: str) -> list[str]:
    return browser.js(f"Array.from(document.querySelectorAll('figure[data-dataset=\"{short}\"]:not(.hidden) g title'))"
                      ".map(t => t.textContent)")


def test_charts_follow_the_filters_and_the_task_group(browser):
    """Filtered, each chart ranks only the rows shown; a task group shows only its datasets' charts;
    with no row shown, no chart."""
    reset(browser)
    browser.js("document.getElementById('q').focus()")
    browser.send("Input.insertText", {"text": "QwQ"}, session=True)
    rows = {r["name"]: r for r in published() if "qwq" in " ".join(r.values()).lower()}
    for short in SHORTS:
        scores = {name: float(r[short]) for name, r in rows.items() if r[short]}
        top = sorted(scores, key=lambda n: -scores[n])[:5]
        assert chart_labels(browser, short) == [f"{n}: {scores[n]:.2f}" for n in top], short
    select_value(browser, "group", "clinical-case", "change")
    shown = browser.js("Array.from(document.querySelectorAll('.charts figure:not(.hidden)')).map(f => f.dataset.dataset)")
    assert shown == ["PMC-Clinical", "IIYi-Clinical"]
    browser.send("Input.insertText", {"text": " no such system"}, session=True)
    assert browser.js("document.querySelectorAll('.charts figure:not(.hidden)').length") == 0


def test_chart_legend_and_local_runs_only_when_shown(browser):
    """Bars are coloured by source, explained in a legend of the sources drawn; a run on local data
    (here above every published system) is charted only while the source filter shows local data."""
    reset(browser)
    drawn = "Array.from(new Set(Array.from(document.querySelectorAll('.charts figure:not(.hidden) g[data-kind]'))" \
            ".map(g => g.dataset.kind)))"
    legend = "Array.from(document.querySelectorAll('#chart-legend li[data-kind]')).map(li => li.dataset.kind)"
    assert sorted(browser.js(legend)) == sorted(browser.js(drawn)) == ["leaderboard", "local", "mteb", "run"]
    assert chart_labels(browser, "Biology")[-1] == f"{LOCAL}: {ours()[LOCAL]['Biology']:.2f}"  # ranked apart
    colours = browser.js("Object.fromEntries(Array.from(document.querySelectorAll('#chart-legend li[data-kind]'))"
                         ".map(li => [li.dataset.kind, li.querySelector('.swatch').style.background]))")
    fill = browser.js("document.querySelector('figure[data-dataset=Biology] g[data-kind=local] rect')"
                      ".getAttribute('fill')")
    assert len(set(colours.values())) == 4 and colours["local"] == browser.js(
        f"(() => {{ const e = document.createElement('i'); e.style.background = '{fill}'; return e.style.background; }})()")
    assert "published rows have no per-query scores" in browser.js(
        "document.querySelector('#chart-legend .intervals').textContent")

    browser.click("#origins input[value=local]")
    for short in SHORTS:
        assert not any(label.startswith(LOCAL) for label in chart_labels(browser, short)), short
    assert "local" not in browser.js(legend) and LOCAL not in visible(browser)
    biology = {n: s["Biology"] for n, s in every_row().items() if n != LOCAL}
    assert chart_labels(browser, "Biology")[0].startswith(max(biology, key=biology.get))


@pytest.mark.parametrize("width", [400, 1500])
def test_no_page_level_horizontal_overflow(browser, width):
    reset(browser, width)
    assert browser.js("document.documentElement.scrollWidth") <= width
    table_box = browser.js("(() => { const b = document.querySelector('.scroll'); "
                           "return [b.scrollWidth, b.clientWidth]; })()")
    if width == 400:
        assert table_box[0] > table_box[1]  # the table scrolls within its own box
    browser.click("#leaderboard tbody:nth-of-type(2) button.sys")
    assert browser.js("document.documentElement.scrollWidth") <= width  # nor with the detail view open


# ------------------------------------------------------------------------------------ worth sharing


def test_the_header_stays_in_view_over_the_rows(browser):
    """Scrolled 2000 px down the table (past row 40), its header row is where it was, on top of the rows."""
    reset(browser)
    where = browser.js("""(() => {
        const box = document.getElementById('table-box'), head = document.querySelector('#leaderboard thead');
        box.scrollIntoView();
        const before = head.getBoundingClientRect().top;
        box.scrollTop = 2000;
        const avg = document.querySelector('#leaderboard thead th[data-col=avg]').getBoundingClientRect();
        const below = document.elementFromPoint(avg.left + 5, head.getBoundingClientRect().bottom + 8);
        return {before, after: head.getBoundingClientRect().top, box: box.getBoundingClientRect().top + box.clientTop,
                onTop: head.contains(document.elementFromPoint(avg.left + avg.width / 2, avg.top + avg.height / 2)),
                scrolled: box.scrollTop, rank: parseInt(below.closest('tr').querySelector('.c-rank').textContent)};
    })()""")
    assert where["scrolled"] == 2000 and where["rank"] > 40
    assert where["after"] == where["before"] == where["box"]
    assert where["onTop"]


def controls_state(browser) -> dict:
    return browser.js("""(() => ({
        q: document.getElementById('q').value, group: document.getElementById('group').value,
        retriever: document.getElementById('f-retriever').value,
        origins: Array.from(document.querySelectorAll('#origins input')).filter(i => i.checked).map(i => i.value),
        sort: Array.from(document.querySelectorAll('#leaderboard th[aria-sort]'))
          .filter(th => th.getAttribute('aria-sort') !== 'none').map(th => [th.dataset.col, th.getAttribute('aria-sort')]),
        shown: Array.from(document.querySelectorAll('#leaderboard tbody:not(.hidden) tr:first-child button.sys'))
          .map(b => b.textContent),
        count: document.getElementById('count').textContent}))()""")


def test_the_address_keeps_the_view(browser):
    """Search, task group, a component filter, a source left out and a sort set by hand are in the
    address; opening that address afresh shows the same view."""
    reset(browser)
    browser.js("document.getElementById('q').focus()")
    browser.send("Input.insertText", {"text": "BM25"}, session=True)
    select_value(browser, "group", "clinical-case", "change")
    select_value(browser, "f-retriever", "BM25")
    browser.click("#origins input[value=run]")
    browser.click("th[data-col=PMC-Clinical] button")
    browser.click("th[data-col=PMC-Clinical] button")  # lowest first
    before = controls_state(browser)
    address = browser.js("location.href")
    assert address == (f"{browser.url}#q=BM25&group=clinical-case&retriever=BM25&hide=run&sort=PMC-Clinical:asc")
    assert before["sort"] == [["PMC-Clinical", "ascending"]] and before["origins"] == ["leaderboard", "mteb", "local"]
    expected = sorted((r for r in published() if r["retriever"] == "BM25" and r["PMC-Clinical"]),
                      key=lambda r: float(r["PMC-Clinical"]))
    assert before["shown"] == [r["name"] for r in expected]
    reset(browser)
    assert controls_state(browser) != before
    open_afresh(browser, address)  # the shared address
    assert controls_state(browser) == before
    assert browser.js("location.href") == address


def test_a_rows_permalink_opens_it_and_highlights_it(browser):
    reset(browser)
    rid = row_id("acme/med-embed")
    link = f'tr[data-id="{rid}"] a.permalink'
    assert browser.js(f"document.querySelector('{link}').getAttribute('href')") == f"#row={rid}"
    browser.click(link)
    assert browser.js("document.getElementById('detail-title').textContent") == "acme/med-embed"
    assert browser.js("location.hash") == f"#row={rid}"
    browser.click("#detail-close")
    assert browser.js("location.hash") == ""

    open_afresh(browser, f"{browser.url}#row={rid}")  # the permalink
    assert browser.js("document.getElementById('detail').open") is True
    assert browser.js("document.getElementById('detail-title').textContent") == "acme/med-embed"
    assert browser.js("Array.from(document.querySelectorAll('#leaderboard tr.target')).map(tr => tr.dataset.id)") == [rid]
    box = eventually(browser, f"""(() => {{
        const box = document.getElementById('table-box').getBoundingClientRect();
        const head = document.querySelector('#leaderboard thead').getBoundingClientRect();
        const row = document.querySelector('tr[data-id="{rid}"]').getBoundingClientRect();
        return [head.bottom <= row.top, row.bottom <= box.bottom, box.top > -1, box.top < innerHeight];
    }})()""", until="seen => seen.every(Boolean)")
    assert box == [True, True, True, True]  # in view, below the sticky header


def test_every_score_of_a_row_is_readable_at_400px(browser):
    """On a 400 px phone, each of a row's cells can be brought into view beside its rank and name,
    which stay put, uncovered and unclipped, in a readable size."""
    reset(browser, 400)
    rid = row_id("acme/med-embed")
    cells = browser.js(f"""(() => {{
        const tr = document.querySelector('tr[data-id="{rid}"]');
        const rank = tr.querySelector('.c-rank'), name = tr.querySelector('.c-sys');
        return Array.from(tr.querySelectorAll('td[data-col]')).filter(td => td !== rank && td !== name).map(td => {{
            td.scrollIntoView({{block: 'center', inline: 'end'}});
            const r = td.getBoundingClientRect(), n = name.getBoundingClientRect(), k = rank.getBoundingClientRect();
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            const nameHit = document.elementFromPoint(n.left + n.width / 2, n.top + n.height / 2);
            return {{col: td.dataset.col, text: td.textContent, shown: td.contains(hit),
                     nameShown: name.contains(nameHit), rankLeft: k.left, rankRight: k.right, nameLeft: n.left,
                     nameRight: n.right, left: r.left, right: r.right, width: innerWidth,
                     clipped: td.scrollWidth > td.clientWidth, size: parseFloat(getComputedStyle(td).fontSize)}};
        }});
    }})()""")
    values = ours()["acme/med-embed"]
    assert [c["col"] for c in cells] == ["avg", *SHORTS[:3], "g-qa-reference", *SHORTS[3:6], "g-clinical-evidence",
                                         *SHORTS[6:], "g-clinical-case", "model", "source"]
    for c in cells:
        assert c["shown"] and c["nameShown"] and not c["clipped"] and c["size"] >= 12, c
        assert 0 <= c["rankLeft"] and c["rankRight"] <= c["nameLeft"] and c["nameRight"] <= c["left"], c
        assert c["right"] <= c["width"], c
        if c["col"] in values:
            assert c["text"] == f"{values[c['col']]:.2f}"


@pytest.mark.parametrize("width", [400, 1500])
def test_names_take_two_lines_at_most(browser, width):
    reset(browser, width)
    names = browser.js("""Array.from(document.querySelectorAll('#leaderboard button.sys')).map(b => ({
        text: b.textContent, title: b.title, height: b.getBoundingClientRect().height,
        line: parseFloat(getComputedStyle(b).lineHeight), clamped: b.scrollHeight > b.clientHeight + 1}))""")
    for n in names:
        assert n["height"] <= 2 * n["line"] + 1, n
        assert n["title"] == n["text"] or n["text"] == "your run"
    if width == 400:
        assert sum(n["clamped"] for n in names) >= 10  # the clamp is what keeps them to two lines


def test_one_badge_per_kind_of_source(browser):
    """Each kind of source is explained once, in the legend; rows carry a badge only for the kinds
    that are not the published leaderboard's, one each."""
    reset(browser)
    legend = browser.js("Array.from(document.querySelectorAll('#kinds li')).map(li => [li.dataset.kind, li.textContent])")
    assert [k for k, _ in legend] == ["leaderboard", "mteb", "run", "local"]
    assert all(len(text.split(": ", 1)[1]) > 20 for _, text in legend)
    badges = browser.js("Array.from(document.querySelectorAll('#leaderboard tbody:not(.section-head) tr:not(.sub)'))"
                        ".map(tr => [tr.dataset.kind, tr.querySelectorAll('.badge').length])")
    assert {kind for kind, n in badges if n} == {"mteb", "run", "local"}
    assert all(n == (kind != "leaderboard") for kind, n in badges)
    assert sum(n for _, n in badges) == len(ours())  # not one for each of the 69 leaderboard rows


# ------------------------------------------------------------------------------------------ statistics


def statistics_page() -> str:
    """A page of synthetic rows carrying what r2med computes for runs with per-query scores:
    judged@10, intervals, ties, cost, reasoning tokens and time per query; with a published row, a run
    without cost and, published elsewhere, a paper's row."""
    from r2med_tasks.board.html import render_html
    from r2med_tasks.board.leaderboard import published_row
    from r2med_tasks.board.sources import Row, paper_row

    tasks = [t.name for t in R2MED_TASKS]
    rows = []
    for i, (name, tied, tie_p, usd, sec) in enumerate(STATS):
        scores = {t: round(60.0 - 6 * i + j, 2) for j, t in enumerate(tasks)}
        row = Row(name, scores=scores, key=(name, "v1", None, False), ci={t: [v - 2 - i, v + 1.5] for t, v in scores.items()},
                  judged={t: 0.95 - 0.1 * i for t in tasks}, condensed={t: v + 3 for t, v in scores.items()},
                  tied=tied, tie_p=tie_p, tie_best=STATS[0][0])
        avg = row.average_over(tasks)
        row.average_ci = [round(avg - 1.25, 2), round(avg + 1.5, 2)]
        if name in RELEVANT_ONLY:  # judgments with relevant documents only on these datasets (no grade 0)
            row.relevant_only = {t: t in RELEVANT_ONLY[name] for t in tasks}
        if usd is not None:  # one query per dataset, each costing usd and taking sec
            row.per_query = {t: {"q1": 0.5} for t in tasks}
            usage = {"usd": usd, **({"reasoning_tokens": REASONING[name]} if name in REASONING else {})}
            row.costs = {t: {"seconds": {"search": sec}, "usage": usage if usd else None} for t in tasks}
            assert (row.usd_per_query, row.seconds_per_query) == pytest.approx((usd, sec))
        rows.append(row)
    rows.insert(2, published_row("BM25"))
    rows.append(paper_row(PAPER))
    return render_html(rows, tasks, top=len(rows))


# name, tied, Holm-adjusted p, US$ per query, seconds per query
STATS = [("alpha agent", True, None, 0.02, 1.5), ("beta rewriter", True, 0.31, 0.001, 0.4),
         ("gamma reranker", False, 0.001, 0.05, 3.0), ("delta retriever", False, 0.0004, 0.0, 0.05),
         ("epsilon no cost", None, None, None, None)]


# reasoning tokens the LLMs reported for each (one-query) dataset
REASONING = {"alpha agent": 1234, "gamma reranker": 3.5}
# a row of another paper (its average only)
PAPER = next(r for r in paper_runs() if r["name"] == "Diver-Retriever-4B (GroupRank paper)")


# rows whose judgments hold only relevant documents: on every dataset, on the first two only
RELEVANT_ONLY = {"beta rewriter": {t.name for t in R2MED_TASKS}, "gamma reranker": {t.name for t in R2MED_TASKS[:2]}}


def stats_open(browser, width: int = 1500) -> None:
    browser.open(browser.stats_url, width)


def test_statistics_in_the_table(browser):
    stats_open(browser)
    cells = browser.js("""Object.fromEntries(Array.from(document.querySelectorAll('#leaderboard tbody:not(.section-head) tr'))
        .map(tr => [tr.querySelector('button.sys').textContent, Object.fromEntries(
            Array.from(tr.querySelectorAll('td[data-col]')).map(td => [td.dataset.col, td.textContent]))]))""")
    assert [cells[n]["judged"] for n, *_ in STATS] == ["95%", "85%= P@10", "75%", "65%", "55%"]
    assert cells["BM25"]["judged"] == "–" and cells["BM25"]["usd"] == "–" and cells["BM25"]["sec"] == "–"
    # the cost, and below it the reasoning tokens per query where the LLMs reported any
    assert [cells[n]["usd"] for n, *_ in STATS] == ["$0.02001,234 reasoning tok/query", "$0.00100",
                                                    "$0.05003.5 reasoning tok/query", "$0", "–"]
    # the source: a published row's without "published", a paper's naming its paper and table (whole in the title)
    sources = browser.js("Object.fromEntries(Array.from(document.querySelectorAll('#leaderboard td[data-col=source]'))"
                         ".map(td => [td.closest('tr').dataset.id, [td.textContent, td.title]]))")
    assert sources[row_id(PAPER["name"])] == [PAPER["source"], f"published ({PAPER['source']})"]
    bm25 = next(r for r in published() if r["name"] == "BM25")["source"].split(" (")[0]
    assert sources[row_id("BM25")] == [bm25, f"published ({bm25})"]
    assert [cells[n]["sec"] for n, *_ in STATS] == ["1.5 s", "0.40 s", "3.0 s", "0.050 s", "–"]
    tasks = [t.name for t in R2MED_TASKS]
    for i, (name, tied, *_) in enumerate(STATS):
        avg = leaderboard_average([round(60.0 - 6 * i + j, 2) for j in range(len(tasks))])
        assert cells[name]["avg"] == f"{avg:.2f}" + ("≈" if tied else "") + f"{avg - 1.25:.2f}–{avg + 1.5:.2f}"
    assert cells["BM25"]["avg"] == "15.13"  # no interval, no mark


def test_intervals_in_the_charts_and_the_detail_view(browser):
    stats_open(browser)
    bars = browser.js("""Array.from(document.querySelectorAll('figure[data-dataset=Biology] g[data-kind]')).map(g => {
        const rect = g.querySelector('rect'), w = g.querySelector('path.whisker');
        return [g.querySelector('title').textContent, +rect.getAttribute('x') + +rect.getAttribute('width'),
                w && w.getAttribute('d').match(/[\\d.]+/g).map(Number)]; })""")
    assert len(bars) == 6
    for title, end, whisker in bars:
        if title.startswith("BM25"):
            assert whisker is None and "interval" not in title
        else:
            low, high = whisker[0], whisker[5]
            assert low < end < high and "(95% interval " in title, title
    note = browser.js("document.querySelector('#chart-legend .intervals').textContent")
    assert note.startswith("├─┤ 95% interval") and "published rows have no per-query scores" in note

    browser.click(f"button.sys[data-id={row_id('alpha agent')}]")
    per_dataset = tables(browser)[0]
    assert per_dataset[0] == ["Dataset", "Group", "nDCG@10", "95% interval", "Judged@10", "Condensed nDCG@10"]
    assert per_dataset[1][2:] == ["60.00", "58.00–61.50", "95.0%", "63.00"]
    shown = facts(browser)
    assert shown["Tie"].startswith("≈ tied for first: the best") and shown["Judged@10"].startswith("95.0%")
    assert shown["Intervals"].startswith("95% bootstrap")
    assert shown["Cost per query"] == "$0.0200, 1.5 s, 1,234 reasoning tokens"
    browser.click("#detail-close")
    browser.click(f"button.sys[data-id={row_id('beta rewriter')}]")
    assert facts(browser)["Tie"] == ("≈ tied for first: not separable from alpha agent (paired randomization test, "
                                     "Holm-adjusted p = 0.3100)")
    browser.click("#detail-close")
    browser.click(f"button.sys[data-id={row_id('BM25')}]")
    assert facts(browser)["Intervals"] == "none: published rows have no per-query scores"
    assert "Tie" not in facts(browser) and "Cost per query" not in facts(browser) and len(tables(browser)[0][0]) == 3


def test_quality_against_cost_marks_the_pareto_front(browser):
    """Every shown row with a cost per query is a point; the front (no other as cheap and better) is
    marked; rows without a cost (published, or not measured) are not drawn."""
    stats_open(browser)
    points = browser.js("Array.from(document.querySelectorAll('#cost g.point')).map(g => "
                        "[g.querySelector('title').textContent.split(': ')[0], g.classList.contains('pareto')])")
    tasks = [t.name for t in R2MED_TASKS]
    quality = {n: leaderboard_average([round(60.0 - 6 * i + j, 2) for j in range(len(tasks))])
               for i, (n, *_) in enumerate(STATS)}
    costed = sorted((usd, -quality[n], n) for n, _, _, usd, _ in STATS if usd is not None)
    front, best = set(), float("-inf")
    for _, q, n in costed:
        if -q > best:
            front.add(n)
            best = -q
    assert sorted(n for n, _ in points) == sorted(n for _, _, n in costed)
    assert {n for n, marked in points if marked} == front == {"delta retriever", "beta rewriter", "alpha agent"}
    assert browser.js("!document.getElementById('cost-section').classList.contains('hidden')")
    legend = browser.js("document.getElementById('cost-legend').textContent")
    assert "Pareto front" in legend and "Your run" in legend
    browser.click("#origins input[value=run]")  # no row with a cost shown: no chart
    assert browser.js("document.getElementById('cost-section').classList.contains('hidden')")


def test_judged_at_10_is_p_at_10_where_only_relevant_documents_are_judged(browser):
    """Judgments without a grade 0 (R2MED's): every judged document is relevant, so judged@10 is
    P@10 and the condensed nDCG@10 no hole measure; the detail view says so per dataset and for the
    row, the table marks the row whose every dataset is so; a row with unknown judgments is unmarked."""
    stats_open(browser)
    browser.click(f"button.sys[data-id={row_id('beta rewriter')}]")
    per_dataset = tables(browser)[0]
    assert per_dataset[0] == ["Dataset", "Group", "nDCG@10", "95% interval", "Judged@10", "Condensed nDCG@10"]
    assert all(r[4] == "85.0% = P@10" and r[5].endswith(" (not a hole measure here)") for r in per_dataset[1:])
    judged = facts(browser)["Judged@10"]
    assert judged.startswith("85.0% = P@10") and "only relevant documents are judged" in judged
    notes = browser.js("Array.from(document.querySelectorAll('#detail-body p.note')).map(p => p.textContent)")
    assert any("not what holes cost" in n for n in notes)
    browser.click("#detail-close")

    browser.click(f"button.sys[data-id={row_id('gamma reranker')}]")  # on two datasets of eight
    per_dataset = tables(browser)[0]
    assert [r[4].endswith("= P@10") for r in per_dataset[1:]] == [True, True] + [False] * 6
    assert [r[5].endswith("(not a hole measure here)") for r in per_dataset[1:]] == [True, True] + [False] * 6
    assert "carry a judgment" in facts(browser)["Judged@10"] and "= P@10 on the datasets" in facts(browser)["Judged@10"]
    browser.click("#detail-close")

    browser.click(f"button.sys[data-id={row_id('alpha agent')}]")  # not known: said as before
    assert "P@10" not in facts(browser)["Judged@10"] and not browser.js("document.querySelectorAll('#detail-body p.note').length")


def test_local_runs_and_mteb_results_are_sections_of_their_own(browser):
    """The run on local data scores above every published system, yet it is ranked 1 among the local
    rows under a head of their own; the MTEB result, 1 among the rows published elsewhere; both
    after the board's rows, whose ranks run 1, 2, … without them."""
    reset(browser)
    rows = browser.js("Array.from(document.querySelectorAll('#leaderboard tbody')).map(b => b.classList.contains("
                      "'section-head') ? ['head', b.textContent] : [b.dataset.section, b.querySelector('button.sys')"
                      ".textContent, b.querySelector('td.c-rank').textContent])")
    heads = [i for i, r in enumerate(rows) if r[0] == "head"]
    assert len(heads) == 2 and "ranked among themselves" in rows[heads[0]][1]
    assert "ranked among the runs over the same datasets" in rows[heads[1]][1]
    board, elsewhere, local = rows[:heads[0]], rows[heads[0] + 1:heads[1]], rows[heads[1] + 1:]
    assert "Published elsewhere" in rows[heads[0]][1] and "Local data" in rows[heads[1]][1]
    assert {r[0] for r in board} == {"board"} and [r[2] for r in board] == [str(i) for i in range(1, len(board) + 1)]
    assert elsewhere == [["elsewhere", MTEB, "1"]] and local == [["local", LOCAL, "1"]]
    for name, said in ((LOCAL, "rank 1 among the runs on local data over the same datasets"), (MTEB, "rank 1 among the rows published elsewhere")):
        browser.click(f"button.sys[data-id={row_id(name)}]")
        assert said in browser.js("document.querySelector('#detail-body p').textContent")
        browser.click("#detail-close")
    hidden = "document.querySelector('tbody.section-head[data-section={}]').classList.contains('hidden')"
    browser.click("#origins input[value=local]")  # no local row shown: no head
    assert browser.js(hidden.format("local")) is True and browser.js(hidden.format("elsewhere")) is False


@pytest.mark.process  # a hash seed is an interpreter's
def test_the_page_is_the_same_whatever_the_hash_seed(tmp_path):
    """The filters' choices once came out in an order that depended on PYTHONHASHSEED (names that
    differ only in case, BGE-Large-en-v1.5 and bge-large-en-v1.5): the same board gives the same bytes."""
    import subprocess
    import sys

    pages = []
    for seed in ("1", "2", "3"):
        out = tmp_path / f"page-{seed}.html"
        subprocess.run([sys.executable, "-m", "r2med_tasks.cli", "leaderboard", "--published", "all", "--format", "html",
                        "--output", str(out)], check=True, capture_output=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONHASHSEED": seed})
        pages.append(out.read_bytes())
    page = pages[0].decode()
    assert '<option value="BGE-Large-en-v1.5">' in page and '<option value="bge-large-en-v1.5">' in page
    assert pages[0] == pages[1] == pages[2]
