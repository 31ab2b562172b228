"""``st``: any sentence-transformers model through the dense retriever. Torch and the model load
on the first ``index`` call, never at registration.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from r2med_tasks.plugin import RetrieverSpec
from r2med_tasks.plugin import UserError
from r2med_tasks.plugin import ModelRef, Options


RAY_ACTORS_OPTION = (int, Field(0, ge=0, le=1024, description="encode the corpus on N Ray actors, one per GPU (pip install "
                                                     "'r2med[ray]'; the cluster of RAY_ADDRESS, else a local one); "
                                                     "0: in this process"))


class SentenceTransformerOptions(Options):
    """``st``'s options; ``model`` may also be a model object, handed to the Python API."""

    model: str = Field("sentence-transformers/all-MiniLM-L6-v2",
                       description="hub name or local folder of a sentence-transformers model")
    revision: str | None = Field(None, description="hub commit to load (default: the newest); for a local folder, "
                                                   "a label")
    name: str | None = Field(None, description="org/name to file results under (default: the hub name, or "
                                               "local/<folder>)")
    query_prompt: str = Field("", description="text put before every query")
    doc_prompt: str = Field("", description="text put before every document")
    max_length: int | None = Field(None, ge=1, le=1_048_576,
                                   description="max tokens per text (default: the model's own limit)")
    drop_identical_ids: bool = Field(False, description="drop a document whose id equals the query id (R2MED's "
                                                        "evaluator did)")
    batch_size: int = Field(32, ge=1, description="texts per encoding batch")
    device: str = Field("", description="cpu, cuda, cuda:N, or cuda:0,cuda:1 for several GPUs (default: best "
                                        "available)")
    cache: bool = Field(True, description="keep corpus embeddings on disk (under --cache-dir) and reuse them")
    chunk_size: int = Field(8192, ge=1, description="documents per cached chunk (a killed run resumes from the "
                                                    "last chunk)")
    ray_actors: int = RAY_ACTORS_OPTION[1]

    @field_validator("model", mode="wrap")
    @classmethod
    def model_object(cls, value, handler):
        """A model object handed to ``r2med_tasks.evaluate`` (no command line can) stands for the model."""
        return value if hasattr(value, "encode") and not isinstance(value, str) else handler(value)


def register_st(register):
    register(RetrieverSpec(
        name="st",
        factory=STFactory(),
        aliases=("sentence-transformers",),
        description="Any sentence-transformers model (hub name or local folder); cosine similarity, exact top-k.",
        options=SentenceTransformerOptions,
        runtime_options=("batch_size", "device", "cache", "chunk_size", "ray_actors"),
        model_options=("model", "revision", "name"),
        reference="https://www.sbert.net",
        combines_generated=True,  # the published rule for dense retrievers
    ))


class STFactory:
    """``sentence_transformer_retriever``; ``describe_inputs`` shows the text each task's inputs
    become with the default options."""

    def __call__(self, options):
        return sentence_transformer_retriever(options)

    def __repr__(self) -> str:
        return "STFactory()"

    def describe_inputs(self, tasks) -> dict:
        from .config import PLACEHOLDER

        fields = SentenceTransformerOptions.model_fields
        query, doc = fields["query_prompt"].default, fields["doc_prompt"].default
        return {"inputs": {task.short_name: {"query": query + PLACEHOLDER, "document": doc + PLACEHOLDER,
                                             "generated": PLACEHOLDER} for task in tasks},
                "input_notes": ["with the default options: -o query_prompt=/doc_prompt= are put before every query/"
                                "document (the same for every task), as a sentence-transformers prompt; with none "
                                "given, a model whose configuration names a default prompt applies it",
                                "generated: a rewriter's generated document, without prompt"]}


def sentence_transformer_retriever(options: SentenceTransformerOptions):
    from .retriever import DenseRetriever

    if isinstance(options.model, str):  # else a model object handed to r2med_tasks.evaluate
        ModelRef(options.model, option="st.model")
    # max_length None (the model's own limit) is 0 to the model, as in its embeddings' cache identity
    st = SentenceTransformerModel(options.model, options.revision, options.name, options.query_prompt,
                                  options.doc_prompt, options.max_length or 0, options.batch_size, options.device)
    return DenseRetriever(st, cache=options.cache, chunk_size=options.chunk_size,
                          drop_identical_ids=options.drop_identical_ids, ray_actors=options.ray_actors)


