"""What the terminal shows in narrow spaces: the leaderboard table at 80 columns (rank, a shortened
system name and the average stay), text shortened at word boundaries (a path to its last part,
never cut inside), and `r2med sweep`'s live view, whose times tick between changes of state."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from r2med_tasks.board.leaderboard import ranked, select
from r2med_tasks.board.render import render, shorten
from r2med_tasks.board.sections import SECTION_LABELS
from r2med_tasks.board.sources import Row, published_rows
from r2med_tasks.tasks.specs import R2MED_TASKS

LONG = "acme/" + "very-long-name-" * 6 + "end"
MODEL = "/data/shared/models/sentence-transformers/all-MiniLM-L6-v2"


def compact(text: str) -> str:
    return text.replace(" ", "")


def board_rows():
    mine = Row(LONG, scores={t.name: 90.0 for t in R2MED_TASKS}, key=("acme", "v1", None, False))
    return select(ranked([mine, *published_rows()]), top=15)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_table_keeps_rank_system_and_average_at_any_width(width):
    rows, tasks = board_rows()
    text = render(rows, tasks, "table", width=width)
    lines = text.splitlines()
    assert max(map(len, lines)) <= width
    header = next(line for line in lines if line.strip().startswith("#"))
    assert header.split()[:4] == ["#", "System", "Src", "Avg"]
    system_at = header.index("System")
    starts = [i for i, line in enumerate(lines) if line[:5].strip().isdigit()]
    assert len(starts) == len(rows)
    for i, row in zip(starts, rows):
        rank, rest = lines[i][:system_at].strip(), lines[i][system_at:]
        assert rank == str(rows.index(row) + 1)
        assert f" {row.average_over(tasks):.2f} " in f"{rest} "
        # the name, maybe over more lines (continuations), shortened at a word boundary
        shown, below = rest.split("  ")[0].strip(), i + 1
        while below < len(lines) and not lines[below][:5].strip() and lines[below][system_at:].strip():
            shown, below = shown + lines[below][system_at:].split("  ")[0].strip(), below + 1
        name = row.system.rsplit("/", 1)[1] if shown.startswith("…/") else row.system  # a path: its last part
        kept = compact(shown.removeprefix("…/").removesuffix("…"))
        assert compact(name).startswith(kept), (row.system, shown)
        if shown.endswith("…"):
            at = [j for j, c in enumerate(name) if c != " "][len(kept)]
            assert name[at - 1] in " -_+" or name[at] in " -_+", (row.system, shown)
        else:
            assert kept == compact(name)
    if width == 80:  # the datasets that do not fit are named, not dropped silently
        caption = text.split("Not shown at 80 columns: ")[1]
        assert "IIYi-Clinical" in caption and "--wide" in caption
    if width == 120:
        assert "Not shown" not in text


def test_the_wide_table_keeps_every_name_whole():
    rows, tasks = board_rows()
    wide = render(rows, tasks, "table", wide=True)
    assert LONG in wide and all(r.system in wide for r in rows)


@pytest.mark.parametrize("text, width, expected", [
    (f"--plugin st -o model={MODEL} --plugin bge-reranker", 62,
     "--plugin st -o model=…/all-MiniLM-L6-v2 --plugin bge-reranker"),
    (f"--plugin st -o model={MODEL} --plugin bge-reranker -o rerank_k=100", 50,
     "--plugin st -o model=…/all-MiniLM-L6-v2 --plugin…"),
    ("sentence-transformers/all-MiniLM-L6-v2", 30, "…/all-MiniLM-L6-v2"),
    ("DeepSeek-R1-Distill-Llama-70B + NV-Embed-v2", 32, "DeepSeek-R1-Distill-Llama-70B…"),
    ("DeepSeek-R1-Distill-Llama-70B + NV-Embed-v2", 20, "DeepSeek-R1-Distill…"),
    ("o3-mini + NV-Embed-v2", 40, "o3-mini + NV-Embed-v2"),
    ("sentence-transformers/all-MiniLM-L6-v2", 14, "…/all-MiniLM…"),  # alone: within its last part
    ("abcdefghijklmnopqrstuvwxyz", 10, "abcdefghi…"),  # no boundary at all: cut where it must
])
def test_shortened_at_word_boundaries_never_inside_a_path(text, width, expected):
    assert shorten(text, width) == expected
    assert len(shorten(text, width)) <= width


def test_a_path_is_never_cut_inside():
    for width in range(12, len(MODEL) + 30):
        out = shorten(f"--plugin st -o model={MODEL} -o batch_size=64", width)
        assert len(out) <= width
        for word in out.rstrip("…").split(" "):
            if "/" in word:  # the path's last part, whole, or the path whole
                assert word.endswith(("/all-MiniLM-L6-v2", MODEL)), out
        assert "model=…/all-MiniLM-L6-v2" in out or width <= len("--plugin st -o model=…/all-MiniLM-L6-v2")


# ------------------------------------------------------------------------------------------ sweep


def jobs():
    from r2med_tasks.sweep.plan import Job

    return [Job(0, "s.txt:1", f"--plugin st -o model={MODEL} --plugin bge-reranker -o rerank_k=100", (),
                ("Biology",), "results", 0),
            Job(1, "s.txt:2", "--plugin bm25", (), ("Bioinformatics",), "results", 1)]


def text_of(renderable, width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False)
    console.print(renderable)
    return console.file.getvalue()


def test_the_live_view_ticks_between_changes_of_state():
    """The view is rendered from the board at each refresh, on the board's clock: the time of a
    running job advances with no change of state, and the CLI's view refreshes itself."""
    from r2med_tasks.cli.sweep import live_view
    from r2med_tasks.sweep.board import Board

    now = [1000.0]
    board = Board(jobs(), clock=lambda: now[0])
    board.start(0)
    now[0] += 7
    first = text_of(board.render(width=80))
    now[0] += 58
    second = text_of(board.render(width=80))
    assert " 7s " in first and " 1m05s " in second
    assert "1 queued, 1 running, 0 done, 0 failed" in second

    console = Console(file=io.StringIO(), width=80, color_system=None, force_terminal=False)
    live = live_view(board, console)
    assert live.auto_refresh
    now[0] += 3600
    assert " 1h01m " in text_of(live.renderable)  # what the next refresh draws, with no update()


