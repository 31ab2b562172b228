"""A third-party r2med plugin: registers the ``tfidf`` retriever (docs/writing-plugins.md)."""

from pydantic import Field

from r2med_tasks.plugin import Options, RetrieverSpec, hookimpl


class TfidfOptions(Options):
    """Each field is an ``-o`` option: its type, default, bounds and help (``r2med plugins tfidf``)."""

    sublinear: bool = Field(False, description="1 + log(tf) instead of raw term counts")
    min_df: int = Field(1, ge=1, description="ignore words found in fewer documents than this")


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="tfidf",
        factory="r2med_example.tfidf:TfidfRetriever",  # imported only when selected
        description="TF-IDF cosine over lower-cased words (an example plugin)",
        options=TfidfOptions,
    ))
