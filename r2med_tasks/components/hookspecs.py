"""The hooks a plugin implements. Every hook receives a ``register`` callback and returns nothing.

A plugin registers cheap specs (names, options, a factory); models load only when a run selects
them. An implementation may accept any subset of a hook's arguments.
"""

import pluggy

hookspec = pluggy.HookspecMarker("r2med")
hookimpl = pluggy.HookimplMarker("r2med")


@hookspec
def register_retrievers(register):
    """Register first-stage retrievers: call ``register(RetrieverSpec(...))`` once per retriever."""


@hookspec
def register_rewriters(register):
    """Register query rewriters (HyDE, Query2Doc, LameR...): ``register(RewriterSpec(...))``."""


@hookspec
def register_rerankers(register):
    """Register rerankers applied to a retriever's top-k: ``register(RerankerSpec(...))``."""


@hookspec
def register_tasks(register):
    """Register evaluation tasks (a corpus, queries, judgments): ``register(TaskSpec(...))``."""


@hookspec
def register_llms(register):
    """Register LLM backends rewriters and rerankers call: ``register(LLMSpec(...))``, named by the
    prefix of ``-o llm=PREFIX:MODEL`` (``http``/``https`` take ``BASE_URL#MODEL``)."""
