"""``r2med show``: one query of a run, or two runs query by query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console, Group
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..errors import UserError
from ..running.request import PathOption
from ..terminal import number, printable
from .common import err, out, user_errors

REASONING_CHARS = 600  # of a stage's reasoning the terminal shows without --full
ANSWER_CHARS = 1500  # of a generated document
ORDER_IDS = 20  # of a reranker's new order
SNIPPET_CHARS = 120  # of a document's text in the tables (the JSON carries 200)
LONGEST_ID = 40  # ids up to this long are never wrapped in a table


@click.command("show", short_help="Show one query of a run, or compare two runs.")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN [RUN_B]")
@click.option("--task", "task_name", metavar="TASK",
              help="The task: an mteb name or a short name (Biology, sample); default: the folder's one task.")
@click.option("--query", "query_id", metavar="QUERY",
              help="The query (its id). Required with one run; with two, the documents that entered and left "
                   "its top 10.")
@click.option("--data-dir", type=PathOption(), metavar="DIR",
              help="The folder the run read its data from (r2med-run --data-dir), for the query's text, the "
                   "grades and the documents; runs on the sample or the hub's data find theirs.")
@click.option("--cache-dir", type=PathOption(), metavar="DIR", envvar="R2MED_CACHE_DIR",
              help="Where a --data-dir corpus's checked document ids are kept (default: $R2MED_CACHE_DIR, else "
                   "$XDG_CACHE_HOME/r2med or ~/.cache/r2med).")
@click.option("--full", is_flag=True, help="Whole generated texts and reasoning (by default, their beginning).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (docs/inspecting-runs.md has its shape).")
def show_command(runs, task_name, query_id, data_dir, cache_dir, full, as_json):
    """One query of a run, or two runs compared query by query.

    \b
    r2med show RUN --query Q  its text, what the LLMs generated, the top 10 with
                              grades, the relevant documents missed, nDCG@10
    r2med show A B            per-query nDCG@10 of A and B, largest gain first
    r2med show A B --query Q  the documents that entered and left the top 10

    RUN, A and B are results folders of r2med-run (<output>/<org__model>/<revision>/).
    """
    from ..api import compare_queries, show_query

    with user_errors():
        if len(runs) > 2:
            raise UserError(f"r2med show: {len(runs)} folders; give one results folder (with --query) or two "
                            "(A B, to compare them query by query)")
        if len(runs) == 1:
            if query_id is None:
                raise UserError("r2med show RUN: pass --query QUERY (the query to open), or give two results "
                                "folders (A B) to compare them query by query")
            result = show_query(runs[0], query_id, task=task_name, data_dir=data_dir, cache_dir=cache_dir)
        else:
            result = compare_queries(*runs, task=task_name, query=query_id, data_dir=data_dir, cache_dir=cache_dir)
    for warning in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(printable(warning))}", soft_wrap=True)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    elif len(runs) == 1:
        print_query(result, out, full=full)
    else:
        print_differences(result, out)


# -- rendering (a Console of any width: every line fits it) ----------------------------------------


def safe(text: str) -> str:
    """Text from files shown as it is, lines kept, control characters escaped."""
    return "\n".join(printable(line.replace("\t", "    ")) for line in str(text).split("\n"))


def cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"… ({len(text) - limit:,} more characters: --full or --json)"


def percent(value: float | None) -> str:
    """A score as the tables show it: ×100, two decimals ("-": none)."""
    return "-" if value is None else f"{100 * value:.2f}"


def grade(value: int | None) -> Text:
    return Text("unjudged", style="dim") if value is None else Text(str(value), style="bold" if value > 0 else "")


def id_column(table: Table, header: str, ids: list[str], **kwargs: Any) -> None:
    """A column of ids: each on one line when it fits (never cut with an ellipsis; a longer one folds)."""
    longest = max((len(printable(i)) for i in ids), default=len(header))
    table.add_column(header, overflow="fold", min_width=min(max(longest, len(header)), LONGEST_ID), **kwargs)


def heading(text: str) -> Text:
    return Text(text, style="bold")


def print_query(view, console: Console, *, full: bool = False) -> None:
    """:class:`~r2med_tasks.results.perquery.QueryView` on ``console``."""
    console.print(Text.assemble((safe(view.task), "bold"), " · query ", (safe(view.query_id), "bold"), " · ",
                                safe(view.name)))
    console.print(Text(safe(view.run), style="dim"))
    console.print(f"nDCG@10 ×100 {percent(view.ndcg_at_10)}"
                  f"{'' if view.ndcg_at_10 is not None else ' (the run did not score this query)'} · "
                  f"{view.relevant} relevant documents · {view.retrieved} retrieved")
    console.print()
    console.print(heading("Query"))
    console.print(Padding(Text(safe(view.query_text)) if view.query_text is not None else
                          Text("(not in the task's data)", style="dim"), (0, 0, 0, 2), expand=False))
    for g in view.generations:
        console.print()
        who = " ".join(safe(x) for x in (g["component"] or "", f"({g['model']})" if g["model"] else "") if x)
        method = f" [{safe(g['method'])}]" if g.get("method") and g["method"] != g["component"] else ""
        console.print(heading(f"{(g['stage'] or 'LLM').capitalize()}: {who}{method}".rstrip()))
        parts = []
        if g["reasoning"]:
            counted = f" ({g['reasoning_tokens']:,} tokens)" if g.get("reasoning_tokens") else ""
            parts += [Text(f"Reasoning{counted}", style="italic"),
                      Text(safe(cut(g["reasoning"], None if full else REASONING_CHARS)), style="dim")]
        answer = g["answer"]
        if g.get("rewritten") is not None:
            parts += [Text("Rewritten query", style="italic"), Text(safe(g["rewritten"]))]
        if "generated" in g:  # a rewritten query no LLM answered: the documents it holds
            count = len(g["generated"])
            for i, text in enumerate(g["generated"], 1):
                parts += [Text("Generated" + (f" ({i} of {count})" if count > 1 else ""), style="italic"),
                          Text(safe(cut(text, None if full else ANSWER_CHARS)))]
            if not count and g.get("rewritten") is None:
                parts.append(Text("Generated nothing: the query was searched as given", style="dim"))
        elif isinstance(answer, list):
            ids = [safe(a) for a in answer]
            shown = ids if full else ids[:ORDER_IDS]
            more = f" … ({len(ids) - len(shown)} more)" if len(shown) < len(ids) else ""
            parts += [Text(f"New order ({len(ids)} documents)", style="italic"), Text(", ".join(shown) + more)]
        elif answer is not None:
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            parts += [Text("Generated", style="italic"),
                      Text(safe(cut(text, None if full else ANSWER_CHARS)))]
        finish = [f for f in g["finish_reasons"] if f not in (None, "stop")]
        if finish:
            parts.append(Text(f"finish reason: {', '.join(safe(f) for f in finish)} (the answer may be cut)",
                              style="yellow"))
        console.print(Padding(Group(*parts), (0, 0, 0, 2), expand=False))
    if view.no_generations:
        console.print()
        console.print(Text(f"No generation record for this query: {safe(view.no_generations)}", style="dim"))
    console.print()
    table = Table(title=f"Top {len(view.top)} of the run", title_justify="left", title_style="bold")
    table.add_column("Rank", justify="right")
    table.add_column("Grade", justify="right")
    id_column(table, "Document", [r["doc_id"] for r in view.top])
    table.add_column("Text", ratio=1)
    for row in view.top:
        table.add_row(str(row["rank"]), grade(row["grade"]), Text(safe(row["doc_id"])), snippet_text(row, console))
    console.print(table if view.top else Text("The run ranked no document for this query.", style="dim"))
    if view.missed:
        console.print()
        missed = Table(title=f"Relevant documents the top 10 missed ({len(view.missed)})", title_justify="left",
                       title_style="bold")
        missed.add_column("Rank", justify="right")
        missed.add_column("Grade", justify="right")
        id_column(missed, "Document", [r["doc_id"] for r in view.missed])
        missed.add_column("Text", ratio=1)
        for row in view.missed:
            missed.add_row(str(row["rank"]) if row["rank"] is not None else Text("not retrieved", style="red"),
                           grade(row["grade"]), Text(safe(row["doc_id"])), snippet_text(row, console))
        console.print(missed)
    elif view.relevant:
        console.print(Text(f"The top 10 holds all {view.relevant} relevant documents.", style="green"))


def snippet_text(row: dict, console: Console) -> Text:
    """A document's snippet in a table: two or three lines of its text column on a narrow console."""
    if row.get("snippet") is None:
        return Text("(not in the corpus)", style="dim")
    text, limit = row["snippet"], min(SNIPPET_CHARS, max(60, console.width))
    return Text(safe(text if len(text) <= limit else text[:limit - 1].rstrip() + "…"))


