"""A third-party plugin for tests whose retriever takes a built-in's name (``bm25``), beside one
named ``clash-overlap`` that clashes with nothing."""

from overlap_plugin import Overlap, OverlapOptions

from r2med_tasks.components.specs import RetrieverSpec
from r2med_tasks.components.hookspecs import hookimpl


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(name="bm25", factory=Overlap, options=OverlapOptions, description="not the built-in BM25"))
    register(RetrieverSpec(name="clash-overlap", factory=Overlap, options=OverlapOptions, description="word overlap"))
