"""Model references, for plugin authors: model options (``-o model=...``) name a local folder or a
hub repository; anything else is refused when the component is created, in one line, before any
data is loaded or computed. A model's name and revision identify its results and caches."""

from __future__ import annotations

import hashlib
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from .errors import UserError

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


def local_model_identity(path: Path) -> tuple[str, str]:
    """Name and revision of a model folder: the hub's when it is a hub cache snapshot,
    else ``local/<folder>`` and a fingerprint of its files."""
    parts = path.resolve().parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/", 1), parts[-1]
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path)}:{f.stat().st_size}\n".encode())
        if f.suffix == ".json":
            h.update(f.read_bytes())
    folder = path.name if path.name not in ("model", "models") else path.parent.name
    return f"local/{folder}", "local-" + h.hexdigest()[:12]


def model_identity(ref: str) -> tuple[str, str]:
    """Name and revision of a model option's weights: a folder's own (:func:`local_model_identity`),
    else the hub id, unpinned (a name's newest weights)."""
    path = Path(ref).expanduser()
    return local_model_identity(path) if path.is_dir() else (ref, "unpinned")


@contextmanager
def hub_offline():
    """No downloads while the block runs: a hub model resolves only from the local cache."""
    saved = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")  # already imported: it read the variable
    saved_constant = getattr(constants, "HF_HUB_OFFLINE", None)
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved
        now = sys.modules.get("huggingface_hub.constants")  # imported inside the block: it read "1"
        if now is not None:
            now.HF_HUB_OFFLINE = (saved_constant if constants is not None
                                  else (saved or "").strip().upper() in ("1", "ON", "YES", "TRUE"))
