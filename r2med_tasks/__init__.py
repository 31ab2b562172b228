"""r2med: an evaluation harness for R2MED, the reasoning-driven medical retrieval benchmark.

The public API for plugin authors. Importing it is cheap: no torch, no mteb.
"""

from importlib.metadata import PackageNotFoundError, version

from .components import Reranker, RerankerSpec, Retriever, RetrieverSpec, Rewriter, RewriterSpec, Run
from .data import Corpus, Query
from .errors import PluginError, UserError
from .hookspecs import hookimpl
from .tasks import R2MED_TASKS, TaskSpec

try:
    __version__ = version("r2med")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "Corpus", "PluginError", "Query", "R2MED_TASKS", "Reranker", "RerankerSpec", "Retriever", "RetrieverSpec",
    "Rewriter", "RewriterSpec", "Run", "TaskSpec", "UserError", "__version__", "hookimpl",
]
