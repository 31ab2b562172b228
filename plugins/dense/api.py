"""Embedding clients for the two API models on the R2MED leaderboard: OpenAI and Voyage AI (whose
API is OpenAI-shaped), through the ``openai`` SDK and the chat client's retries. They reproduce how
the published R2MED runs prepared each text, and batch by count and by tokens.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from r2med_tasks.plugin import UserError
from r2med_tasks.llm import (
    OPENAI_BASE_URL,
    APICaller,
    Endpoint,
    RetryPolicy,
    endpoint_url,
    map_concurrently,
    no_auth_header,
    openai_base_url,
    show_url,
)
from r2med_tasks.llm import BadResponse as _BadResponse
from r2med_tasks.llm import scrub as _scrub

from .api_tokenizers import Tokenizer, load_hf_tokenizer, load_tiktoken, load_tokenizer

log = logging.getLogger(__name__)

KINDS = ("query", "document")

# The published run's re-cut of a failed batch's already-quoted texts (``threshold -= 500`` from
# 6000, for both APIs).
PUBLISHED_SHRINK_STEPS = (5500, 5000, 4500, 4000)
PUBLISHED_TIKTOKEN = "cl100k_base"


# --------------------------------------------------------------------------------------------
# Published preprocessing: R2MED/R2MED, src/utils.py, class RetrievalOPENAI (commit 45cbac5):
#
#     def encode(self, sentences, mode):
#         if self.model_name == "text-embedding-3-large":
#             sentences = [self.cut_text_openai(s) for s in sentences]    # 6000 tiktoken tokens
#         else:
#             sentences = [self.cut_text(s, 16000) for s in sentences]    # HF tokenizer
#         for start_index in range(0, len(sentences), self.batch_size):  # 64 in src/eval_bench.py
#             sentences_batch = sentences[start_index:start_index + self.batch_size]
#             texts = [json.dumps(text.replace("\n", " ")) for text in sentences_batch]
#             ... on any exception: threshold -= 500 (from 6000);
#                 texts = [self.cut_text_openai(text=t, threshold=threshold) for t in texts]
#
# So: cut the raw text to the token limit, THEN "\n" -> " ", THEN json.dumps with its defaults
# (ensure_ascii=True; the surrounding quotes are sent too). An HF tokenizer's
# ``tok(text)['input_ids']`` is ``tok.encode(text)``, so one encode/decode protocol covers both.
# --------------------------------------------------------------------------------------------
def truncate_tokens(text: str, tokenizer: Tokenizer, max_tokens: int) -> str:
    """The published ``cut_text``/``cut_text_openai``."""
    ids = tokenizer.encode(text)
    if len(ids) > max_tokens:
        return tokenizer.decode(list(ids[:max_tokens]))
    return text


def published_input(text: str, tokenizer: Tokenizer | None, max_tokens: int | None) -> str:
    """The exact string the published run sent for ``text``: cut, ``\\n`` -> space, ``json.dumps``."""
    if tokenizer is not None and max_tokens is not None:
        text = truncate_tokens(text, tokenizer, max_tokens)
    return json.dumps(text.replace("\n", " "))


# --------------------------------------------------------------------------------------------
# Errors inside a request; none leaves this module.
# --------------------------------------------------------------------------------------------
class _ContextLength(Exception):
    pass


_CONTEXT_ERROR = re.compile(r"maximum (?:context|input) length|context_length_exceeded", re.I)
_BATCH_LIMIT = re.compile(r"per request|per submitted batch|batch", re.I)


def _parse_embeddings(payload: bytes, n: int) -> np.ndarray:
    """Rows in the order of each item's ``index`` (never by position); shape (n, dim) float32."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise _BadResponse("the body is not JSON") from None
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list):
        raise _BadResponse("no 'data' list")
    if len(data) != n:
        raise _BadResponse(f"{len(data)} embeddings for {n} inputs")
    rows: list[Any] = [None] * n
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise _BadResponse(f"bad index {index!r}")
        if rows[index] is not None:
            raise _BadResponse(f"index {index} twice")
        embedding = item.get("embedding")
        if isinstance(embedding, str):  # encoding_format=base64: little-endian float32
            try:
                embedding = np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4")
            except ValueError:
                raise _BadResponse(f"embedding {index} is not base64 float32") from None
        rows[index] = embedding
    try:
        array = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError):
        raise _BadResponse("embeddings are not equal-length lists of numbers") from None
    if array.ndim != 2 or array.shape[1] == 0:
        raise _BadResponse("embeddings are not equal-length lists of numbers")
    if not np.isfinite(array).all():
        raise _BadResponse("embeddings hold NaN or infinity")
    return array


