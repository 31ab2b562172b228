"""The HTML leaderboard driven in headless Chromium (Debian's /usr/bin/chromium, as CI installs it):
filters, search, sorting by click and keyboard, the detail view, charts, hostile names shown as
text, and no page-level horizontal overflow at 400 px and 1500 px. One browser for the module.

Expected values are computed here from the shipped CSV and the demonstration runs' own numbers.
"""

import csv
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from r2med_tasks.evaluation import leaderboard_average
from r2med_tasks.leaderboard import PUBLISHED_CSV
from r2med_tasks.tasks import R2MED_TASKS

ROOT = Path(__file__).parent.parent
spec = importlib.util.spec_from_file_location("screenshots", ROOT / "docs" / "screenshots.py")
screenshots = importlib.util.module_from_spec(spec)
spec.loader.exec_module(screenshots)

HOSTILE = ["<script>alert(1)</script>", "</table><img src=x onerror=alert(2)>"]
SHORTS = [t.short_name for t in R2MED_TASKS]


def published():
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def ours() -> dict[str, dict[str, float]]:
    """The demonstration runs' values (×100), as docs/screenshots.py writes them, by system."""
    return {"acme/med-embed": {s: round(100 * (0.30 + 0.03 * i), 2) for i, s in enumerate(SHORTS)},
            "intfloat/e5-base-v2": {s: round(100 * (0.12 + 0.02 * i), 2) for i, s in enumerate(SHORTS)},
            **{name: {s: 1.0 + i for i, s in enumerate(SHORTS)} for name in HOSTILE}}


