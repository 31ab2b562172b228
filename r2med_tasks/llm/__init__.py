"""What an LLM or embedding-API backend's author needs beyond :mod:`r2med_tasks.plugin`
(``from r2med_tasks.llm import ...``); docs/writing-plugins.md ("LLM and API backends") lists
``__all__``:

- the chat client an ``LLMSpec`` factory returns (``ChatClient``, from an ``-o llm=`` spec read by
  ``parse_llm_spec``), or what any other must offer (``LLMClient``; ``ContinuesTurns`` for agents);
- an OpenAI-compatible HTTP API as the embedding clients use it: ``Endpoint`` (base URL, key
  variable, timeout, retries; ``endpoint_url``, ``openai_base_url``, ``OPENAI_BASE_URL``,
  ``no_auth_header``), its retry loop (``APICaller``, ``RetryPolicy``, ``BadResponse``) and
  ``map_concurrently``; a client that shows its retries on the run's line (``ShowsRetries``);
- what may be shown of a key or a URL (``scrub``, ``show_url``).

The rest of the package is the core's own, imported from its modules (``r2med_tasks.llm.cache``,
``r2med_tasks.llm.usage``, ...), in the order ``tests/test_imports.py`` (``LAYERS``) keeps.
Importing this package imports no ``openai``/``httpx``.
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
