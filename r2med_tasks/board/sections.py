"""The parts of the board, each ranked on its own so that nothing shown beside the leaderboard's rows
moves their ranks: the board (the leaderboard's rows and your runs on R2MED's official data), the
rows published elsewhere (other papers', the authors' repository's other runs, MTEB's results) and
runs on local data. Which section a row is in is :attr:`board.sources.Row.section`.
"""

from __future__ import annotations

BOARD_SECTION, ELSEWHERE_SECTION, LOCAL_SECTION = "board", "elsewhere", "local"
SECTIONS = (BOARD_SECTION, ELSEWHERE_SECTION, LOCAL_SECTION)  # in this order, each ranked on its own
# The sections after the board's: the line above their rows, and what they are.
SECTION_LABELS = {ELSEWHERE_SECTION: "Published elsewhere", LOCAL_SECTION: "Local data"}
SECTION_TITLES = {
    ELSEWHERE_SECTION: "Published elsewhere: other papers' runs, the authors' repository's other runs and MTEB's "
                       "results, ranked among themselves (the leaderboard's rows keep their ranks whatever is shown)",
    LOCAL_SECTION: "Local data: runs on data other than R2MED's official release, ranked among themselves "
                   "(not comparable with the board's rows, whose ranks they never change)"}


def section_ranks(rows: list) -> list[int]:
    """Each row's rank within its section, for rows in rank order: the board's rows 1, 2, …, the
    rows published elsewhere 1, 2, … again, then the local rows'."""
    seen: dict[str, int] = {}
    ranks = []
    for row in rows:
        seen[row.section] = seen.get(row.section, 0) + 1
        ranks.append(seen[row.section])
    return ranks
