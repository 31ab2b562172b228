"""LLM clients for components, as plugin authors import them (``from r2med_tasks.llm import ...``):
every name in ``__all__``, from the modules that define them, in the order they import each other:

- ``secrets``: keys from the environment, never shown (``api_key``, ``scrub``, ``redact``,
  ``show_url`` on ``mask_urls``, the one rule for what of a URL may be shown);
- ``endpoint``: an OpenAI-compatible API as a client holds it (``Endpoint``: base URL, key
  variable, timeout, retries), the one place an ``openai.OpenAI`` is built (``openai_client``),
  the retry loop (``APICaller``, ``RetryPolicy``, ``RetryLine``) and ``map_concurrently``; shared
  with the embedding clients (``r2med_plugins.dense.api``). Its ``DEFAULT_RETRY`` is read there
  (tests patch ``r2med_tasks.llm.endpoint.DEFAULT_RETRY``), so it is not re-exported here;
- ``specs``: ``-o llm=`` specs (``parse_llm_spec``, ``llm_model_name``, ``llm_identity``);
- ``answers``: ``Generation``, one completion, as ``parse_chat_completion`` and
  ``parse_continuation`` read it from a server's answer;
- ``usage``: ``Usage``, requests, cache hits, tokens and dollars; the shipped price table;
- ``messages``: what a client is asked: ``Turn``, ``PreparedTurn``, ``SAMPLING_PARAMS``,
  ``EXTRA_BODY_PARAMS``;
- ``served``: ``ServedModel``, what a server says it serves (``GET /models``);
- ``protocols``: what a component calls (``LLMClient``; ``ContinuesTurns`` for agents);
- ``template``: a chat template rendered here (``ChatTemplate``, used by ``ChatClient``);
- ``chat``: ``ChatClient``;
- ``cache``: ``GenerationCache``, ``generate_cached``, ``continue_cached``;
- ``records``: what an LLM wrote for one query, as a component hands it to ``context.generated``
  (``record``), and a reasoning model's whole text from an answer whose thinking came apart
  (``whole_text``, ``joined_text``).

Importing this package imports no ``openai``/``httpx``.
"""

from .answers import Generation, parse_chat_completion, parse_continuation
from .cache import CACHE_VERSION, GenerationCache, continue_cached, generate_cached, key_for, turn_key
from .chat import ChatClient
from .endpoint import (
    OLLAMA_BASE_URL,
    OPENAI_BASE_URL,
    VLLM_BASE_URL,
    Aborted,
    APICaller,
    BadResponse,
    Endpoint,
    RetryLine,
    RetryPolicy,
    ShowsRetries,
    check_base_url,
    default_fix,
    endpoint_url,
    map_concurrently,
    no_auth_header,
    openai_base_url,
    openai_client,
    retry_after,
    retry_policy,
    server_message,
)
from .messages import EXTRA_BODY_PARAMS, SAMPLING_PARAMS, PreparedTurn, Turn
from .protocols import ContinuesTurns, LLMClient
from .records import joined_text, record, whole_text
from .secrets import HARMLESS_QUERY_PARAMS, KEY_LIKE, api_key, mask_urls, redact, scrub, show_url, url_secrets
from .served import ServedModel
from .specs import SPEC_FORMS, llm_identity, llm_model_name, parse_llm_spec
from .usage import PRICE_HELP, Usage, cost, dollars, price_field, price_of, price_table, usd_text

__all__ = [
    # secrets
    "HARMLESS_QUERY_PARAMS", "KEY_LIKE", "api_key", "mask_urls", "redact", "scrub", "show_url", "url_secrets",
    # endpoint
    "OLLAMA_BASE_URL", "OPENAI_BASE_URL", "VLLM_BASE_URL", "Aborted", "APICaller", "BadResponse", "Endpoint",
    "RetryLine", "RetryPolicy", "ShowsRetries", "check_base_url", "default_fix", "endpoint_url", "map_concurrently",
    "no_auth_header", "openai_base_url", "openai_client", "retry_after", "retry_policy", "server_message",
    # specs
    "SPEC_FORMS", "llm_identity", "llm_model_name", "parse_llm_spec",
    # answers
    "Generation", "parse_chat_completion", "parse_continuation",
    # usage
    "PRICE_HELP", "Usage", "cost", "dollars", "price_field", "price_of", "price_table", "usd_text",
    # messages
    "EXTRA_BODY_PARAMS", "SAMPLING_PARAMS", "PreparedTurn", "Turn",
    # served
    "ServedModel",
    # protocols
    "ContinuesTurns", "LLMClient",
    # chat
    "ChatClient",
    # cache
    "CACHE_VERSION", "GenerationCache", "continue_cached", "generate_cached", "key_for", "turn_key",
    # records
    "joined_text", "record", "whole_text",
]
