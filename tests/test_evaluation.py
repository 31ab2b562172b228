"""The leaderboard's arithmetic, checked against numbers the R2MED authors published."""

import pytest

from r2med_tasks.scoring.evaluation import leaderboard_average, leaderboard_value

# (per-dataset nDCG@10 ×100 as published, published average), as in r2med_tasks/data/leaderboard/r2med_leaderboard.csv
PUBLISHED = [
    ([19.19, 21.55, 19.68, 0.66, 2.55, 23.69, 21.66, 12.02], 15.13),  # BM25: Python's round() gives 15.12
    ([57.34, 43.02, 41.22, 26.55, 49.60, 40.61, 32.80, 10.42], 37.70),  # GPT4o + BM25: the raw mean gives 37.69
    ([49.77, 40.02, 38.47, 21.91, 39.54, 39.30, 28.38, 10.01], 33.43),  # HuatuoGPT-o1-70B + BM25
    ([23.60, 33.76, 41.51, 14.41, 17.98, 39.77, 22.23, 16.22], 26.19),  # Qwen2.5-32B + BGE
    ([37.01, 52.35, 51.95, 25.86, 43.30, 47.10, 52.30, 23.37], 41.66),  # Query2Doc GPT-4 + NV-Embed-v2
    ([27.15, 50.10, 47.81, 10.90, 16.72, 44.05, 39.91, 14.81], 31.43),  # NV-Embed-v2
]


@pytest.mark.parametrize("values, average", PUBLISHED)
def test_average_matches_published(values, average):
    assert leaderboard_average(values) == average


@pytest.mark.parametrize("score, shown", [(0.02155, 2.15), (0.19188, 19.19), (0.501, 50.1), (0.1234549, 12.35)])
def test_task_value_as_the_site_rounds(score, shown):
    """Scores are rounded to 5 decimals, ×100, then Python-rounded to 2 (0.02155 shows as 2.15)."""
    assert leaderboard_value(score) == shown