def every_row() -> dict[str, dict[str, float]]:
    rows = {r["name"]: {s: float(r[s]) for s in SHORTS if r[s]} for r in published()}
    return {**rows, **ours()}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if shutil.which("chromium") is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium for this test")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from r2med_tasks import plugins as plugins_module
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
        page = tmp / "board.html"
        result = CliRunner().invoke(cli, ["leaderboard", str(results), "--mteb-results", str(mteb), "--format", "html",
                                          "--output", str(page)], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
    chromium = screenshots.Chromium()
    chromium.send("Page.addScriptToEvaluateOnNewDocument",
                  {"source": "window.__alerts = 0; window.alert = () => { window.__alerts += 1; };"}, session=True)
    chromium.url = page.as_uri()
    chromium.open(chromium.url, 1500)
    yield chromium
    chromium.close()


def visible(browser) -> list[str]:
    """System names of the shown rows, top to bottom."""
    return browser.js("Array.from(document.querySelectorAll('#leaderboard tbody:not(.hidden) tr:first-child "
                      "button.sys')).map(b => b.textContent)")


def reset(browser, width: int = 1500) -> None:
    browser.open(browser.url, width)


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
    browser.js("const s = document.getElementById('f-retriever'); s.value = 'BM25'; "
               "s.dispatchEvent(new Event('input'))")
    assert visible(browser) == [r["name"] for r in published() if r["retriever"] == "BM25"]
    reset(browser)
    browser.js("document.getElementById('q').focus()")
    browser.send("Input.insertText", {"text": "QwQ"}, session=True)  # typed, as a user would
    assert visible(browser) == [r["name"] for r in published() if "qwq" in " ".join(r.values()).lower()]
    reset(browser)
    browser.click("#origins input[value=leaderboard]")
    assert sorted(visible(browser)) == sorted(["BM25", *(n for n in ours() if n != "intfloat/e5-base-v2"),
                                               "intfloat/e5-base-v2"])  # BM25: holds your run
    browser.click("#origins input[value=run]")
    assert visible(browser) == ["intfloat/e5-base-v2"]


def test_group_view_ranks_by_the_groups_average(browser):
    reset(browser)
    browser.js("const s = document.getElementById('group'); s.value = 'clinical-case'; "
               "s.dispatchEvent(new Event('change'))")
    shown = browser.js("Array.from(document.querySelectorAll('#leaderboard thead tr:last-child th'))"
                       ".filter(th => !th.classList.contains('hidden')).map(th => th.textContent)")
    assert shown == ["#", "System", "Avg", "PMC-Clinical", "IIYi-Clinical", "Group avg▼"]
    averages = {n: leaderboard_average([s["PMC-Clinical"], s["IIYi-Clinical"]]) for n, s in every_row().items()
                if "PMC-Clinical" in s}
    best = sorted(averages, key=lambda n: -averages[n])[:3]
    assert visible(browser)[:3] == best


def test_sorting_by_click_and_keyboard(browser):
    reset(browser)
    biology = {n: s["Biology"] for n, s in every_row().items() if "Biology" in s}
    browser.click("th[data-col=Biology] button")
    assert browser.js("document.querySelector('th[data-col=Biology]').getAttribute('aria-sort')") == "descending"
    assert browser.js("document.querySelector('th[data-col=Biology] .ind').textContent") == "▼"
    assert visible(browser)[0] == max(biology, key=biology.get) == "Search-O1 (QwQ-32b) + BM25"
    browser.click("th[data-col=Biology] button")
    names = visible(browser)
    assert names[0] == min(biology, key=biology.get)
    assert set(names[len(biology):]) == set(every_row()) - set(biology)  # no value: last

    browser.js("document.querySelector('th[data-col=system] button').focus()")
    browser.press("Enter", 13, "\r")
    assert browser.js("document.querySelector('th[data-col=system]').getAttribute('aria-sort')") == "ascending"
    assert visible(browser) == sorted(every_row(), key=str.lower)
    browser.js("document.querySelector('th[data-col=avg] button').focus()")
    browser.press(" ", 32, " ")
    averages = {r["name"]: float(r["avg"]) for r in published()}
    averages |= {n: leaderboard_average(list(s.values())) for n, s in ours().items()}
    assert visible(browser)[:5] == sorted(averages, key=lambda n: -averages[n])[:5]


def test_detail_view(browser):
    reset(browser)
    browser.click(f"button.sys[data-id=s{1 + visible(browser).index('acme/med-embed')}]")
    assert browser.js("document.getElementById('detail').open") is True
    assert browser.js("document.getElementById('detail-title').textContent") == "acme/med-embed"
    tables = browser.js("Array.from(document.querySelectorAll('#detail-body table')).map(t => "
                        "Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.textContent)))")
    per_dataset, metrics = tables
    assert per_dataset[1:] == [[s, g, f"{ours()['acme/med-embed'][s]:.2f}"] for s, g in zip(SHORTS, [
        "Q&A reference"] * 3 + ["Clinical evidence"] * 3 + ["Clinical case"] * 2)]
    recall = next(r for r in metrics if r[0] == "recall_at_100")
    assert recall[1:] == [f"{100 * (0.6 + 0.02 * i):.2f}" for i in range(8)]
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
    assert json.loads(pre[0])["retriever"]["component"] == "bm25" and pre[1] == "r2med-run --plugin bm25"


def test_charts_show_each_datasets_own_top_systems(browser):
    reset(browser)
    for short, scores in [(s, {n: v[s] for n, v in every_row().items() if s in v}) for s in SHORTS]:
        top = sorted(scores, key=lambda n: -scores[n])[:5]
        labels = browser.js(f"Array.from(document.querySelectorAll('figure[data-dataset=\"{short}\"] g title'))"
                            ".map(t => t.textContent)")
        assert [label.rsplit(": ", 1)[0] for label in labels] == top, short
        assert [float(label.rsplit(": ", 1)[1]) for label in labels] == [scores[n] for n in top]
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
    browser.js("const s = document.getElementById('group'); s.value = 'clinical-case'; "
               "s.dispatchEvent(new Event('change'))")
    shown = browser.js("Array.from(document.querySelectorAll('.charts figure:not(.hidden)')).map(f => f.dataset.dataset)")
    assert shown == ["PMC-Clinical", "IIYi-Clinical"]
    browser.send("Input.insertText", {"text": " no such system"}, session=True)
    assert browser.js("document.querySelectorAll('.charts figure:not(.hidden)').length") == 0


@pytest.mark.parametrize("width", [400, 1500])
def test_no_page_level_horizontal_overflow(browser, width):
    reset(browser, width)
    assert browser.js("document.documentElement.scrollWidth") <= width
    table_box = browser.js("(() => { const b = document.querySelector('.scroll'); "
                           "return [b.scrollWidth, b.clientWidth]; })()")
    if width == 400:
        assert table_box[0] > table_box[1]  # the table scrolls within its own box
    browser.click("button.sys[data-id=s2]")
    assert browser.js("document.documentElement.scrollWidth") <= width  # nor with the detail view open
