"""The leaderboard as text: the terminal table, markdown, csv and json, each row ranked within its
section. It reads rows, never ranks or merges them.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

from ..components.overlap import OVERLAP_MARK, overlap_text
from .sections import BOARD_SECTION, SECTION_LABELS, SECTION_TITLES, SECTIONS, group_label, rank_group, \
    section_ranks
from .sources import Row
from ..tasks.specs import SHORT_NAMES
from ..terminal import number, printable


TIE_MARK = "≈"
P_AT_10_NOTE = ("Judged@10 is P@10 where the judgments hold only relevant documents (no grade 0, as R2MED's): "
                "every judged document is relevant, so judged@10 counts the relevant documents of the top 10 "
                "(not holes), and the condensed nDCG@10 is not a hole measure there (it scores the run's "
                "relevant documents found anywhere in its list).")
LIVE_PREFIX = "live: "  # a line of the --commands table after the table, which sweeps do not run


# Dataset headers of the terminal table, short enough for 120 columns (explained in its caption).
ABBREVIATIONS = {"Biology": "Bio", "Bioinformatics": "Binf", "Medical-Sciences": "MedSc", "MedXpertQA-Exam": "MedXQ",
                 "MedQA-Diag": "MedQA", "PMC-Treatment": "PMC-T", "PMC-Clinical": "PMC-C", "IIYi-Clinical": "IIYi"}
TERSE = {task: ABBREVIATIONS[short] for task, short in SHORT_NAMES.items()}  # task name -> its header
ORIGINS = {"leaderboard": "board", "repository": "repo", "paper": "paper", "mteb": "mteb", "run": "run",
           "local": "local"}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """A text cell that a spreadsheet will not run: one starting like a formula gets a leading
    apostrophe (OWASP's advice against CSV injection), control characters are shown escaped."""
    return printable("'" + text if text.startswith(FORMULA_START) else text)


MARKDOWN_SYNTAX = re.compile(r"([\\`*_\[\]()!~|])")


def markdown_cell(text: str) -> str:
    """A text cell for a markdown table, shown as the text it is: HTML escaped, and each character
    markdown gives a meaning in a cell backslash-escaped (no extra cell, link, image, emphasis or
    code)."""
    return MARKDOWN_SYNTAX.sub(r"\\\1", html.escape(printable(text), quote=False))


def records_of(rows: list[Row], tasks: list[str], commands: bool = False) -> tuple[list[str], list[list]]:
    """Header and one record per row, in rank order, as the text formats show them; a row's rank is
    its rank within its section (:func:`section_ranks`)."""
    ranks = section_ranks(rows)
    if commands:
        return ["Rank", "System", "Avg", "Command", "Live command", "Placeholders"], [
            [i, r.system, r.average_over(tasks), r.command or None, r.live_command or None,
             placeholder_text(r.placeholders)] for i, r in zip(ranks, rows)]
    header = ["Rank", "System", "Rewriter", "Retriever", "Reranker", "Avg", "Avg 95% CI", "Tied",
              *(SHORT_NAMES[t] for t in tasks), "Judged@10", "Judged@10 is", "USD/query", "Reasoning tokens/query",
              "Seconds/query", "Source"]
    records = []
    for i, r in zip(ranks, rows):
        avg = r.average_over(tasks)
        said = [*r.notes, *map(overlap_text, r.overlaps)]
        marks = ("" if avg is not None else " (incomplete)") + ("; " + "; ".join(said) if said else "")
        records.append([i, r.system, r.rewriter, r.retriever, r.reranker, avg, interval_text(r.average_ci),
                        TIED_TEXT[r.tied], *(r.scores.get(t) for t in tasks), r.judged_over(tasks),
                        r.judged_means(tasks), cost_text(r.usd_per_query), cost_text(r.reasoning_tokens_per_query),
                        cost_text(r.seconds_per_query),
                        r.source + marks])
    return header, records


TIED_TEXT = {True: "yes", False: "no", None: None}  # the Tied column (None: no per-query scores to compare)


def interval_text(ci: list[float] | None) -> str | None:
    """An interval as the text formats show it: "38.12–44.90"."""
    return None if ci is None else f"{number(ci[0])}–{number(ci[1])}"


def cost_text(value: float | None) -> str | None:
    """A cost or time per query as the text formats show it: 6 significant digits ("0.000213")."""
    return None if value is None else f"{value:.6g}"


def placeholder_text(placeholders: dict[str, str]) -> str | None:
    """A command's placeholders as one cell: "DATA_DIR: the folder of local data …"."""
    return "; ".join(f"{word}: {what}" for word, what in placeholders.items()) or None


def json_records(rows: list[Row], tasks: list[str], commands: bool = False) -> list[dict]:
    """One object per row, in rank order, as ``--format json`` writes them: the text formats'
    columns under snake_case keys (``rank`` within the row's ``section``), whether the row is on
    local data and, unless ``commands``, its statistics as numbers (with ``commands``: its
    command's placeholders)."""
    header, records = records_of(rows, tasks, commands)
    keys = ([h.lower().replace(" ", "_") for h in header] if commands else
            ["rank", "system", "rewriter", "retriever", "reranker", "average", "average_ci", "tied",
             *(SHORT_NAMES[t] for t in tasks), "judged_at_10", "judged_at_10_is", "usd_per_query",
             "reasoning_tokens_per_query", "seconds_per_query", "source"])
    keys = ["average" if k == "avg" else k for k in keys]

    def extra(r: Row) -> dict:  # the statistics as numbers (the records hold their text)
        if commands:
            return {"placeholders": dict(r.placeholders)}
        return {"kind": r.kind, "origin": r.origin, "provenance": r.provenance, "training_overlap": r.overlaps,
                "average_ci": r.average_ci,
                "tied": r.tied, "tie_p": r.tie_p, "tie_best": r.tie_best,
                "ci": {SHORT_NAMES[t]: r.ci[t] for t in tasks if t in r.ci},
                "judged": {SHORT_NAMES[t]: r.judged[t] for t in tasks if t in r.judged},
                "ndcg_at_10_condensed": {SHORT_NAMES[t]: r.condensed[t] for t in tasks if t in r.condensed},
                "only_relevant_judged": {SHORT_NAMES[t]: r.relevant_only[t] for t in tasks if t in r.relevant_only},
                "usd_per_query": r.usd_per_query, "seconds_per_query": r.seconds_per_query,
                "reasoning_tokens_per_query": r.reasoning_tokens_per_query}
    return [{**dict(zip(keys, rec)), "section": r.section, "local_data": r.local,
             **({"ranked_over": [SHORT_NAMES[t] for t in r.peers]} if r.local else {}), **extra(r)}
            for rec, r in zip(records, rows)]


def render(rows, tasks: list[str], fmt: str, commands: bool = False, wide: bool = False, width: int = 120,
           data_dir: Path | None = None, reproductions: list[dict] | None = None, local_left_out: int = 0) -> str:
    """The leaderboard as text in one format; ``commands``: rank, system, average and the command
    reproducing each published row; ``wide``: the terminal table with every column. Each section
    after the board's (rows published elsewhere, local rows) is apart under its title in each format.
    ``local_left_out``: how many runs on local data the board leaves out, which the terminal table
    says (the data formats hold what was asked for)."""
    if fmt == "html":
        from .html import render_html

        return render_html(rows, tasks, data_dir=data_dir, reproductions=reproductions or [])
    if fmt == "json":
        return json.dumps(json_records(rows, tasks, commands), indent=2) + "\n"
    header, records = records_of(rows, tasks, commands)

    def cell(v):
        return "" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)

    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*header, "Section"])
        writer.writerows([[csv_cell(v) if isinstance(v, str) else cell(v) for v in rec] + [r.section]
                          for rec, r in zip(records, rows)])
        return buffer.getvalue()
    if fmt == "markdown":
        def table(part: list[list]) -> list[str]:
            return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                    *("| " + " | ".join(markdown_cell(cell(v)) for v in rec) + " |" for rec in part)]

        lines = [] if rows and rows[0].section != BOARD_SECTION else table([])[:2]  # the board's head, rows or none
        previous = (BOARD_SECTION, ())
        for rec, row in zip(records, rows):
            if rank_group(row) != previous:  # each section after the board's under its title, each group apart
                if row.section != previous[0]:
                    lines += ["", f"**{markdown_cell(SECTION_TITLES[row.section])}**"]
                if group_label(row, tasks) != SECTION_LABELS[row.section]:
                    lines += ["", f"*{markdown_cell(group_label(row, tasks))}*"]
                lines += ["", *table([])]
                previous = rank_group(row)
            lines += table([rec])[2:]
        notes = _notes(rows, tasks, commands=commands, wide=True)
        return "\n".join(lines + ([""] + [markdown_cell(n) for n in notes] if notes else [])) + "\n"
    return terminal_table(rows, tasks, header, records, commands=commands, wide=wide, width=width,
                          local_left_out=local_left_out)


