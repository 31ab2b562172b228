"""The leaderboard: the authors' published record, your runs and MTEB's beside it, ranked, rendered,
and reproduced with verdicts."""
