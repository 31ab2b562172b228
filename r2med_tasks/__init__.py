"""r2med: an evaluation harness for R2MED, the reasoning-driven medical retrieval benchmark.

The Python API for users; plugin authors import from :mod:`r2med_tasks.plugin`. Importing it is
cheap: no torch, no mteb.
"""

from importlib.metadata import PackageNotFoundError, version

from .api import (as_mteb_model, compare_queries, compare_runs, evaluate, export_generations, fuse_runs, pipeline,
                  rank_systems, read_generations, show_query)
from .components.specs import Reranker, RerankerSpec, Retriever, RetrieverSpec, Rewriter, RewriterSpec, Run
from .components.context import Context
from .tasks.taskdata import Corpus, Query
from .errors import PluginError, UserError
from .components.hookspecs import hookimpl
from .components.options import Options
from .results.outcomes import RunOutcome, TaskOutcome
from .tasks.specs import R2MED_TASKS, TaskSpec

try:
    __version__ = version("r2med")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "Context", "Corpus", "PluginError", "Query", "R2MED_TASKS", "Reranker", "RerankerSpec", "Retriever", "RetrieverSpec",
    "Rewriter", "RewriterSpec", "Run", "RunOutcome", "TaskOutcome", "TaskSpec", "UserError", "__version__",
    "as_mteb_model", "compare_runs", "evaluate", "export_generations", "fuse_runs", "Options", "hookimpl", "pipeline",
    "rank_systems", "read_generations",
    "compare_queries", "show_query",
]