def _notes(rows, tasks: list[str], *, commands: bool, wide: bool) -> list[str]:
    """The lines below a table that say what some of its cells mean: each command's placeholders
    (``commands``), where judged@10 is P@10 (``wide``: the table has the column), and each
    training-data overlap a row's models or paper report (:data:`OVERLAP_MARK`). (None names the
    program: ``r2med sweep`` reads a line that does as a command.)"""
    if commands:
        return [f"{word} in #{rank} {row.system} ({row.section}): {what}"
                for rank, row in zip(section_ranks(rows), rows) for word, what in row.placeholders.items()]
    overlaps = [f"{OVERLAP_MARK} #{rank} {row.system} ({row.section}): {overlap_text(note)}"
                for rank, row in zip(section_ranks(rows), rows) for note in getattr(row, "overlaps", [])]
    if wide and any(r.judged_means(tasks) in ("P@10", "mixed") for r in rows):
        return [P_AT_10_NOTE, *overlaps]
    return overlaps


def terminal_table(rows, tasks, header, records, *, commands: bool, wide: bool, width: int = 120,
                   local_left_out: int = 0) -> str:
    """The rich table as text. By default it fits ``width`` (≤ 120) columns: rank, system (on at
    most two lines, no two names alike: :func:`distinct_cells`), source, average and as many
    datasets as fit beside a System column of at least :data:`SYSTEM_MIN` characters (the caption
    names those left out); ``wide`` has every column. Below it, how many runs on local data are
    left out (``local_left_out``) and the option that shows them."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    def cell(v):
        return "" if v is None else f"{v:.2f}" if isinstance(v, float) else printable(v)

    live, left_out, tied = [], [], False
    shown_sections = [s for s in SECTIONS[1:] if any(r.section == s for r in rows)]
    if commands:  # the live commands below the table, where a sweep of the table does not run them
        live = [f"{LIVE_PREFIX}#{rec[0]} {rec[1]}: {rec[4]}" for rec in records if rec[4]]
        header, records = header[:4], [rec[:4] for rec in records]
    if not (wide or commands):
        tied = any(getattr(r, "tied", None) for r in rows)
        shown = _fitting(rows, tasks, width, tied)
        left_out = [t for t in tasks if t not in shown]
        header = ["#", "System", "Src", "Avg", *(ABBREVIATIONS[SHORT_NAMES[t]] for t in shown)]
        records = [[i, _marked(r), ORIGINS[r.origin], _average_cell(r, tasks, tied), *(r.scores.get(t) for t in shown)]
                   for i, r in zip(section_ranks(rows), rows)]
        labels = [line for r in rows if r.section != BOARD_SECTION for line in _label(r, tasks).splitlines()]
        system_width = min(SYSTEM_MAX, max([6, *(len(printable(_marked(r))) for r in rows), *map(len, labels)]),
                           max(1, width - _width_without_system(rows, tasks, shown, tied)))
        for rec, text in zip(records, distinct_cells([printable(rec[1]) for rec in records], system_width)):
            rec[1] = text
    elif wide:
        records = [[rec[0], _marked(row), *rec[2:]] for rec, row in zip(records, rows)]
    table = Table(title="R2MED leaderboard: nDCG@10 ×100", title_justify="left", box=box.SIMPLE_HEAD,
                  caption_justify="left")
    numeric = {"Rank", "#", "Avg", "Judged@10", "USD/query", "Reasoning tokens/query", "Seconds/query",
               *SHORT_NAMES.values(), *ABBREVIATIONS.values()}
    for col in header:
        table.add_column(col, justify="right" if col in numeric else "left",
                         no_wrap=col in numeric or not (wide or commands),
                         overflow="fold" if col == "Command" or wide else "ellipsis",
                         max_width=None if wide or col != "System" else SYSTEM_MAX)
    previous = (BOARD_SECTION, ())
    for rec, row in zip(records, rows):  # (the default table's System cells are printable already, wrapped on purpose)
        if rank_group(row) != previous:  # the first row of a group after the board's: its label above it
            previous = rank_group(row)
            if row is not rows[0]:
                table.add_section()
            table.add_row("", _label(row, tasks, SHORT_NAMES if wide or commands else TERSE),
                          *([""] * (len(header) - 2)))
        table.add_row(*(escape(v if i == 1 and not (wide or commands) else cell(v)) for i, v in enumerate(rec)))
    if not (wide or commands):
        table.caption = ("  ".join(f"{ABBREVIATIONS[SHORT_NAMES[t]]}={SHORT_NAMES[t]}" for t in tasks if t not in left_out) +
                         (f"\nNot shown at {width} columns: {', '.join(SHORT_NAMES[t] for t in left_out)} (a wider "
                          "terminal or --wide shows them)." if left_out else "") +
                         "\nSrc: board = leaderboard, repo = authors' repository, paper = another paper, run = "
                         "your run, mteb = MTEB results, local = local data. No Avg: incomplete. " +
                         (f"{TIE_MARK}: tied for first (not separable from the best row). " if tied else "") +
                         (f"{OVERLAP_MARK}: training data overlaps a dataset's source (below). "
                          if any(getattr(r, "overlaps", None) for r in rows) else "") +
                         "--wide: every column." + "".join(f"\n{SECTION_TITLES[s]}." for s in shown_sections))
    console = Console(file=io.StringIO(), width=1000 if wide else width, highlight=False, color_system=None,
                      force_terminal=False)
    console.print(table, crop=False)
    notes = ([f"{SECTION_TITLES[s]}." for s in shown_sections] if wide or commands else []) + \
        _notes(rows, tasks, commands=commands, wide=wide)
    if notes:
        console.print()
        for line in notes:
            console.print(printable(line), soft_wrap=True, markup=False)
    if local_left_out:
        console.print(f"{local_left_out} of your run{'s' if local_left_out != 1 else ''} on local data "
                      f"{'are' if local_left_out != 1 else 'is'} not shown: --include-local shows "
                      f"{'them' if local_left_out != 1 else 'it'} in a section of their own.", soft_wrap=True)
    if live:
        console.print("The search agents' rows replay their published generations (R2MED did not say which "
                      "corpus its agents searched); to run the agents live, searching the task's corpus:",
                      soft_wrap=True)
        for line in live:
            console.print(printable(line), soft_wrap=True, markup=False)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()) + "\n"


def _label(row, tasks: list[str], names: dict[str, str] = TERSE) -> str:
    """The terminal table's line above a group, its datasets on a line of their own (named as the
    headers name them), so that the label never widens the System column."""
    return group_label(row, tasks, names).replace(" over ", "\nover ", 1)


SYSTEM_MIN, SYSTEM_MAX = 18, 40  # the terminal table's System column: datasets give way below the minimum


def _marked(row) -> str:
    """A system's name as the terminal table shows it: with :data:`OVERLAP_MARK` where a footnote
    reports training data overlapping a task's source."""
    return f"{row.system} {OVERLAP_MARK}" if getattr(row, "overlaps", None) else row.system


