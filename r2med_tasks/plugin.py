"""Everything a plugin author needs, in one namespace: ``from r2med_tasks.plugin import ...``.

The hook marker and specs a plugin registers, the protocols its components implement, what every
call receives (the context, typed options, task data), errors, model references, what an LLM
answers, fusion and scoring, files for a component's caches, and R2MED's tasks.
docs/writing-plugins.md ("The plugin API") documents each name, and a test fails when a name is
missing from either. Two other places complete it: :mod:`r2med_tasks.llm` for the authors of LLM
and embedding-API backends, and :mod:`r2med_tasks.testing` for a plugin's own tests. Importing it
is cheap: no torch, no numpy.
"""

from .components.context import Context
from .components.fusion_options import FusionOptions
from .components.hookspecs import hookimpl
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
from .tasks.datafiles import GENERATED_FILE, read_jsonl
from .tasks.specs import R2MED_TASKS, SAMPLE_TASK, TaskSpec
from .tasks.taskdata import Corpus, Query

__all__ = [
    # registering: the hook marker and the specs
    "hookimpl", "RetrieverSpec", "RewriterSpec", "RerankerSpec", "LLMSpec", "TaskSpec",
    # what components implement
    "Retriever", "Rewriter", "Reranker",
    # what they receive
    "Context", "Options", "Identified", "file_content", "Price", "Query", "Corpus", "Run",
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
    "R2MED_TASKS", "SAMPLE_TASK", "read_jsonl", "GENERATED_FILE",
]