# --------------------------------------------------------------------------------------------
# The clients.
# --------------------------------------------------------------------------------------------
class _APIEncoder(Endpoint):
    """What both clients share. ``batch_tokens``: most tokens (as sent) in one request; ``None``
    batches by ``batch_size`` only, as the published run did. ``shrink_on_context_error``: the
    published re-cut on an input-too-long HTTP 400.
    """

    default_base_url = ""
    default_model = ""
    default_key_env = ""
    default_max_tokens: int | None = None
    default_batch_tokens: int | None = None
    max_batch_size = 1
    org = ""
    revisions: dict[str, str] = {}
    embed_dims: dict[str, int] = {}
    reference = ""

    def default_endpoint(self) -> str:
        return self.default_base_url

    def __init__(self, model: str | None = None, *, base_url: str | None = None, api_key_env: str | None = None,
                 max_tokens: int | None | object = ..., batch_size: int = 64, batch_tokens: int | None | object = ...,
                 concurrency: int = 4, max_retries: int | None = None, timeout: float = 60.0,
                 tokenizer: Tokenizer | str | None = None, backoff: float | None = None,
                 backoff_max: float | None = None, retry_after_max: float | None = None,
                 shrink_on_context_error: bool = True,
                 sleep: Callable[[float], None] | None = None, retry: RetryPolicy | None = None) -> None:
        """Unset options take the provider's published defaults (``default_*``)."""
        self.model = model or self.default_model
        super().__init__((base_url or self.default_endpoint()).rstrip("/"),
                         api_key_env=api_key_env or self.default_key_env, timeout=timeout, retry=retry,
                         max_retries=max_retries, backoff=backoff, backoff_max=backoff_max,
                         retry_after_max=retry_after_max, sleep=sleep)
        self.url = endpoint_url(self.base_url, "embeddings")
        self.max_tokens = self.default_max_tokens if max_tokens is ... else max_tokens
        self.batch_size = batch_size
        self.batch_tokens = self.default_batch_tokens if batch_tokens is ... else batch_tokens
        self.concurrency = concurrency
        self.shrink_on_context_error = shrink_on_context_error
        self._tokenizer_arg = tokenizer
        self._tokenizer: Tokenizer | None = None if isinstance(tokenizer, str) else tokenizer
        self._lock = threading.Lock()
        self._check_options()

    def _check_options(self) -> None:
        name = type(self).__name__
        if not isinstance(self.batch_size, int) or not 1 <= self.batch_size <= self.max_batch_size:
            raise UserError(f"{name}: batch_size must be 1..{self.max_batch_size} (the API's limit), "
                            f"got {self.batch_size!r}")
        for option in ("max_tokens", "batch_tokens"):
            value = getattr(self, option)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise UserError(f"{name}: {option} must be a positive integer or None, got {value!r}")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise UserError(f"{name}: concurrency must be a positive integer, got {self.concurrency!r}")
        self.check_endpoint(name)
        if not self.url.startswith(("http://", "https://")):
            raise UserError(f"{name}: base_url must start with http:// or https://, "
                            f"got {show_url(self.base_url)!r}")

    def __repr__(self) -> str:  # never the key: it is never kept
        return (f"{type(self).__name__}(model={self.model!r}, base_url={show_url(self.base_url)!r}, "
                f"api_key_env={self.api_key_env!r}, max_tokens={self.max_tokens!r})")

    # -- public ----------------------------------------------------------------------------------
    def model_meta(self) -> dict:
        meta = {"name": f"{self.org}/{self.model}", "revision": self.revisions.get(self.model, "api"),
                "framework": ["API"], "open_weights": False, "use_instructions": False,
                "similarity_fn_name": "cosine", "reference": self.reference}
        if self.model in self.embed_dims:
            meta["embed_dim"] = self.embed_dims[self.model]
        return meta

    def encode(self, texts: Sequence[str], *, kind: str) -> np.ndarray:
        """float32 ``(len(texts), dim)``; row ``i`` embeds ``texts[i]`` as prepared by the published run."""
        if kind not in KINDS:
            raise ValueError(f"kind must be 'query' or 'document', got {kind!r}")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise UserError(f"{type(self).__name__}.encode: text {i} is {type(t).__name__}, not str")
        if not texts:
            return np.zeros((0, self.embed_dims.get(self.model, 0)), dtype=np.float32)
        key = self._api_key()
        tokenizer = self.tokenizer() if (self.max_tokens is not None or self.batch_tokens is not None) else None
        sent = [published_input(t, tokenizer, self.max_tokens) for t in texts]
        batches = self._plan(sent, tokenizer)
        caller = self._caller()
        client = self.sdk(key)

        def run(batch: list[int], abort: threading.Event) -> np.ndarray:
            return self._embed_batch(caller, client, [sent[i] for i in batch], kind, key, abort)

        # a failing batch stops the others at their next attempt; queued ones never start
        parts = map_concurrently(run, batches, self.concurrency, name=type(self).__name__)
        dims = {p.shape[1] for p in parts}
        if len(dims) > 1:
            raise UserError(f"{show_url(self.url)} returned embeddings of different sizes {sorted(dims)} for "
                            f"{self.model}; check base_url and model")
        out = np.empty((len(texts), dims.pop()), dtype=np.float32)
        for batch, part in zip(batches, parts):
            out[batch] = part
        return out

    def tokenizer(self) -> Tokenizer:
        """The injected tokenizer, or the default loaded now (once)."""
        with self._lock:
            if self._tokenizer is None:
                arg = self._tokenizer_arg
                self._tokenizer = self._load_tokenizer(arg if isinstance(arg, str) else None)
            return self._tokenizer

    # -- internals -------------------------------------------------------------------------------
    def _load_tokenizer(self, name: str | None) -> Tokenizer:
        raise NotImplementedError

    def _create(self, client, texts: list[str], kind: str, key: str):
        """One raw ``client.embeddings`` request: the body is read here, so malformed ones are retried."""
        raise NotImplementedError

    def _api_key(self) -> str:
        return self.key(required=True, who=type(self).__name__)

    def _caller(self) -> APICaller:
        """The retry loop, from the options as they are now."""
        return self.caller(self.url, model=self.model,
                           malformed_advice="check that base_url serves an OpenAI-compatible embeddings API",
                           client_error=self._client_error, logger=log)

    def _plan(self, sent: list[str], tokenizer: Tokenizer | None) -> list[list[int]]:
        """Consecutive batches of at most ``batch_size`` inputs and ``batch_tokens`` tokens; an input
        larger than ``batch_tokens`` goes alone."""
        counts = ([len(tokenizer.encode(s)) for s in sent]
                  if self.batch_tokens is not None and tokenizer is not None else [0] * len(sent))
        batches: list[list[int]] = []
        current: list[int] = []
        tokens = 0
        for i, count in enumerate(counts):
            if current and (len(current) >= self.batch_size
                            or (self.batch_tokens is not None and tokens + count > self.batch_tokens)):
                batches.append(current)
                current, tokens = [], 0
            current.append(i)
            tokens += count
        if current:
            batches.append(current)
        return batches

    def _embed_batch(self, caller: APICaller, client, texts: list[str], kind: str, key: str,
                     abort: threading.Event) -> np.ndarray:
        """One batch, retried; on a per-input length error, the published re-cut of the whole batch."""
        steps = list(PUBLISHED_SHRINK_STEPS) if self.shrink_on_context_error else []
        while True:
            try:
                return caller.call(lambda texts=texts: self._create(client, texts, kind, key).http_response.content,
                                   lambda payload, n=len(texts): _parse_embeddings(payload, n), key=key, abort=abort)
            except _ContextLength as e:
                message = _scrub(str(e), key)
                if not steps:
                    cut = "" if self.shrink_on_context_error else " (shrink_on_context_error is off)"
                    raise UserError(f"{caller.url} rejected an input as too long (HTTP 400: {message}){cut}; "
                                    "lower max_tokens") from None
                threshold = steps.pop(0)
                log.warning("%s: HTTP 400 input too long (%s); re-cutting the batch's %d inputs to %d tokens "
                            "as the published run did", caller.url, message, len(texts), threshold)
                tokenizer = self.tokenizer()
                texts = [truncate_tokens(t, tokenizer, threshold) for t in texts]

    def _client_error(self, status: int, message: str) -> str | None:
        """Advice for a refused request; an input too long raises for the published re-cut."""
        if status == 400 and _CONTEXT_ERROR.search(message) and not _BATCH_LIMIT.search(message):
            raise _ContextLength(message)
        if status in (400, 413, 422) and _BATCH_LIMIT.search(message):
            return "lower batch_size or batch_tokens"
        return None


