"""``st``: any sentence-transformers model, cosine similarity, exact top-k, cached corpus embeddings.

Torch and the model load on the first ``index`` call, never at registration.
"""

from __future__ import annotations

from pathlib import Path

from r2med_tasks.components import RetrieverSpec
from r2med_tasks.errors import UserError
from r2med_tasks.hookspecs import hookimpl

from .model_ref import local_model_identity


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="st",
        factory="r2med_plugins.st:sentence_transformer_retriever",
        aliases=("sentence-transformers",),
        description="Any sentence-transformers model (hub name or local folder); cosine similarity, exact top-k.",
        options={"model": "sentence-transformers/all-MiniLM-L6-v2", "revision": None, "name": None,
                 "query_prompt": "", "doc_prompt": "", "max_length": 0, "drop_identical_ids": False,
                 "batch_size": 32, "device": "", "cache": True, "chunk_size": 8192},
        option_help={
            "model": "hub name or local folder of a sentence-transformers model",
            "revision": "hub commit to load (default: the newest); for a local folder, a label",
            "name": "org/name to file results under (default: the hub name, or local/<folder>)",
            "query_prompt": "text put before every query", "doc_prompt": "text put before every document",
            "max_length": "max tokens per text (0: the model's own limit)",
            "drop_identical_ids": "drop a document whose id equals the query id (R2MED's evaluator did)",
            "batch_size": "texts per encoding batch",
            "device": "cpu, cuda, cuda:N, or cuda:0,cuda:1 for several GPUs (default: best available)",
            "cache": "keep corpus embeddings on disk (under --cache-dir) and reuse them",
            "chunk_size": "documents per cached chunk (a killed run resumes from the last chunk)",
        },
        runtime_options=("batch_size", "device", "cache", "chunk_size"),
        model_options=("model", "revision", "name"),
        reference="https://www.sbert.net",
    ))


def sentence_transformer_retriever(model, revision, name, query_prompt, doc_prompt, max_length,
                                   drop_identical_ids, batch_size, device, cache, chunk_size):
    from r2med_plugins.dense.retriever import DenseRetriever
    from r2med_plugins.model_ref import check_model_ref

    check_model_ref(model, option="st.model")
    st = SentenceTransformerModel(model, revision, name, query_prompt, doc_prompt, max_length, batch_size, device)
    return DenseRetriever(st, cache=cache, chunk_size=chunk_size, drop_identical_ids=drop_identical_ids)


class SentenceTransformerModel:
    """A sentence-transformers model with optional query and document prompts."""

    def __init__(self, model: str, revision: str | None, name: str | None, query_prompt: str, doc_prompt: str,
                 max_length: int, batch_size: int, device: str) -> None:
        self.model_ref, self.revision, self.name = model, revision, name
        self.query_prompt, self.doc_prompt = query_prompt, doc_prompt
        self.max_length, self.batch_size, self.device = max_length, batch_size, device
        self._meta: dict | None = None
        self._encoder = None

    def _resolve(self) -> tuple[Path, str, str]:
        """Local folder, name and revision of the model; downloads a hub model if needed."""
        path = Path(self.model_ref).expanduser()
        if path.is_dir():
            name, revision = local_model_identity(path)
            return path, self.name or name, self.revision or revision
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(self.model_ref, revision=self.revision))
        except Exception as e:
            raise UserError(f"st: cannot get model {self.model_ref} from the hub or its cache "
                            f"({type(e).__name__}); pass -o model=PATH to a local copy") from None
        return folder, self.name or self.model_ref, folder.name

    def model_meta(self) -> dict:
        if self._meta is None:
            path, name, revision = self._resolve()
            self._meta = {"name": name, "revision": revision, "path": str(path),
                          "framework": ["Sentence Transformers", "PyTorch"], "similarity_fn_name": "cosine",
                          "use_instructions": bool(self.query_prompt or self.doc_prompt), "open_weights": True}
        return self._meta

    def encoder(self):
        if self._encoder is None:
            from r2med_plugins.dense.encoders import SentenceTransformerEncoder, parse_devices

            self._encoder = SentenceTransformerEncoder(self.model_meta()["path"], devices=parse_devices(self.device),
                                                       batch_size=self.batch_size, max_length=self.max_length)
        return self._encoder

    def document_identity(self, task) -> dict:
        meta = self.model_meta()
        return {"model": meta["name"], "revision": meta["revision"], "doc_prompt": self.doc_prompt,
                "max_length": self.max_length, "normalize": True}

    def encode_queries(self, texts: list[str], task):
        return self.encoder().encode(texts, self.query_prompt)

    def encode_documents(self, texts: list[str], task):
        return self.encoder().encode(texts, self.doc_prompt)

    def encode_generated(self, texts: list[str], task):
        return self.encoder().encode(texts, "")  # as most published wrappers: no instruction
