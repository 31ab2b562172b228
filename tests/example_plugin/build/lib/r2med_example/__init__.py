"""A third-party r2med plugin: registers the ``tfidf`` retriever (docs/writing-plugins.md)."""

from r2med_tasks import RetrieverSpec, hookimpl


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="tfidf",
        factory="r2med_example.tfidf:TfidfRetriever",  # imported only when selected
        description="TF-IDF cosine over lower-cased words (an example plugin)",
        options={"sublinear": False},
    ))
