"""The built-in LLM backends for ``-o llm=``: ``openai``, ``vllm``, ``ollama`` and ``http(s)``, each
the core chat client pointed at that backend's endpoint.
"""

from __future__ import annotations

from r2med_tasks.llm import ChatClient, parse_llm_spec
from r2med_tasks.plugin import LLMSpec, hookimpl


@hookimpl
def register_llms(register):
    for name, what in (("openai", "the OpenAI API, or $OPENAI_BASE_URL when set (key in OPENAI_API_KEY)"),
                       ("vllm", "a vLLM server on http://127.0.0.1:8000/v1"),
                       ("ollama", "an Ollama server on http://127.0.0.1:11434/v1"),
                       ("http", "any OpenAI-compatible server: http://HOST:PORT/v1#MODEL")):
        register(LLMSpec(name=name, factory=chat_client, description=what, aliases=("https",) if name == "http" else ()))


def chat_client(spec: str, **options) -> ChatClient:
    """An OpenAI-compatible chat client for an ``-o llm=`` value."""
    return ChatClient(**parse_llm_spec(spec), **options)
