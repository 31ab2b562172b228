"""A model's chat template, rendered here (``ChatTemplate``): a ``ChatClient`` given ``template=``
sends continued turns to ``/completions`` as the prompt its tokenizer's template makes. Apart
from the client, as it is the one part that loads ``transformers`` (lazily, offline)."""

from __future__ import annotations

import threading
from typing import Any

from ..errors import UserError, reason
from .messages import Turn
from .secrets import redact, scrub


class ChatTemplate:
    """The chat template of ``template`` (a tokenizer folder or hub id, already downloaded): its
    tokenizer is loaded offline on first use, once whichever thread asks first."""

    def __init__(self, template: str) -> None:
        self.template = template
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def render(self, turn: Turn) -> str:
        """The completions-mode prompt of ``turn``: the chat template applied to its messages with
        the generation prompt, then its partial text, verbatim."""
        tokenizer = self.tokenizer()
        shown = redact(self.template)
        try:
            prompt = tokenizer.apply_chat_template([dict(m) for m in turn.messages], tokenize=False,
                                                   add_generation_prompt=True)
        except Exception as e:  # jinja errors, a tokenizer without a template: the user's to fix
            if getattr(tokenizer, "chat_template", None) is None:
                raise UserError(f"ChatClient: the tokenizer at template={shown!r} has no chat template; give the "
                                "model's own tokenizer (its tokenizer_config.json or chat_template.jinja holds "
                                "one)") from None
            raise UserError(f"ChatClient: the chat template of template={shown!r} failed on a turn's messages "
                            f"({scrub(reason(e), limit=200)})") from None
        if not isinstance(prompt, str):
            raise UserError(f"ChatClient: the chat template of template={shown!r} did not render text "
                            f"(got {type(prompt).__name__})")
        return prompt + turn.partial

    def tokenizer(self):
        """The tokenizer (``AutoTokenizer.from_pretrained(template, local_files_only=True)``)."""
        with self._lock:
            if self._tokenizer is None:
                try:
                    from transformers import AutoTokenizer

                    self._tokenizer = AutoTokenizer.from_pretrained(self.template, local_files_only=True)
                except Exception as e:
                    raise UserError(f"ChatClient: cannot load the tokenizer template={redact(self.template)!r} "
                                    f"({scrub(reason(e), limit=160)}); give a local tokenizer folder or a hub id "
                                    "already downloaded (it is loaded offline)") from None
            return self._tokenizer