def print_query_table(diff, console: Console) -> None:
    """Every query's nDCG@10 in A and B and the difference, the largest gain first."""
    s = diff.summary
    if s["n_queries"]:
        console.print(f"{s['n_queries']} queries: B gains on {s['gains']}, loses on {s['losses']}, ties on "
                      f"{s['ties']}; mean A {percent(s['mean_a'])}, B {percent(s['mean_b'])}, B - A "
                      f"{number(100 * s['difference'], signed=True)}")
    for side, ids in (("A", diff.only_in_a), ("B", diff.only_in_b)):
        if ids:
            console.print(Text(f"Only {side} scored {len(ids)} queries (left out): "
                               + ", ".join(safe(q) for q in ids[:10]) + (" …" if len(ids) > 10 else ""),
                               style="yellow"))
    console.print()
    table = Table()
    id_column(table, "Query", [r["query_id"] for r in diff.queries])
    for col in ("A", "B", "B - A"):
        table.add_column(col, justify="right")
    for r in diff.queries:
        d = 100 * r["difference"]
        table.add_row(Text(safe(r["query_id"])), percent(r["ndcg_at_10_a"]), percent(r["ndcg_at_10_b"]),
                      Text(number(d, signed=True), style="green" if d > 0 else "red" if d < 0 else "dim"))
    if diff.queries:
        console.print(table)
    else:
        console.print(Text("No query both runs scored.", style="dim"))


