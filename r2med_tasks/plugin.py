"""Everything a plugin author needs, in one namespace: ``from r2med_tasks.plugin import ...``.

The hook marker and specs a plugin registers, the protocols its components implement, the context
every call receives, typed options, task data, errors, model references, the LLM client, and the
helpers the built-in plugins share (top-k, query combination, fusion, scoring, local models,
atomic files). docs/writing-plugins.md ("The plugin API") documents each name, and a test fails
when a name is missing from either. Two other places complete it: :mod:`r2med_tasks.llm` for the
HTTP machinery of API backends (endpoints, retries, concurrency) and :mod:`r2med_tasks.testing`
for a plugin's own tests. Importing it is cheap: torch loads only when a local model runs.
"""

from .components.combine import GAR_METHODS, RETRIEVER_FAMILIES, bm25_query, combined_text, dense_query
from .components.context import CompositeContext, Context
from .components.encoders import (SentenceTransformerEncoder, length_sorted_batches, parse_devices, quiet_transformers,
                                  run_batches, torch_dtype)
from .components.hookspecs import hookimpl
from .components.model_refs import check_model_ref, local_model_identity, model_identity, weights_identity
from .components.options import Identified, Options, file_content, options_model
from .components.searcher import Searcher
from .components.specs import (CombinesGenerated, Composite, DeclaresResources, DescribesModel, LLMSpec, RerankDepth,
                               Reranker, RerankerSpec, ReportsUsage, Retriever, RetrieverSpec, Rewriter, RewriterSpec)
from .errors import PluginError, UserError, reason
from .files import atomic
from .files.journal import Journal
from .llm import (ChatClient, Generation, GenerationCache, ShowsRetries, Turn, Usage, continue_cached, generate_cached,
                  joined_text, llm_identity, llm_model_name, map_concurrently, parse_llm_spec, price_field, record,
                  whole_text)
from .results.layout import results_folder_of, run_name, slug
from .scoring.evaluation import score
from .scoring.fusion import DEFAULT_DEPTH, DEFAULT_METHOD, DEFAULT_RRF_K, FUSION_METHODS, fuse
from .scoring.ranking import rank_top_k, top_k_indices
from .scoring.runs import DEFAULT_TOP_K, Run, read_trec
from .tasks.datafiles import GENERATED_FILE, read_jsonl
from .tasks.specs import R2MED_TASKS, SAMPLE_TASK, TaskSpec, normalize
from .tasks.taskdata import Corpus, Query

__all__ = [
    # registering: the hook marker and the specs
    "hookimpl", "RetrieverSpec", "RewriterSpec", "RerankerSpec", "LLMSpec",
    # what components implement
    "Retriever", "Rewriter", "Reranker", "Composite", "CombinesGenerated", "DeclaresResources", "DescribesModel",
    "RerankDepth", "ReportsUsage",
    # what they receive
    "Context", "CompositeContext", "Options", "options_model", "Identified", "file_content",
    "Query", "Corpus", "Run", "TaskSpec", "R2MED_TASKS", "SAMPLE_TASK", "normalize", "read_jsonl", "GENERATED_FILE",
    # errors
    "UserError", "PluginError", "reason",
    # models
    "check_model_ref", "model_identity", "local_model_identity", "weights_identity",
    "SentenceTransformerEncoder", "parse_devices", "torch_dtype", "run_batches", "length_sorted_batches",
    "quiet_transformers",
    # the LLM client
    "ChatClient", "parse_llm_spec", "llm_identity", "llm_model_name", "Generation", "GenerationCache", "Turn",
    "Usage", "generate_cached", "continue_cached", "record", "whole_text", "joined_text", "price_field",
    "ShowsRetries", "map_concurrently",
    # retrieval helpers
    "top_k_indices", "rank_top_k", "Searcher", "bm25_query", "dense_query", "combined_text", "GAR_METHODS",
    "RETRIEVER_FAMILIES", "DEFAULT_TOP_K", "fuse", "FUSION_METHODS", "DEFAULT_METHOD", "DEFAULT_RRF_K", "DEFAULT_DEPTH", "score",
    "read_trec", "results_folder_of", "run_name", "slug",
    # files
    "atomic", "Journal",
]
