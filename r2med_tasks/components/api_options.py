"""How long a component waits for an LLM or embedding API, declared once for every component that
calls one: its options class derives from :class:`APIOptions`. A time limit changes no answer, so
these options are the run's settings, never part of a result's identity (``ComponentSpec`` makes
them runtime options)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .options import Options


class APIOptions(Options):
    """``-o timeout=`` and ``-o max_retries=``; unset, the client's defaults (docs/rewriters.md says why)."""

    timeout: float | None = Field(None, gt=0, le=86_400, description="seconds to wait for one answer before it is "
                                                                    "retried (default: 600 for an LLM, 60 for an "
                                                                    "embedding API)")
    max_retries: int | None = Field(None, ge=0, le=100, description="retries of a request that timed out or failed "
                                                                    "(default: 2)")

    def api_limits(self) -> dict[str, Any]:
        """The limits set, as a client's keyword arguments (``context.llm``'s, an encoder's)."""
        return {name: value for name in API_LIMITS if (value := getattr(self, name)) is not None}


API_LIMITS = tuple(APIOptions.model_fields)
