"""Embedding clients for the two API models on the R2MED leaderboard: OpenAI and Voyage AI.

Both go through the official ``openai`` SDK (``client.embeddings.create``; Voyage's API is
OpenAI-shaped, so it is the same client with base_url https://api.voyageai.com/v1 and Voyage's
``input_type``/``truncation`` in ``extra_body``), built and retried by the code the chat client
uses (each encoder is an ``r2med_tasks.llm.Endpoint``: ``openai_client`` and ``APICaller``):
``POST {base_url}/embeddings``, a Bearer key read from an environment variable, a JSON
``{"data": [{"index", "embedding"}, ...]}`` answer (read here, so malformed ones are retried). On
top of that they reproduce how the published R2MED runs prepared each text (token cut, newline
replacement, ``json.dumps`` quoting; see ``published_input``; the tokenizers: ``api_tokenizers``),
batch by count and by tokens, send batches from a small thread pool, and retry what is worth
retrying.

The dense retriever calls ``encode(texts, kind="query"|"document")`` and ``model_meta()``.
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

# What the published run did after a failed request (``threshold -= 500`` from 6000, at most four
# times, for both APIs): re-cut every already-quoted text of the batch to this many tokens.
PUBLISHED_SHRINK_STEPS = (5500, 5000, 4500, 4000)
# The published OpenAI run's tokenizer (``tiktoken.get_encoding("cl100k_base")``).
PUBLISHED_TIKTOKEN = "cl100k_base"


# --------------------------------------------------------------------------------------------
# Published preprocessing.
#
# Source: R2MED/R2MED, src/utils.py, class RetrievalOPENAI, as read at commit 45cbac5 (the one version
# I could read; the spec cites HEAD 62b7074) and spec section 2.2 rows openai/voyage, section 6 item 14:
#
#     self.tokenizer = tiktoken.get_encoding("cl100k_base")                     # OpenAI
#     self.tokenizer = AutoTokenizer.from_pretrained(f'./voyageai/{model_name_or_path}')  # Voyage
#
#     def cut_text(self, text, threshold):                       # Voyage (HF tokenizer)
#         text_ids = self.tokenizer(text)['input_ids']
#         if len(text_ids) > threshold:
#             text = self.tokenizer.decode(text_ids[:threshold])
#         return text
#     def cut_text_openai(self, text, threshold=6000):           # OpenAI (tiktoken)
#         token_ids = self.tokenizer.encode(text)
#         if len(token_ids) > threshold:
#             text = self.tokenizer.decode(token_ids[:threshold])
#         return text
#
#     def encode(self, sentences, mode):
#         if self.model_name == "text-embedding-3-large":
#             sentences = [self.cut_text_openai(s) for s in sentences]
#         else:
#             sentences = [self.cut_text(s, 16000) for s in sentences]
#         for start_index in range(0, len(sentences), self.batch_size):
#             # batch_size=64: RetrievalOPENAI(model_name_or_path=..., batch_size=64) in src/eval_bench.py
#             # (45cbac5) and in init_model of the later src/eval_retrieval.py (class default: 128)
#             sentences_batch = sentences[start_index:start_index + self.batch_size]
#             texts = [json.dumps(text.replace("\n", " ")) for text in sentences_batch]
#             ... on any exception: threshold -= 500 (from 6000);
#                 texts = [self.cut_text_openai(text=t, threshold=threshold) for t in texts]
#
# So the order is: cut the raw text (newlines included) to the token limit, THEN replace "\n" by
# " ", THEN json.dumps with its defaults (ensure_ascii=True: "é" is sent as the six characters
# \u00e9; quotes, backslashes, "\r" and "\t" are escaped; the surrounding quotes are sent too).
# For an HF tokenizer ``tok(text)['input_ids']`` is ``tok.encode(text)`` (special tokens added,
# and kept by ``decode``), so one encode/decode protocol covers both tokenizers.
# --------------------------------------------------------------------------------------------
def truncate_tokens(text: str, tokenizer: Tokenizer, max_tokens: int) -> str:
    """``cut_text``/``cut_text_openai``: the text unchanged when it fits, else its first tokens decoded."""
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
    """What both clients share: an ``Endpoint`` (base URL, key variable, timeout, retries), and
    options beyond the dense retriever's interface:

    - ``batch_tokens``: most tokens (of the strings as sent, counted with ``tokenizer``) in one
      request; ``None`` batches by ``batch_size`` only, as the published run did.
    - ``backoff``/``backoff_max``: retry ``n`` waits ``min(backoff_max, backoff * 2**(n-1))`` seconds
      times a random 0.5..1 (jitter); a ``Retry-After``/``retry-after-ms`` header wins, capped at
      ``retry_after_max`` (unset ones, and ``max_retries``, from ``retry=`` or else
      ``r2med_tasks.llm.endpoint.DEFAULT_RETRY``: 6 retries, 1 s doubling to 30 s, ``Retry-After``
      up to 60 s).
    - ``shrink_on_context_error``: the published re-cut on an input-too-long HTTP 400.
    - ``sleep``: called with each wait instead of sleeping (tests); by default the wait ends early
      when another batch has failed.
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
        """The server used when none is given."""
        return self.default_base_url

    def __init__(self, model: str | None = None, *, base_url: str | None = None, api_key_env: str | None = None,
                 max_tokens: int | None | object = ..., batch_size: int = 64, batch_tokens: int | None | object = ...,
                 concurrency: int = 4, max_retries: int | None = None, timeout: float = 60.0,
                 tokenizer: Tokenizer | str | None = None, backoff: float | None = None,
                 backoff_max: float | None = None, retry_after_max: float | None = None,
                 shrink_on_context_error: bool = True,
                 sleep: Callable[[float], None] | None = None, retry: RetryPolicy | None = None) -> None:
        """Unset ``model``, ``api_key_env``, ``max_tokens`` and ``batch_tokens`` take the provider's
        published defaults (the class's ``default_*``)."""
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

    def __repr__(self) -> str:  # never the key: it is read from the environment per call, never kept
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
        """One ``client.embeddings`` request (raw: the body is read by ``_parse_embeddings``)."""
        raise NotImplementedError

    def _api_key(self) -> str:
        return self.key(required=True, who=type(self).__name__)

    def _caller(self) -> APICaller:
        """The shared retry loop (``r2med_tasks.llm.APICaller``), from the options as they are now."""
        return self.caller(self.url, model=self.model,
                           malformed_advice="check that base_url serves an OpenAI-compatible embeddings API",
                           client_error=self._client_error, logger=log)

    def _plan(self, sent: list[str], tokenizer: Tokenizer | None) -> list[list[int]]:
        """Consecutive batches of at most ``batch_size`` inputs and ``batch_tokens`` tokens (as sent).

        An input larger than ``batch_tokens`` on its own goes alone.
        """
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
        """A refused request (4xx other than 408/429; ``message`` is scrubbed): not retried."""
        if status == 400 and _CONTEXT_ERROR.search(message) and not _BATCH_LIMIT.search(message):
            raise _ContextLength(message)
        if status in (400, 413, 422) and _BATCH_LIMIT.search(message):
            return "lower batch_size or batch_tokens"
        return None  # r2med_tasks.llm.default_fix: 401 "check <env>", 403, 404, ...