def _average_cell(row, tasks, tied: bool) -> str:
    avg = row.average_over(tasks)
    text = "" if avg is None else f"{avg:.2f}"
    return f"{text} {TIE_MARK if getattr(row, 'tied', None) else ' '}" if tied else text


def _width_without_system(rows, tasks: list[str], shown: list[str], tied: bool) -> int:
    """The terminal table's width less its System column's text: every other column's widest cell
    (the average is over ``tasks``; ``shown``: the datasets with a column), and the box's spacing (an
    edge, and a space either side of each column)."""
    widths = [len(str(max(section_ranks(rows), default=1))), max([3, *(len(ORIGINS[r.origin]) for r in rows)]),
              max([3, *(len(_average_cell(r, tasks, tied)) for r in rows)])]
    for t in shown:
        widths.append(max([len(ABBREVIATIONS[SHORT_NAMES[t]]), *(len(f"{r.scores[t]:.2f}") for r in rows if t in r.scores)]))
    return sum(widths) + 3 * (len(widths) + 1) + 1


def _fitting(rows, tasks: list[str], width: int, tied: bool) -> list[str]:
    """The datasets that fit in ``width`` beside rank, a System column of at least
    :data:`SYSTEM_MIN`, source and average: the first ones, in the table's order."""
    shown = list(tasks)
    while shown and _width_without_system(rows, tasks, shown, tied) + SYSTEM_MIN > width:
        shown.pop()
    return shown