class OpenAIEncoder(_APIEncoder):
    """OpenAI embeddings as R2MED's published ``openai`` run made them: no instruction, 3072
    dimensions. The published loop re-cut a batch on *any* error, which is not reproducible: here
    only an input-too-long error does. Which neighbours a re-cut touches depends on batching:
    ``batch_tokens=None`` with BEIR's longest-first order gives the published batches.
    """

    default_base_url = OPENAI_BASE_URL
    default_model, default_key_env = "text-embedding-3-large", "OPENAI_API_KEY"
    default_max_tokens, default_batch_tokens = 6000, 250_000
    max_batch_size = 2048
    org = "openai"
    revisions = {"text-embedding-3-large": "3", "text-embedding-3-small": "3", "text-embedding-ada-002": "3"}
    embed_dims = {"text-embedding-3-large": 3072, "text-embedding-3-small": 1536, "text-embedding-ada-002": 1536}
    reference = "https://openai.com/index/new-embedding-models-and-api-updates/"

    def default_endpoint(self) -> str:
        """``$OPENAI_BASE_URL``, as the openai SDK reads it, else the OpenAI API."""
        return openai_base_url()

    def _load_tokenizer(self, name: str | None) -> Tokenizer:
        return load_tokenizer(name) if name else load_tiktoken(PUBLISHED_TIKTOKEN)

    def _create(self, client, texts: list[str], kind: str, key: str):
        return client.embeddings.with_raw_response.create(model=self.model, input=texts, encoding_format="float",
                                                          extra_headers=no_auth_header(key))


