"""What an LLM or embedding-API backend's author needs beyond :mod:`r2med_tasks.plugin`: a chat
client, an OpenAI-compatible endpoint with its retries, and what may be shown of a key or a URL.

The rest of the package is the core's own, imported from its modules. Importing this package
imports no ``openai``/``httpx``.
"""

from .chat import ChatClient
from .endpoint import (OPENAI_BASE_URL, APICaller, BadResponse, Endpoint, RetryPolicy, ShowsRetries, endpoint_url,
                       map_concurrently, no_auth_header, openai_base_url)
from .protocols import ContinuesTurns, LLMClient
from .secrets import scrub, show_url
from .specs import parse_llm_spec

__all__ = [
    # the client an LLM backend gives
    "ChatClient", "parse_llm_spec", "LLMClient", "ContinuesTurns",
    # an OpenAI-compatible API: endpoint, retries, concurrency
    "Endpoint", "endpoint_url", "openai_base_url", "OPENAI_BASE_URL", "no_auth_header",
    "APICaller", "RetryPolicy", "BadResponse", "ShowsRetries", "map_concurrently",
    # what may be shown
    "scrub", "show_url",
]
