"""Model references: a model option names a local folder or a hub repository, anything else is
refused before any data is loaded. A model's name and revision identify its results and caches."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # "bert-base-uncased", "BAAI/bge-reranker-v2-m3"


MODEL_FILES = ("config.json", "modules.json", "config_sentence_transformers.json", "sentence_bert_config.json",
               "adapter_config.json")  # one of these directly in a folder makes it a model's (a peft adapter's)


@dataclass(frozen=True)
class ModelRef:
    """What a model option names: a model's folder or something shaped like a hub id, checked when
    made; a refusal is one line naming ``option``."""

    ref: str
    option: str = "model"

    def __post_init__(self) -> None:
        ref, option = self.ref, self.option
        if not ref.strip():
            raise UserError(f"-o {option}=: empty; give a hub id (org/name) or a model folder")
        path = self.path
        if path.is_dir():
            if not looks_like_model(path):
                raise UserError(f"-o {option}={ref}: not a model folder (it holds none of {', '.join(MODEL_FILES)}); "
                                "give the folder the model was saved to")
            return
        if path.exists():
            raise UserError(f"-o {option}={ref}: a file; give the model's folder (the one holding config.json)")
        if ref.startswith((".", "/", "~")) or not HUB_ID.match(ref) or ref.endswith((".", "-")):
            raise UserError(f"-o {option}={ref}: no such folder, and not a hub id (org/name)")

    @property
    def path(self) -> Path:
        return Path(self.ref).expanduser()

    def identity(self, cache_dir: Path | None = None) -> tuple[str, str]:
        """Name and revision of the weights: a folder's own, else the hub id, unpinned."""
        if self.path.is_dir():
            return _folder_identity(self.path, cache_dir=cache_dir)
        return self.ref, "unpinned"

    def weights(self, cache_dir: Path | None = None) -> str:
        """A model folder's weights by their content alone, whatever its path or label: caches of
        what the weights compute are keyed by it, so the same weights under another name reuse them."""
        if not self.path.is_dir():
            raise UserError(f"-o {self.option}={self.ref}: not a local folder; only a folder's weights are hashed")
        return "sha256-" + content_digest(self.path, cache_dir=cache_dir)[:32]


def looks_like_model(path: Path) -> bool:
    """Whether a folder directly holds a model's (or an adapter's) configuration file."""
    return any((path / name).is_file() for name in MODEL_FILES)


def _folder_identity(path: Path, *, cache_dir: Path | None = None) -> tuple[str, str]:
    """Name and revision of a model folder: the hub's for a hub cache snapshot, else ``local/<folder>``
    and a digest of its content, so other weights of the same size are another model."""
    parts = path.resolve().parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/", 1), parts[-1]
    folder = path.name if path.name not in ("model", "models") else path.parent.name
    return f"local/{folder}", "local-" + content_digest(path, cache_dir=cache_dir)[:16]


def content_digest(path: Path, *, cache_dir: Path | None = None) -> str:
    """sha256 of a file's bytes, or of a folder's files' relative paths and bytes. A file's digest is
    remembered by path, size, mtime, ctime and inode: a file written in place with its mtime put
    back (``rsync -t --inplace``, ``cp -p``) has another ctime, so it is read again."""
    with _FileDigests(fingerprints_file(cache_dir)) as digests:
        if path.is_file():
            return digests.of(path)
        h = hashlib.sha256()
        for relative, file in _model_files(path):
            h.update(f"{relative}\0{digests.of(file)}\n".encode())
        return h.hexdigest()


MAX_MODEL_FILES = 100_000  # more is no model (a link to "/")


def _model_files(root: Path) -> list[tuple[str, Path]]:
    """A folder's files through links (``1_Pooling -> ../pooling``), hidden files and editor
    leftovers aside."""
    found = walk_files(root, skip_folder=_skipped, skip_file=_skipped, limit=MAX_MODEL_FILES)
    if found is None:
        raise UserError(f"{root}: more than {MAX_MODEL_FILES} files (links followed); a model folder's files "
                        "are hashed to identify it: give the folder that holds the model (its config.json)")
    return found


def walk_files(root: Path, *, skip_folder, skip_file, limit: int | None = None) -> list[tuple[str, Path]] | None:
    """The files under ``root`` as ``(relative path, path)``, sorted, following links. A linked
    folder that holds the link, or that the walk came through (``a/b -> ../c``, ``c/d -> ../a``), is
    skipped, so a loop ends and its files are listed once. None beyond ``limit`` files."""
    found: list[tuple[str, Path]] = []
    start = os.path.realpath(root)
    pending = [(root, "", start, frozenset({start}))]
    while pending:
        folder, prefix, here, ancestors = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # through a link
                is_file = not is_dir and entry.is_file()
            except OSError:
                continue
            if is_dir and not skip_folder(entry.name):
                real = os.path.realpath(entry.path)
                if real not in ancestors and not _holds(real, here):
                    pending.append((Path(entry.path), f"{prefix}{entry.name}/", real, ancestors | {real}))
            elif is_file and not skip_file(entry.name):
                found.append((prefix + entry.name, Path(entry.path)))
                if limit is not None and len(found) > limit:
                    return None
    return sorted(found)


