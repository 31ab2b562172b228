"""The ``-o llm=`` specs that name an LLM backend and model."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import UserError
from .endpoint import OLLAMA_BASE_URL, VLLM_BASE_URL, openai_base_url
from .secrets import redact, show_url

SPEC_FORMS = ("openai:MODEL ($OPENAI_BASE_URL, else api.openai.com; key in OPENAI_API_KEY)",
              f"vllm:MODEL ({VLLM_BASE_URL})",
              f"ollama:MODEL ({OLLAMA_BASE_URL})",
              "http(s)://HOST[:PORT]/PATH#MODEL (any OpenAI-compatible server)")


@dataclass(frozen=True)
class LLMRef:
    """An ``-o llm=`` value as results name it."""

    spec: str

    @property
    def model_name(self) -> str:
        """The model the spec names, for display ("openai:gpt-4o" -> "gpt-4o"), secrets masked."""
        spec = self.spec
        return redact(spec.rpartition("#")[2] if "#" in spec else spec.partition(":")[2] or spec)

    @property
    def identity(self) -> str:
        """The model, and whether OpenAI serves it (its sampling defaults differ), never the server's
        address: ``vllm:Qwen2.5-7B-Instruct`` and ``http://10.0.0.5:8000/v1#Qwen2.5-7B-Instruct``
        are both ``Qwen2.5-7B-Instruct``."""
        spec = self.spec
        if not isinstance(spec, str) or not spec.strip():
            return spec
        spec = spec.strip()
        model = LLMRef(spec).model_name.strip()
        return f"openai:{model}" if spec.lower().startswith("openai:") else model


def parse_llm_spec(spec: str) -> dict:
    """``ChatClient`` keyword arguments for a spec (``SPEC_FORMS``). A URL spec's base URL is
    everything before the last ``#``."""
    forms = "; ".join(SPEC_FORMS)
    if not isinstance(spec, str) or not spec.strip():
        raise UserError(f"an LLM spec is needed; use one of: {forms}")
    spec = spec.strip()
    if spec.lower().startswith(("http://", "https://")):
        base_url, sep, model = spec.rpartition("#")
        base_url = base_url.rstrip("/")
        if not sep or not model.strip() or not urlsplit(base_url).hostname:
            raise UserError(f"bad LLM spec {show_url(spec)!r}: a URL spec is BASE_URL#MODEL, e.g. "
                            f"http://127.0.0.1:8000/v1#Qwen2.5-72B-Instruct; forms: {forms}")
        return {"model": model.strip(), "base_url": base_url, "api_key_env": "OPENAI_API_KEY"}
    provider, sep, model = spec.partition(":")
    endpoints = {"openai": (None, "OPENAI_API_KEY"), "vllm": (VLLM_BASE_URL, "VLLM_API_KEY"),
                 "ollama": (OLLAMA_BASE_URL, "OLLAMA_API_KEY")}
    provider = provider.strip().lower()
    if not sep or provider not in endpoints or not model.strip():
        raise UserError(f"bad LLM spec {show_url(spec)!r}; use one of: {forms}")
    base_url, env = endpoints[provider]
    return {"model": model.strip(), "base_url": base_url or openai_base_url(), "api_key_env": env}
