"""The parts of the board, each ranked on its own so that nothing shown beside the leaderboard's rows
moves their ranks: the board (the leaderboard's rows and your runs on R2MED's official data), the
rows published elsewhere (other papers', the authors' repository's other runs, MTEB's results) and
runs on local data, each set of datasets apart. Which section a row is in is
:attr:`board.sources.Row.section`.
"""

from __future__ import annotations

from ..tasks.specs import SHORT_NAMES

BOARD_SECTION, ELSEWHERE_SECTION, LOCAL_SECTION = "board", "elsewhere", "local"
SECTIONS = (BOARD_SECTION, ELSEWHERE_SECTION, LOCAL_SECTION)  # in this order, each ranked on its own
# The sections after the board's: the line above their rows, and what they are.
SECTION_LABELS = {ELSEWHERE_SECTION: "Published elsewhere", LOCAL_SECTION: "Local data"}
SECTION_TITLES = {
    ELSEWHERE_SECTION: "Published elsewhere: other papers' runs, the authors' repository's other runs and MTEB's "
                       "results, ranked among themselves (the leaderboard's rows keep their ranks whatever is shown)",
    LOCAL_SECTION: "Local data: runs on data other than R2MED's official release, ranked among the runs over "
                   "the same datasets (not comparable with the board's rows, whose ranks they never change)"}


def rank_group(row) -> tuple:
    """What a row is ranked among: its section, and for a run on local data the datasets it covers
    (:attr:`board.sources.Row.peers`), as averages over other datasets do not compare."""
    return row.section, row.peers


def group_label(row, tasks: list[str], names: dict[str, str] = SHORT_NAMES) -> str:
    """The line above the first row of a group after the board's: the section's label, and the
    datasets of a local group that lacks some of the shown ``tasks`` (named by ``names``)."""
    if row.section != LOCAL_SECTION or list(row.peers) == list(tasks):
        return SECTION_LABELS[row.section]
    return f"{SECTION_LABELS[row.section]} over {', '.join(names[t] for t in row.peers) or 'none of these datasets'}"


def section_ranks(rows: list) -> list[int]:
    """Each row's rank within its group (:func:`rank_group`), for rows in rank order: the board's
    rows 1, 2, …, the rows published elsewhere 1, 2, … again, then each local group's."""
    seen: dict[tuple, int] = {}
    ranks = []
    for row in rows:
        group = rank_group(row)
        seen[group] = seen.get(group, 0) + 1
        ranks.append(seen[group])
    return ranks