def two_lines(text: str, width: int) -> str:
    """``text`` wrapped at word boundaries (spaces, else hyphens too; a single long word folded)
    into at most two lines of ``width`` characters; where it needs more, its paths keep their last
    part (``…/name``) and the second line is shortened with :func:`shorten`."""
    import textwrap

    if len(text) <= width:
        return text
    for hyphens, fold, paths in ((False, False, False), (True, False, False), (True, True, False),
                                 (True, False, True)):  # what it takes to fit
        if paths:
            text = " ".join(_path_tail(word) for word in text.split(" "))
        lines = textwrap.wrap(text, width, break_long_words=fold, break_on_hyphens=hyphens)
        if len(lines) <= 2 and all(len(line) <= width for line in lines):
            break
    if not lines or not text.startswith(lines[0]) or len(lines[0]) > width:
        return shorten(text, width)
    rest = text[len(lines[0]):].strip()
    return f"{lines[0].rstrip()}\n{shorten(rest, width)}" if rest else lines[0]


def distinct_cells(names: list[str], width: int) -> list[str]:
    """Each name as the System column shows it (:func:`two_lines`), no two different names alike:
    where shortening makes names the same ("DeepSeek-R1-Distill-Llama-70B…"), each of them is
    wrapped whole instead, on as many lines as it takes (the lines joined are the name)."""
    import textwrap

    cells = [two_lines(name, width) for name in names]
    owners: dict[str, set[str]] = {}
    for name, cell in zip(names, cells):
        owners.setdefault(cell, set()).add(name)
    return [cell if len(owners[cell]) == 1 else
            "\n".join(textwrap.wrap(name, width, break_on_hyphens=True, drop_whitespace=False))
            for name, cell in zip(names, cells)]


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut only where a reader expects it: first each path
    keeps only its last part (``…/all-MiniLM-L6-v2``), the longest first; then the text ends with
    ``…`` at the last word boundary that fits (a space; within a long word, a ``-`` or ``_``)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    words = text.split(" ")
    for i in sorted(range(len(words)), key=lambda i: -len(words[i])):
        if len(" ".join(words)) <= width:
            break
        words[i] = _path_tail(words[i])
    text = " ".join(words)
    if len(text) <= width:
        return text
    room = width - 1
    cut = text.rfind(" ", 0, room + 1)
    if cut < room / 2:  # a long word: its own boundaries, never inside a path (but in its last part, if need be)
        start = text.rfind(" ", 0, room) + 1
        word = text[start:text.find(" ", start) if " " in text[start:] else len(text)]
        inner = max(text.rfind("-", 0, room + 1), text.rfind("_", 0, room + 1))
        if "/" not in word or cut <= 0 and inner > start + word.rfind("/"):
            cut = max(cut, inner)
    if cut <= 0:
        return text[:room] + "…"
    return text[:cut].rstrip(" +-_·,;:/") + "…"


def _path_tail(word: str) -> str:
    """A path's last part: ``/data/models/all-MiniLM-L6-v2`` as ``…/all-MiniLM-L6-v2``,
    ``model=/data/x/y`` as ``model=…/y`` (unchanged when that is no shorter)."""
    name, eq, value = word.partition("=")
    if not eq or "/" not in value or "/" in name:
        name, eq, value = "", "", word
    parts = [p for p in value.split("/") if p]
    tail = f"{name}{eq}…/{parts[-1]}" if len(parts) > 1 else word
    return tail if len(tail) < len(word) else word
