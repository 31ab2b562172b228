"""Where components keep what is expensive to rebuild (indexes, embeddings, generations)."""

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$R2MED_CACHE_DIR`` (set by ``--cache-dir``), default ``~/.cache/r2med``, joined with ``parts``."""
    root = os.environ.get("R2MED_CACHE_DIR") or Path.home() / ".cache" / "r2med"
    return Path(root).joinpath(*parts)
