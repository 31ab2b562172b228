"""The component contract, module by module: what a plugin registers and creates (``specs``), the
hooks (``hookspecs``), the context of every call (``context``), options (``options``), model
references (``model_refs``), and what components build on: query combination (``combine``), a
searcher for agents (``searcher``) and local-model helpers (``encoders``). Plugin authors import
all of it from one place, :mod:`r2med_tasks.plugin`.

``r2med_tasks.components`` itself names the specs and protocols, as it did when it was one module.
"""

from .specs import (CombinesGenerated, ComponentSpec, Composite, DeclaresResources, DescribesModel, LLMSpec,
                    RerankDepth, Reranker, RerankerSpec, ReportsUsage, Retriever, RetrieverSpec, Rewriter,
                    RewriterSpec, combines_generated)

__all__ = ["CombinesGenerated", "ComponentSpec", "Composite", "DeclaresResources", "DescribesModel", "LLMSpec",
           "RerankDepth", "Reranker", "RerankerSpec", "ReportsUsage", "Retriever", "RetrieverSpec", "Rewriter",
           "RewriterSpec", "combines_generated"]
