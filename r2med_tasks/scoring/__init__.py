"""Runs and their scores: the ``Run`` shape and TREC files (``runs``), top-k (``ranking``), nDCG and
the other metrics as mteb computes them (``evaluation``), bootstrap intervals (``uncertainty``),
paired tests (``significance``) and rank fusion (``fusion``). Pure computation over rankings and
judgments: it knows nothing of tasks, plugins or results folders."""
