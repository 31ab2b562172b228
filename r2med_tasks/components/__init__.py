"""The component contract: what a plugin registers and creates, and what every call is handed.
Plugin authors import it from one place, :mod:`r2med_tasks.plugin`."""

from .specs import ComponentSpec, LLMSpec, Reranker, RerankerSpec, Retriever, RetrieverSpec, Rewriter, RewriterSpec

__all__ = ["ComponentSpec", "LLMSpec", "Reranker", "RerankerSpec", "Retriever", "RetrieverSpec", "Rewriter",
           "RewriterSpec"]