class VoyageEncoder(_APIEncoder):
    """Voyage AI embeddings through the OpenAI SDK, as R2MED's published ``voyage`` run made them:
    16000 tokens of the ``voyageai/voyage-3`` tokenizer, ``input_type`` query or document,
    ``truncation: true``, base64 as the voyageai client asked. (voyage-3 allows 120k tokens per
    request.)
    """

    default_base_url = "https://api.voyageai.com/v1"
    default_model, default_key_env = "voyage-3", "VOYAGE_API_KEY"
    default_max_tokens, default_batch_tokens = 16000, 100_000
    max_batch_size = 1000
    org = "mongodb"  # mteb's name for Voyage models; "voyageai/..." is a deprecated alias there
    revisions = {"voyage-3": "1"}
    embed_dims = {"voyage-3": 1024}
    reference = "https://blog.voyageai.com/2024/09/18/voyage-3/"

    def _load_tokenizer(self, name: str | None) -> Tokenizer:
        return load_tokenizer(name, hub_ok=True) if name else load_hf_tokenizer(f"voyageai/{self.model}")

    def _create(self, client, texts: list[str], kind: str, key: str):
        # no encoding_format: the SDK then asks for base64, as the voyageai client did
        return client.embeddings.with_raw_response.create(model=self.model, input=texts,
                                                          extra_body={"input_type": kind, "truncation": True},
                                                          extra_headers=no_auth_header(key))
