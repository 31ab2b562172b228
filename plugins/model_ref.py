"""Model options (``-o model=...``) name a local folder or a hub repository; anything else is
refused when the component is created, in one line, before any data is loaded or computed."""

from __future__ import annotations

import re
from pathlib import Path

from r2med_tasks.errors import UserError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # "bert-base-uncased", "BAAI/bge-reranker-v2-m3"


def check_model_ref(ref: str, *, option: str) -> None:
    """Accept an existing folder or something shaped like a hub id; ``option`` is how the user set it."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return
    if path.exists():
        raise UserError(f"-o {option}={ref}: a file; give the model's folder (the one holding config.json)")
    if ref.startswith((".", "/", "~")) or not HUB_ID.match(ref) or ref.endswith((".", "-")):
        raise UserError(f"-o {option}={ref}: no such folder, and not a hub id (org/name)")
