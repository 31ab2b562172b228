"""Everything a plugin author needs, in one namespace, so the core behind it can move freely.
:mod:`r2med_tasks.llm` completes it for LLM and embedding-API backends, :mod:`r2med_tasks.testing`
for a plugin's own tests. Importing it is cheap: no torch, no numpy.
"""

from .components.api_options import APIOptions
from .components.context import Context
from .components.fusion_options import FusionOptions
from .components.hookspecs import hookimpl
from .components.llm_options import LLMOptions
from .components.model_refs import ModelRef
from .components.options import Identified, Options, file_content
from .components.specs import LLMSpec, Reranker, RerankerSpec, Retriever, RetrieverSpec, Rewriter, RewriterSpec
from .errors import PluginError, UserError
from .files import atomic
from .files.journal import Journal
from .llm.answers import Generation
from .llm.messages import Turn
from .llm.specs import LLMRef
from .llm.usage import Price
from .results.saved_runs import SavedRuns
from .scoring.evaluation import score
from .scoring.fusion import fuse
from .scoring.runs import DEFAULT_TOP_K, Run
from .tasks.datafiles import GENERATED_FILE, generated_rows, parse_jsonl, read_jsonl
from .tasks.specs import R2MED_TASKS, SAMPLE_TASK, TaskSpec
from .tasks.taskdata import Corpus, Query

__all__ = [
    # registering: the hook marker and the specs
    "hookimpl", "RetrieverSpec", "RewriterSpec", "RerankerSpec", "LLMSpec", "TaskSpec",
    # what components implement
    "Retriever", "Rewriter", "Reranker",
    # what they receive
    "Context", "Options", "APIOptions", "LLMOptions", "Identified", "file_content", "Price", "Query", "Corpus", "Run",
    # errors
    "UserError", "PluginError",
    # models
    "ModelRef",
    # what an LLM answers
    "Generation", "Turn", "LLMRef",
    # retrieval
    "fuse", "FusionOptions", "score", "SavedRuns", "DEFAULT_TOP_K",
    # files for a component's caches
    "atomic", "Journal",
    # R2MED's tasks, and the generations their authors published
    "R2MED_TASKS", "SAMPLE_TASK", "read_jsonl", "parse_jsonl", "GENERATED_FILE", "generated_rows",
]
