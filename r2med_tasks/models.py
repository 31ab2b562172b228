"""Model references, for plugin authors: model options (``-o model=...``) name a local folder or a
hub repository; anything else is refused when the component is created, in one line, before any
data is loaded or computed. A model's name and revision identify its results and caches."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from .errors import UserError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # "bert-base-uncased", "BAAI/bge-reranker-v2-m3"


MODEL_FILES = ("config.json", "modules.json", "config_sentence_transformers.json", "sentence_bert_config.json",
               "adapter_config.json")  # one of these directly in a folder makes it a model's (a peft adapter's)


def check_model_ref(ref: str, *, option: str) -> None:
    """Accept a model's folder or something shaped like a hub id; ``option`` is how the user set it."""
    if not ref.strip():
        raise UserError(f"-o {option}=: empty; give a hub id (org/name) or a model folder")
    path = Path(ref).expanduser()
    if path.is_dir():
        if not looks_like_model(path):
            raise UserError(f"-o {option}={ref}: not a model folder (it holds none of {', '.join(MODEL_FILES)}); "
                            "give the folder the model was saved to")
        return
    if path.exists():
        raise UserError(f"-o {option}={ref}: a file; give the model's folder (the one holding config.json)")
    if ref.startswith((".", "/", "~")) or not HUB_ID.match(ref) or ref.endswith((".", "-")):
        raise UserError(f"-o {option}={ref}: no such folder, and not a hub id (org/name)")


def looks_like_model(path: Path) -> bool:
    """Whether a folder directly holds a model's (or an adapter's) configuration file."""
    return any((path / name).is_file() for name in MODEL_FILES)


def local_model_identity(path: Path) -> tuple[str, str]:
    """Name and revision of a model folder: the hub's when it is a hub cache snapshot, else
    ``local/<folder>`` and ``local-<sha256>`` of its files' relative paths and bytes (hidden files
    and editor leftovers aside), so other weights at the same size are another model. A file's
    digest is remembered by path, size, mtime and inode, in this process and in
    ``<cache>/fingerprints.json``: an unchanged model is not read again."""
    parts = path.resolve().parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/", 1), parts[-1]
    folder = path.name if path.name not in ("model", "models") else path.parent.name
    return f"local/{folder}", "local-" + content_digest(path)[:16]


def content_digest(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's files' relative paths and bytes (hidden files and
    editor leftovers aside), each file's digest remembered as :func:`local_model_identity` says."""
    with _FileDigests() as digests:
        if path.is_file():
            return digests.of(path)
        h = hashlib.sha256()
        for relative, file in _model_files(path):
            h.update(f"{relative}\0{digests.of(file)}\n".encode())
        return h.hexdigest()


def _model_files(root: Path) -> list[tuple[str, Path]]:
    """A folder's files (through links to files, not into linked folders), by relative path
    (``/``-separated, sorted); hidden ones (``.git``, ``.cache``, ``.x.swp``) and editor
    leftovers (``x~``, ``#x#``) aside."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not _skipped(d)]
        for name in files:
            file = Path(folder) / name
            if not _skipped(name) and file.is_file():
                found.append((file.relative_to(root).as_posix(), file))
    return sorted(found)


def _skipped(name: str) -> bool:
    return name.startswith((".", "#")) or name.endswith("~")


FINGERPRINTS = "fingerprints.json"
_digests: dict[tuple[str, int, int, int], str] = {}  # (resolved path, size, mtime_ns, inode) -> sha256


def _fingerprints_file() -> Path:
    """``fingerprints.json`` in the cache folder a run uses when it names none: ``$R2MED_CACHE_DIR``
    (as ``--cache-dir`` reads it), else the user's cache folder."""
    from .context import default_cache_dir

    folder = os.environ.get("R2MED_CACHE_DIR")
    return (Path(folder).expanduser() if folder else default_cache_dir()) / FINGERPRINTS


def _read_fingerprints(file: Path) -> dict[tuple[str, int, int, int], str]:
    """The digests stored in ``file``; nothing when it is missing, unreadable or not as written."""
    try:
        stored = json.loads(file.read_text(encoding="utf-8"))
        return {(path, int(e["size"]), int(e["mtime_ns"]), int(e["inode"])): e["sha256"]
                for path, e in stored["files"].items()
                if isinstance(e.get("sha256"), str) and len(e["sha256"]) == 64}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


class _FileDigests:
    """Files' sha256 for one folder's identity: from this process's memory, else from the
    persistent fingerprints (read once, at the first miss), else read and hashed; new digests are
    added to the persistent file at the end, best effort (a cache folder that cannot be written
    is passed over in silence)."""

    def __init__(self) -> None:
        self.file = _fingerprints_file()
        self.stored: dict[tuple[str, int, int, int], str] | None = None
        self.new: dict[tuple[str, int, int, int], str] = {}

    def __enter__(self) -> _FileDigests:
        return self

    def of(self, file: Path) -> str:
        resolved = file.resolve()
        st = resolved.stat()
        key = (str(resolved), st.st_size, st.st_mtime_ns, st.st_ino)
        if key in _digests:
            return _digests[key]
        if self.stored is None:
            self.stored = _read_fingerprints(self.file)
        digest = self.stored.get(key)
        if digest is None:
            digest = self.new[key] = _sha256(resolved)
        _digests[key] = digest
        return digest

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None and self.new:
            self._save()

    def _save(self) -> None:
        from . import atomic

        # the file as it is now (another process may have added to it), less files since changed
        # or gone, plus this folder's new digests (one entry per path: the newest)
        entries = {**_read_fingerprints(self.file), **self.new}
        files = {}
        for (path, size, mtime_ns, inode), digest in entries.items():
            try:
                st = os.stat(path)
            except OSError:
                continue
            if (st.st_size, st.st_mtime_ns, st.st_ino) == (size, mtime_ns, inode):
                files[path] = {"size": size, "mtime_ns": mtime_ns, "inode": inode, "sha256": digest}
        try:
            atomic.write_json(self.file, {"files": files}, indent=None)
        except OSError:
            pass


def _sha256(file: Path) -> str:
    h = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def model_identity(ref: str) -> tuple[str, str]:
    """Name and revision of a model option's weights: a model folder's own
    (:func:`local_model_identity`), else the hub id, unpinned (a name's newest weights). A folder
    that holds no model (``-o model=/tmp``, which :func:`check_model_ref` refuses) is not read."""
    path = Path(ref).expanduser()
    return local_model_identity(path) if path.is_dir() and looks_like_model(path) else (ref, "unpinned")


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