class SentenceTransformerModel:
    """A sentence-transformers model with optional query and document prompts."""

    def __init__(self, model: str, revision: str | None, name: str | None, query_prompt: str, doc_prompt: str,
                 max_length: int, batch_size: int, device: str) -> None:
        self.model_ref, self.revision, self.name = model, revision, name
        self.query_prompt, self.doc_prompt = query_prompt, doc_prompt
        self.max_length, self.batch_size, self.device = max_length, batch_size, device
        self._meta: dict | None = None
        self._weights: str | None = None
        self._encoder = None

    def _resolve(self) -> tuple[Path | None, str, str]:
        """Local folder, name and revision of the model. A model object's revision is a fingerprint
        of its weights, so a changed model never reuses another's results."""
        if not isinstance(self.model_ref, str):
            card = getattr(self.model_ref, "model_card_data", None)
            name = self.name or getattr(card, "base_model", None) or f"python/{type(self.model_ref).__name__}"
            return None, name if "/" in name else f"python/{name}", self.revision or weights_fingerprint(self.model_ref)
        ref = ModelRef(self.model_ref, option="st.model")
        if ref.path.is_dir():
            name, revision = ref.identity()
            return ref.path, self.name or name, self.revision or revision
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(self.model_ref, revision=self.revision))
        except Exception as e:
            raise UserError(f"st: cannot get model {self.model_ref} from the hub or its cache "
                            f"({type(e).__name__}); pass -o st.model=PATH to a local copy") from None
        return folder, self.name or self.model_ref, folder.name

    def model_meta(self) -> dict:
        if self._meta is None:
            path, name, revision = self._resolve()
            self._meta = {"name": name, "revision": revision, "path": str(path) if path else None,
                          "framework": ["Sentence Transformers", "PyTorch"], "similarity_fn_name": "cosine",
                          "use_instructions": bool(self.query_prompt or self.doc_prompt), "open_weights": True}
        return self._meta

    def load(self) -> None:
        """The weights loaded now, so a run times loading apart from encoding."""
        load = getattr(self.encoder(), "load", None)
        if callable(load):
            load()

    def encoder(self):
        if self._encoder is None:
            from ..local_models import SentenceTransformerEncoder, parse_devices

            if isinstance(self.model_ref, str):
                self._encoder = SentenceTransformerEncoder(self.model_meta()["path"], devices=parse_devices(self.device),
                                                           batch_size=self.batch_size, max_length=self.max_length)
            else:
                self._encoder = SentenceTransformerEncoder.of_model(self.model_ref, batch_size=self.batch_size,
                                                                    max_length=self.max_length)
        return self._encoder

    def weights(self) -> str:
        """The weights by their content, never by the name results are filed under (``-o name=`` only
        labels them); the name and revision where the files cannot be hashed."""
        if self._weights is None:
            meta = self.model_meta()
            if meta["path"] is None:
                self._weights = weights_fingerprint(self.model_ref)
            else:
                try:
                    self._weights = ModelRef(meta["path"], option="st.model").weights()
                except (OSError, UserError):  # unreadable, or too many files to hash
                    self._weights = f"{meta['name']}@{meta['revision']}"
        return self._weights

    def _encoding(self) -> dict:
        """What turns a text into its embedding besides the prompt; batch size and device are left
        out, as they do not change which embedding a text gets."""
        return {"weights": self.weights(), "library": "sentence-transformers", "max_length": self.max_length,
                "normalize": True, "dtype": "fp32"}

    def document_identity(self, task) -> dict:
        return {**self._encoding(), "doc_prompt": self.doc_prompt}

    def query_identity(self, task, kind: str) -> dict:
        return {**self._encoding(), "prompt": self.query_prompt if kind == "query" else ""}

    def encode_queries(self, texts: list[str], task):
        return self.encoder().encode(texts, self.query_prompt)

    def encode_documents(self, texts: list[str], task):
        return self.encoder().encode(texts, self.doc_prompt)

    def encode_generated(self, texts: list[str], task):
        return self.encoder().encode(texts, "")  # as most published wrappers: no instruction


def weights_fingerprint(model) -> str:
    """sha256 over a torch module's parameters and buffers (names, shapes, dtypes, bytes)."""
    import hashlib

    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}\n".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return "weights-" + h.hexdigest()[:16]
