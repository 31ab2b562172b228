"""The leaderboard: the authors' published record (``published``), where rows come from (``sources``),
ranking (``leaderboard``), tables (``render``), the HTML page (``html``), and reproductions with verdicts (``reproduce``, ``verdicts``)."""
