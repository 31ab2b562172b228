"""The leaderboard: the authors' published record (``published``), ranking (``leaderboard``), the HTML
page (``html``), and reproductions with verdicts (``reproduce``, ``verdicts``)."""
