"""What a server answered, read and checked. Apart from the client, so the cache, the usage tally
and the records read answers without it."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from .endpoint import BadResponse, server_message
from .secrets import redact, scrub

log = logging.getLogger(__name__)

REASONING_FIELDS = ("reasoning_content", "reasoning")  # where servers put a reasoning model's thinking
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class Generation:
    """One completion: the first choice's text, the tokens billed, why it ended and the model that
    answered. ``reasoning`` is the thinking a server returned apart from ``text``. ``stop`` is the
    stop string that ended a continued turn, never in the text; None also when the server does not
    say which (OpenAI and Ollama report only ``finish_reason: "stop"``).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    model: str
    stop: str | None = None
    reasoning_tokens: int = 0  # of completion_tokens, where the server says (usage.completion_tokens_details)
    reasoning: str | None = None
    seconds: float | None = field(default=None, compare=False)  # the request's, retries included
    tokens_known: bool = True  # False: the server gave no valid token counts (the 0s above stand for unknown)

    def whole_text(self, opened: bool | None = None) -> str:
        """What the model wrote, its thinking in place: the inverse of vLLM's ``deepseek_r1`` parser,
        which cuts the text at the first ``</think>``; the text R2MED's published files hold for
        reasoning LLMs. ``opened``: put the opening ``<think>`` back (by default when an answer
        follows; QwQ's and DeepSeek-R1's templates open the thought in the prompt instead)."""
        if self.reasoning is None:
            return self.text
        head = THINK_OPEN if (bool(self.text) if opened is None else opened) else ""
        return f"{head}{self.reasoning}{THINK_CLOSE}{self.text}" if self.text else f"{head}{self.reasoning}"

def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def token_count(value: Any) -> int:
    """A reported token count; 0 for anything but a valid one."""
    return value if valid_count(value) else 0


def valid_count(value: Any) -> bool:
    """Whether a server's token count is one (servers have sent -1000000, 1e308 and "x")."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_TOKENS


MAX_TOKENS = 10**15  # more than any request ever billed: a count beyond it is no count (and stays finite in dollars)
_WARNED: set[str] = set()  # models warned about once a process


def _first_choice(payload: bytes) -> tuple[dict, dict]:
    """The answer object and its first choice; ``BadResponse`` if there is none."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadResponse("the body is not JSON") from None
    if not isinstance(obj, dict):
        raise BadResponse("the body is not a JSON object")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        error = f"; error: {server_message(payload)}" if "error" in obj else ""
        raise BadResponse(f"no choices{error}")
    if not isinstance(choices[0], dict):
        raise BadResponse("the first choice is not an object")
    return obj, choices[0]


def _no_text(text: str | None, finish: str | None) -> BadResponse:
    advice = None
    if finish == "length":
        advice = ("the model used all max_tokens before answering (reasoning models count their hidden "
                  "reasoning): raise max_tokens")
    elif finish == "content_filter":
        advice = "the provider's content filter withheld the answer: change the prompt or the model"
    return BadResponse(f"{'empty' if text is not None else 'no'} content (finish_reason {finish!r})", advice)


def reasoning_of(message: dict) -> str | None:
    """The thinking a server returned apart from the answer, under either name servers use; None
    when empty."""
    for name in REASONING_FIELDS:
        value = _text(message.get(name))
        if value:
            return value
    return None


def _generation(obj: dict, text: str, finish: str | None, requested_model: str, stop: str | None = None,
                reasoning: str | None = None) -> Generation:
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
    model = obj.get("model") if isinstance(obj.get("model"), str) and obj.get("model") else requested_model
    model = redact(model)  # stored and shown
    details = usage.get("completion_tokens_details")  # OpenAI's, and vLLM's with a reasoning parser
    reasoning_tokens = token_count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    known = all(valid_count(usage.get(name)) for name in ("prompt_tokens", "completion_tokens"))
    if not known and usage and model not in _WARNED:  # reported, but not as counts: unknown, never 0
        _WARNED.add(model)
        shown = {name: usage.get(name) for name in ("prompt_tokens", "completion_tokens")}
        log.warning("%s: the server reported token counts that are not counts (%s); they are counted as unknown, "
                    "and so is the cost", model, scrub(json.dumps(shown, default=str), limit=120))
    return Generation(text=text, prompt_tokens=token_count(usage.get("prompt_tokens")),
                      completion_tokens=token_count(usage.get("completion_tokens")), finish_reason=finish, model=model,
                      stop=stop, reasoning_tokens=reasoning_tokens, reasoning=reasoning, tokens_known=known)


def parse_chat_completion(payload: bytes, requested_model: str) -> Generation:
    """The first choice of a ``/chat/completions`` answer; ``BadResponse`` (retried) if unusable."""
    obj, choice = _first_choice(payload)
    if not isinstance(choice.get("message"), dict):
        raise BadResponse("the first choice has no message")
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    text = _text(choice["message"].get("content"))
    reasoning = reasoning_of(choice["message"])
    if (text is None or not text.strip()) and not (reasoning and finish == "stop"):
        raise _no_text(text, finish)
    # a thought never closed (vLLM's deepseek_r1 parser puts an answer without "</think>" all in the
    # reasoning): the text is empty, and the reasoning is what the model wrote
    return _generation(obj, text or "", finish, requested_model, reasoning=reasoning)


def parse_continuation(payload: bytes, requested_model: str, mode: str) -> Generation:
    """The first choice of a continued turn's answer, with the stop string that ended it (vLLM's
    ``stop_reason``; an int there is a stop token). Empty text is an answer only when the turn
    stopped; ``BadResponse`` (retried) otherwise."""
    obj, choice = _first_choice(payload)
    reasoning = None
    if mode == "chat":
        if not isinstance(choice.get("message"), dict):
            raise BadResponse("the first choice has no message")
        text = _text(choice["message"].get("content"))
        reasoning = reasoning_of(choice["message"])
        if reasoning is not None and text is None:  # the thinking never closed
            text = ""
    else:
        text = choice.get("text") if isinstance(choice.get("text"), str) else None
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    stop = (choice.get("stop_reason") or None) if isinstance(choice.get("stop_reason"), str) else None
    if text is None or (not (text + (reasoning or "")).strip() and finish != "stop"):
        raise _no_text(text, finish)
    return _generation(obj, text, finish, requested_model, stop, reasoning)