def print_differences(diff, console: Console) -> None:
    """:class:`~r2med_tasks.results.perquery.QueryDifferences` on ``console``."""
    console.print(Text.assemble((safe(diff.task), "bold"), ": B - A, nDCG@10 ×100 per query"))
    console.print(Text.assemble("A: ", (safe(diff.a["name"]), "bold"), " ", (safe(diff.a["path"]), "dim")))
    console.print(Text.assemble("B: ", (safe(diff.b["name"]), "bold"), " ", (safe(diff.b["path"]), "dim")))
    q = diff.query
    if q is None:
        print_query_table(diff, console)
        return
    scores = (f"A {percent(q['ndcg_at_10_a'])}, B {percent(q['ndcg_at_10_b'])}"
              + (f", B - A {number(100 * q['difference'], signed=True)}" if q["difference"] is not None else ""))
    console.print()
    console.print(Text.assemble(("Query ", "bold"), (safe(q["id"]), "bold"), f": nDCG@10 ×100 {scores}"))
    if q["text"] is not None:
        console.print(Padding(Text(safe(q["text"])), (0, 0, 0, 2), expand=False))
    for key, title in (("entered", "Entered: in B's top 10, not in A's"),
                       ("left", "Left: in A's top 10, not in B's")):
        rows = q[key]
        console.print()
        if not rows:
            console.print(Text(f"{title}: none", style="bold"))
            continue
        table = Table(title=f"{title} ({len(rows)})", title_justify="left", title_style="bold")
        table.add_column("A", justify="right")
        table.add_column("B", justify="right")
        table.add_column("Grade", justify="right")
        id_column(table, "Document", [r["doc_id"] for r in rows])
        table.add_column("Text", ratio=1)
        for r in rows:
            ranks = [str(r[k]) if r[k] is not None else Text("-", style="dim") for k in ("rank_a", "rank_b")]
            table.add_row(*ranks, grade(r["grade"]), Text(safe(r["doc_id"])), snippet_text(r, console))
        console.print(table)
    console.print(Text("A, B: the document's rank in each run (-: not in that run's results).", style="dim"))