def test_the_live_view_shortens_pipelines_at_word_boundaries():
    from r2med_tasks.sweep.board import Board

    board = Board(jobs(), clock=lambda: 0.0)
    board.start(0)
    board.start(1)
    text = text_of(board.render(width=80))
    assert max(map(len, text.splitlines())) <= 80
    assert "model=…/all-MiniLM-L6-v2" in text and "/data/shared" not in text
    wide = text_of(board.render(width=200), width=200)
    assert f"model={MODEL} --plugin bge-reranker -o rerank_k=100" in wide  # room: all of it


def test_rows_tied_for_first_are_marked_at_80_columns():
    rows, tasks = board_rows()
    rows[0].tied, rows[3].tied, rows[4].tied = True, True, False  # (what mark_ties sets)
    text = render(rows, tasks, "table", width=80)
    marked = [line.split()[0] for line in text.splitlines() if line[:5].strip().isdigit() and "≈" in line]
    assert marked == ["1", "4"] and max(map(len, text.splitlines())) <= 80
    assert "≈: tied for first (not separable from the best row)" in " ".join(text.split())
    rows[0].tied = rows[3].tied = None
    assert "≈" not in render(rows, tasks, "table", width=80)


def test_no_two_names_are_shown_alike(width=80):
    rows, tasks = select(ranked(published_rows(which="all")))
    lines = render(rows, tasks, "table", width=width).splitlines()
    system_at = next(line for line in lines if line.strip().startswith("#")).index("System")
    body = lines[lines.index(next(line for line in lines if line.strip().startswith("─"))) + 1:]
    cells: list[str] = []
    for line in body[:next(i for i, line in enumerate(body) if line.startswith("Bio="))]:  # down to the caption
        if line.strip() in SECTION_LABELS.values() or not line.strip() or line.strip().startswith("─"):
            continue
        if line[:5].strip().isdigit():
            cells.append("")
        cells[-1] += "\n" + line[system_at:].split("  ")[0]
    assert len(cells) == len(rows)
    names = [r.system for r in rows]
    for name, cell in zip(names, cells):
        clashes = {other for other, shown in zip(names, cells) if shown == cell}
        assert clashes == {name}, (cell, clashes)
