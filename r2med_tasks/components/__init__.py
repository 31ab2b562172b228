"""The component contract, module by module: what a plugin registers and creates (``specs``), the
hooks (``hookspecs``), the context of every call (``context``), options (``options``, and
``fusion_options`` for a composite that fuses its members' runs), model references
(``model_refs``) and a searcher for agents (``searcher``). Plugin authors import all of it from one
place, :mod:`r2med_tasks.plugin`.

``r2med_tasks.components`` itself names the specs and protocols, as it did when it was one module.
"""

from .specs import ComponentSpec, LLMSpec, Reranker, RerankerSpec, Retriever, RetrieverSpec, Rewriter, RewriterSpec

__all__ = ["ComponentSpec", "LLMSpec", "Reranker", "RerankerSpec", "Retriever", "RetrieverSpec", "Rewriter",
           "RewriterSpec"]
