"""The options every component that calls an LLM shares beyond its API's time limits: a reasoning
model's thinking switched on or off, or bounded. They change answers, so they are part of a
result's identity, but only when set: a run that leaves them unset keeps the identity it had before
they existed (``ComponentSpec.validated_values``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from .api_options import APIOptions
from .options import Identified

WHEN_SET = Identified(when_set=True)  # in a result's identity only when set (ComponentSpec.validated_values)


class LLMOptions(APIOptions):
    """``-o thinking=on|off`` and ``-o thinking_budget=N``, with ``APIOptions``' time limits
    (docs/rewriters.md#thinking says what each server does with them)."""

    thinking: Annotated[bool | None, WHEN_SET] = Field(None, description="a hybrid reasoning model's thinking: off or on, through its "
                                                    "chat template's enable_thinking (Qwen3 on vLLM or SGLang; "
                                                    "default: the server's)")
    thinking_budget: Annotated[int | None, WHEN_SET] = Field(None, ge=0, le=2**31 - 1,
                                        description="at most this many thinking tokens per answer, where the "
                                                    "server enforces a budget (vLLM's thinking_token_budget; "
                                                    "default: none)")

    def thinking_settings(self) -> dict[str, Any]:
        """The thinking controls set."""
        return {name: value for name in THINKING if (value := getattr(self, name)) is not None}

    def llm_settings(self) -> dict[str, Any]:
        """The time limits and thinking controls set, as ``context.llm``'s keyword arguments."""
        return {**self.api_limits(), **self.thinking_settings()}


THINKING = ("thinking", "thinking_budget")