def _holds(folder: str, path: str) -> bool:
    """Whether real path ``path`` is ``folder`` or under it."""
    try:
        return os.path.commonpath([folder, path]) == folder
    except ValueError:  # on other drives
        return False


def _skipped(name: str) -> bool:
    return name.startswith((".", "#")) or name.endswith("~")


FINGERPRINTS = "fingerprints.json"
RACY_NS = 2 * 10**9  # a file changed this recently may change again within its clock tick: not remembered
_Key = tuple[str, int, int, int, int]  # (resolved path, size, mtime_ns, ctime_ns, inode)
_digests: dict[_Key, str] = {}
_run_cache_dirs: list[Path] = []  # innermost last


@contextmanager
def fingerprints_in(cache_dir: Path):
    """Keep the fingerprints computed while the block runs in the run's ``cache_dir``, wherever
    they are computed."""
    folder = Path(cache_dir)
    _run_cache_dirs.append(folder)
    try:
        yield
    finally:
        _run_cache_dirs.remove(folder)


def fingerprints_file(cache_dir: Path | None = None) -> Path:
    """``fingerprints.json`` in ``cache_dir``, else the run's, else ``$R2MED_CACHE_DIR``, else the
    user's cache folder."""
    from .context import default_cache_dir

    if cache_dir is None and _run_cache_dirs:
        cache_dir = _run_cache_dirs[-1]
    if cache_dir is None:
        folder = os.environ.get("R2MED_CACHE_DIR")
        cache_dir = Path(folder) if folder else default_cache_dir()
    return Path(cache_dir).expanduser() / FINGERPRINTS


def _read_fingerprints(file: Path) -> dict[_Key, str]:
    """The digests stored in ``file``; an entry not as written (no ctime) is not believed."""
    try:
        stored = json.loads(file.read_text(encoding="utf-8"))["files"]
        entries = stored.items()
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}
    found = {}
    for path, e in entries:
        try:
            key = (path, int(e["size"]), int(e["mtime_ns"]), int(e["ctime_ns"]), int(e["inode"]))
        except (ValueError, TypeError, KeyError):
            continue
        if isinstance(e.get("sha256"), str) and len(e["sha256"]) == 64:
            found[key] = e["sha256"]
    return found


def _stat_key(path: Path) -> _Key:
    st = path.stat()
    return str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


class _FileDigests:
    """Files' sha256 for one folder's identity, from memory, the fingerprints file, or the bytes.
    When in doubt the bytes are read: a digest is remembered only for a file unchanged while read
    and last changed :data:`RACY_NS` before (a write within the same clock tick keeps the times)."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.stored: dict[_Key, str] | None = None
        self.new: dict[_Key, str] = {}

    def __enter__(self) -> _FileDigests:
        return self

    def of(self, file: Path) -> str:
        resolved = file.resolve()
        blob = _hub_blob_digest(resolved)
        if blob is not None:
            return blob
        key = _stat_key(resolved)
        if key in _digests:
            return _digests[key]
        if self.stored is None:
            self.stored = _read_fingerprints(self.file)
        digest = self.stored.get(key)
        if digest is not None:
            _digests[key] = digest
            return digest
        started = _now_ns()
        digest = _sha256(resolved)
        try:
            unchanged = _stat_key(resolved) == key
        except OSError:
            unchanged = False
        if unchanged and max(key[2], key[3]) < started - RACY_NS:
            _digests[key] = self.new[key] = digest
        return digest

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None and self.new:
            self._save()

    def _save(self) -> None:
        from ..files import atomic

        # reread: another process may have added to it
        entries = {**_read_fingerprints(self.file), **self.new}
        files = {}
        for key, digest in entries.items():
            path, size, mtime_ns, ctime_ns, inode = key
            try:
                if _stat_key(Path(path)) != key:
                    continue
            except OSError:
                continue
            files[path] = {"size": size, "mtime_ns": mtime_ns, "ctime_ns": ctime_ns, "inode": inode, "sha256": digest}
        try:
            atomic.write_json(self.file, {"files": files}, indent=None)
        except OSError:
            pass


_SHA256_NAME = re.compile(r"[0-9a-f]{64}")


def _hub_blob_digest(file: Path) -> str | None:
    """The sha256 of a Hugging Face cache blob, from its name: a large (LFS) file is stored as
    ``blobs/<sha256 of its bytes>``, so it need not be read (a small file's blob is named by its git
    hash, 40 digits)."""
    folder = file.parent
    if folder.name == "blobs" and folder.parent.name.startswith("models--") and _SHA256_NAME.fullmatch(file.name):
        return file.name
    return None


def _now_ns() -> int:
    return time.time_ns()


def _sha256(file: Path) -> str:
    h = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


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
