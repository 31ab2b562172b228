"""What a server answered: ``Generation`` (one completion), read from a ``/chat/completions`` or
``/completions`` answer by ``parse_chat_completion`` and ``parse_continuation``: token counts
checked (``token_count``), a reasoning model's thinking taken apart (``reasoning_of``). Apart from
the client, so the cache, the usage tally and the records read answers without it."""

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
    """One completion: the first choice's text, the tokens billed, why it ended and the model that answered.

    ``text`` is the message's ``content``; a server that splits a reasoning model's thinking from its
    answer (vLLM's ``--reasoning-parser``, DeepSeek's API) gives the thinking in ``reasoning``
    (``message.reasoning_content``, or ``message.reasoning`` as newer vLLM and OpenRouter name it);
    :meth:`whole_text` puts the two back together as the model wrote them.

    ``finish_reason``: the server's (``"stop"``: a stop string or the end of the turn, ``"length"``:
    ``max_tokens`` spent). ``stop``: for a continued turn (``ChatClient.continue_turns``), the stop
    string that ended it, as the server reports it (vLLM's ``stop_reason``); the text never
    includes it. None when no stop string ended it (the model ended its turn, ``max_tokens``) or when
    the server does not say which (OpenAI and Ollama report only ``finish_reason: "stop"``).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    model: str
    stop: str | None = None
    reasoning_tokens: int = 0  # of completion_tokens, where the server says (usage.completion_tokens_details)
    reasoning: str | None = None  # the thinking, when the server returns it apart (``reasoning_content``)
    seconds: float | None = field(default=None, compare=False)  # the request's, retries included (not what was answered)
    tokens_known: bool = True  # False: the server gave no valid token counts (the 0s above stand for unknown)

    def whole_text(self, opened: bool | None = None) -> str:
        """What the model wrote, its thinking in place when the server returned it apart: the inverse
        of vLLM's ``deepseek_r1`` parser and DeepSeek's API, which cut the text at the first
        ``</think>`` (``reasoning`` before it, without an opening ``<think>``; ``text`` after it): the
        text R2MED's published files hold for reasoning LLMs. ``opened``: the model wrote the opening
        tag itself, so it is put back (default: when there is an answer after the thought; a chat
        template that opens the thought in the prompt, as QwQ's and DeepSeek-R1's do, leaves it out of
        the output). With no reasoning, ``text`` unchanged; a thought never closed (a search agent
        stopped mid-thought) is all the model wrote: the reasoning alone."""
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
    """A token count as a server (or a cache line) reports it; 0 for anything but an integer >= 0."""
    return value if valid_count(value) else 0


def valid_count(value: Any) -> bool:
    """Whether a server's token count is one: an integer >= 0 (not -1000000, 1e308 or "x")."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_TOKENS


MAX_TOKENS = 10**15  # more than any request ever billed: a count beyond it is no count (and stays finite in dollars)
_WARNED: set[str] = set()  # models whose server gave invalid token counts, warned about once a process


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
    """The thinking a server returned apart from the answer: ``reasoning_content`` (vLLM's reasoning
    parsers, DeepSeek's API), else ``reasoning`` (newer vLLM, OpenRouter); None when neither is
    text (an empty one included: nothing was returned apart)."""
    for name in REASONING_FIELDS:
        value = _text(message.get(name))
        if value:
            return value
    return None


def _generation(obj: dict, text: str, finish: str | None, requested_model: str, stop: str | None = None,
                reasoning: str | None = None) -> Generation:
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
    model = obj.get("model") if isinstance(obj.get("model"), str) and obj.get("model") else requested_model
    model = redact(model)  # stored and shown: never a secret a spec or a server put there
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
    """The first choice of a continued turn's answer (``mode`` "chat": ``/chat/completions``'s
    ``message.content``; "completions": ``/completions``' ``text``), with the stop string that ended
    it (vLLM's ``stop_reason`` when a string; an int there is a stop token, not a string). Empty text
    is an answer when the turn stopped (the model wrote a stop string or ended the turn at once);
    ``BadResponse`` (retried) otherwise."""
    obj, choice = _first_choice(payload)
    reasoning = None
    if mode == "chat":
        if not isinstance(choice.get("message"), dict):
            raise BadResponse("the first choice has no message")
        text = _text(choice["message"].get("content"))
        reasoning = reasoning_of(choice["message"])
        if reasoning is not None and text is None:  # the thinking not closed: all of it came apart
            text = ""
    else:
        text = choice.get("text") if isinstance(choice.get("text"), str) else None
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    stop = (choice.get("stop_reason") or None) if isinstance(choice.get("stop_reason"), str) else None
    if text is None or (not (text + (reasoning or "")).strip() and finish != "stop"):
        raise _no_text(text, finish)
    return _generation(obj, text, finish, requested_model, stop, reasoning)