class OpenAIEncoder(_APIEncoder):
    """OpenAI embeddings (``client.embeddings.create``), or any OpenAI-compatible server.

    Reproduces R2MED's published ``openai`` run (``src/utils.py``, ``RetrievalOPENAI``):

    - each text is cut to its first 6000 tiktoken ``cl100k_base`` tokens (decoded back to text),
      then ``"\\n"`` becomes ``" "``, then the text is ``json.dumps``-quoted (default
      ``ensure_ascii=True``), and that quoted string is what is embedded (``published_input``);
    - no instruction, for queries and documents alike; the full 3072 dimensions;
    - when the API rejects an input as too long (HTTP 400 "maximum context length"), the batch's
      quoted texts are re-cut to 5500, 5000, 4500, then 4000 tokens, as the published retry loop did
      (``shrink_on_context_error``; the published loop did that on *any* error, which is not
      reproducible, so transient errors are retried unchanged here).

    Batches are 64 inputs as published, and also at most ``batch_tokens`` tokens (OpenAI caps a
    request at 300k tokens). Embeddings do not depend on batching, but which neighbours a re-cut
    touches does: ``batch_tokens=None`` with texts in the published order (BEIR's longest-first
    corpus order) gives the published batches.

    Not reproduced: the published run went through a third-party proxy with the ``openai`` SDK
    (recent SDKs ask for base64, which decodes to the same float32 values; this asks for
    ``encoding_format="float"``).

    ``tokenizer``: an object with ``encode(str) -> list[int]`` and ``decode(list[int]) -> str``, or a
    string (``load_tokenizer``): a tiktoken encoding name, a local tokenizer.json, or a local Hugging
    Face tokenizer folder; default tiktoken's cl100k_base, loaded on first use. ``max_tokens=None``
    sends texts uncut. The key is read from ``api_key_env`` on every ``encode`` and never stored.
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
        """``$OPENAI_BASE_URL`` as the openai SDK reads it, else the OpenAI API."""
        return openai_base_url()

    def _load_tokenizer(self, name: str | None) -> Tokenizer:
        return load_tokenizer(name) if name else load_tiktoken(PUBLISHED_TIKTOKEN)

    def _create(self, client, texts: list[str], kind: str, key: str):
        return client.embeddings.with_raw_response.create(model=self.model, input=texts, encoding_format="float",
                                                          extra_headers=no_auth_header(key))


class VoyageEncoder(_APIEncoder):
    """Voyage AI embeddings (``POST https://api.voyageai.com/v1/embeddings``, through the OpenAI SDK).

    Reproduces R2MED's published ``voyage`` run (``src/utils.py``, ``RetrievalOPENAI`` with a
    ``voyageai.Client``):

    - each text is cut to its first 16000 tokens of the Hugging Face tokenizer ``voyageai/voyage-3``
      (``AutoTokenizer``; ``tok(text)["input_ids"]`` then ``tok.decode``, special tokens as that
      tokenizer adds them), then ``"\\n"`` becomes ``" "``, then ``json.dumps`` (``published_input``);
    - ``input_type`` is ``"query"`` or ``"document"``; ``truncation: true`` as the SDK sends it;
      ``encoding_format: "base64"`` (little-endian float32), which the voyageai client asked for
      too when given no format, and the OpenAI SDK sends when given none; no instruction;
    - on HTTP 400 "maximum ... length" the batch is re-cut to 5500..4000 tokens, as published (the
      published loop started that countdown at 6000 for Voyage too).

    Batches are 64 inputs as published (the API allows 1000), and at most ``batch_tokens`` tokens
    (voyage-3 allows 120k per request). ``tokenizer``: an object with ``encode``/``decode``, or a
    string (``load_tokenizer``): a local tokenizer.json or Hugging Face tokenizer folder, a tiktoken
    encoding name, or else a hub id for ``AutoTokenizer``; default ``voyageai/voyage-3``, loaded on
    first use.
    """

    default_base_url = "https://api.voyageai.com/v1"
    default_model, default_key_env = "voyage-3", "VOYAGE_API_KEY"
    default_max_tokens, default_batch_tokens = 16000, 100_000
    max_batch_size = 1000
    org = "mongodb"  # mteb's current name for Voyage models; "voyageai/..." is a deprecated alias there
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
