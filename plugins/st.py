"""``st``: any sentence-transformers model, cosine similarity, exact top-k.

Torch and the model load on the first ``index`` call, never at registration.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from r2med_tasks.components import RetrieverSpec
from r2med_tasks.errors import UserError
from r2med_tasks.hookspecs import hookimpl


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="st",
        factory="r2med_plugins.st:SentenceTransformerRetriever",
        aliases=("sentence-transformers",),
        description="Any sentence-transformers model (hub name or local folder); cosine similarity, exact top-k.",
        options={"model": "sentence-transformers/all-MiniLM-L6-v2", "revision": None, "name": None,
                 "query_prompt": "", "doc_prompt": "", "max_length": 0, "batch_size": 32, "device": ""},
        option_help={
            "model": "hub name or local folder of a sentence-transformers model",
            "revision": "hub commit to load (default: the newest); for a local folder, a label",
            "name": "org/name to file results under (default: the hub name, or local/<folder>)",
            "query_prompt": "text put before every query", "doc_prompt": "text put before every document",
            "max_length": "max tokens per text (0: the model's own limit)",
            "batch_size": "texts per encoding batch", "device": "cpu, cuda, cuda:N (default: best available)",
        },
        runtime_options=("batch_size", "device"),
        model_options=("model", "revision", "name"),
        reference="https://www.sbert.net",
    ))


def exact_top_k(query_emb, doc_emb, k: int, chunk: int = 256) -> list[list[tuple[int, float]]]:
    """Top-k documents per query by dot product; ties go to the lower document index."""
    from r2med_tasks.ranking import rank_top_k

    out = []
    for start in range(0, query_emb.shape[0], chunk):
        out.extend(rank_top_k(row, k) for row in query_emb[start:start + chunk] @ doc_emb.T)
    return out


def local_model_identity(path: Path) -> tuple[str, str]:
    """Name and revision of a model folder: the hub's when it is a hub cache snapshot,
    else ``local/<folder>`` and a fingerprint of its files."""
    parts = path.resolve().parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/", 1), parts[-1]
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path)}:{f.stat().st_size}\n".encode())
        if f.suffix == ".json":
            h.update(f.read_bytes())
    folder = path.name if path.name not in ("model", "models") else path.parent.name
    return f"local/{folder}", "local-" + h.hexdigest()[:12]


class SentenceTransformerRetriever:
    def __init__(self, model: str, revision: str | None, name: str | None, query_prompt: str, doc_prompt: str,
                 max_length: int, batch_size: int, device: str) -> None:
        self.model_ref, self.revision, self.name = model, revision, name
        self.query_prompt, self.doc_prompt = query_prompt, doc_prompt
        self.max_length, self.batch_size, self.device = max_length, batch_size, device or None
        self._path: Path | None = None
        self._model = None
        self._doc_ids: list[str] = []
        self._doc_emb = None

    def _resolve(self) -> tuple[Path, str, str]:
        """Local folder, name and revision of the model; downloads a hub model if needed."""
        path = Path(self.model_ref).expanduser()
        if path.is_dir():
            name, revision = local_model_identity(path)
            return path, self.name or name, self.revision or revision
        if self.model_ref.count("/") != 1 or path.suffix or self.model_ref.startswith((".", "/", "~")):
            raise UserError(f"st: model {self.model_ref!r} is neither a folder nor a hub name (org/name)")
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(self.model_ref, revision=self.revision))
        except Exception as e:
            raise UserError(f"st: cannot get model {self.model_ref} from the hub or its cache "
                            f"({type(e).__name__}); pass -o model=PATH to a local copy") from None
        return folder, self.name or self.model_ref, folder.name

    def model_meta(self) -> dict:
        self._path, name, revision = self._resolve()
        return {"name": name, "revision": revision, "framework": ["Sentence Transformers", "PyTorch"],
                "similarity_fn_name": "cosine", "use_instructions": bool(self.query_prompt or self.doc_prompt),
                "open_weights": True}

    def _load(self):
        if self._model is None:
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()

            if self._path is None:
                self.model_meta()
            self._model = SentenceTransformer(str(self._path), device=self.device)
            if self.max_length:
                self._model.max_seq_length = self.max_length
        return self._model

    def _encode(self, texts: list[str], prompt: str):
        return self._load().encode(texts, batch_size=self.batch_size, prompt=prompt or None,
                                   convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)

    def index(self, corpus, *, task) -> None:
        self._doc_ids = corpus.ids
        self._doc_emb = self._encode(corpus.texts, self.doc_prompt)

    def search(self, queries, *, task, top_k: int) -> dict[str, dict[str, float]]:
        query_emb = self._encode([q.text for q in queries], self.query_prompt)
        hits = exact_top_k(query_emb, self._doc_emb, top_k)
        return {q.id: {self._doc_ids[i]: s for i, s in row} for q, row in zip(queries, hits)}
