"""A model's chat template rendered here, for servers that do not continue a final assistant
message. Apart from the client: the one part that loads ``transformers``."""

from __future__ import annotations

import threading
from typing import Any

from ..errors import UserError, reason
from .messages import Turn
from .secrets import redact, scrub


class ChatTemplate:
    """The chat template of a downloaded tokenizer, loaded offline on first use."""

    def __init__(self, template: str) -> None:
        self.template = template
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def render(self, turn: Turn, thinking: bool | None = None) -> str:
        """The chat template with the generation prompt, then the partial text, verbatim;
        ``thinking`` set: the template's ``enable_thinking`` (Qwen3's), as a server would pass it."""
        tokenizer = self.tokenizer()
        shown = redact(self.template)
        try:
            prompt = tokenizer.apply_chat_template([dict(m) for m in turn.messages], tokenize=False,
                                                   add_generation_prompt=True,
                                                   **({} if thinking is None else {"enable_thinking": thinking}))
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
