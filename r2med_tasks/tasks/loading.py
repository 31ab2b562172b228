"""Loading a task's data from a local folder or the hub, through one validator. A local corpus's
validated ids are cached by content hash, so a later load parses its texts only on first use.
"""

from __future__ import annotations

import functools
import hashlib
import json
from contextlib import contextmanager
from pathlib import Path

from ..files import atomic
from .datafiles import FILES, Rows, file_sha256, read_jsonl
from ..errors import UserError, reason
from .taskdata import Corpus, TaskData
from .validation import build_task_data, column, corpus_columns, task_data

HUB_CONFIGS = ("corpus", "query", "qrels")


def local_revision(folder: Path) -> str:
    """A local folder's revision, the checksum of its three files, without parsing them."""
    return _revision([file_sha256(folder / name) for name in FILES])


def _revision(digests: list[str]) -> str:
    return "sha256-" + hashlib.sha256("".join(digests).encode()).hexdigest()[:16]


def load_local(folder: Path, *, cache_dir: Path | None = None) -> TaskData:
    """Load a folder in R2MED's layout; its revision is a checksum of the three files' content."""
    corpus_file, ids = folder / FILES[0], None
    if cache_dir is not None:
        checksum = file_sha256(corpus_file)
        ids = _cached_ids(cache_dir, checksum)
    if ids is None:
        corpus_rows, checksum = read_jsonl(corpus_file)
    (query_rows, query_digest), (qrels_rows, qrels_digest) = (read_jsonl(folder / name) for name in FILES[1:])
    if ids is None:  # the corpus is checked first, as build_task_data checks it
        corpus = Corpus(*corpus_columns(corpus_rows, str(folder)), checksum, folder=folder)
        if cache_dir is not None:
            _cache_ids(cache_dir, corpus)
    else:
        corpus = Corpus.lazy(ids, checksum, functools.partial(corpus_texts, corpus_file, checksum), folder=folder)
    return task_data(corpus, query_rows, qrels_rows, revision=_revision([checksum, query_digest, qrels_digest]),
                     source=str(folder))


IDS_FORMAT = 2  # bump with the ids file's layout or the corpus checks, which a cached id list skips


def _ids_file(cache_dir: Path, checksum: str) -> Path:
    return cache_dir / "corpus" / f"{checksum}-{IDS_FORMAT}.ids"


def _cache_ids(cache_dir: Path, corpus: Corpus) -> None:
    """Keep a validated corpus's ids for the next load of the same content, behind a header whose
    count and sha256 reveal a damaged file. Best effort: a failure costs the next run a parse."""
    body = "".join(f"{doc_id}\n" for doc_id in corpus.ids).encode("utf-8", "surrogatepass")
    header = json.dumps({"count": len(corpus.ids), "sha256": hashlib.sha256(body).hexdigest()}).encode()
    try:
        atomic.write_bytes(_ids_file(cache_dir, corpus.checksum), header + b"\n" + body)
    except OSError:
        pass


def _cached_ids(cache_dir: Path, checksum: str) -> list[str] | None:
    """The ids kept for the corpus content ``checksum``; None unless whole."""
    try:
        header, _, body = _ids_file(cache_dir, checksum).read_bytes().partition(b"\n")
        ids = body.decode("utf-8", "surrogatepass").split("\n")[:-1]
        if json.loads(header) == {"count": len(ids), "sha256": hashlib.sha256(body).hexdigest()}:
            return ids
    except (OSError, ValueError):
        pass
    return None


def corpus_texts(path: Path, checksum: str) -> list[str]:
    """The texts of a corpus loaded earlier, once the file is seen to hold that content still."""
    try:
        rows, digest = read_jsonl(path)
    except UserError:
        digest = None
    if digest != checksum:
        raise UserError(f"{path}: changed during the run (it no longer holds the corpus loaded at the start); "
                        "rerun once the file is complete")
    return column(rows, "text", str)


def load_hub(path: str, revision: str) -> TaskData:
    """Load a dataset repo's three configs at a pinned revision, as mteb's R2MED loader does."""
    label = f"{path}@{revision[:7]}"
    try:
        import datasets

        with _quiet_hub():
            tables = {
                config: datasets.load_dataset(path, name=config, split=config, revision=revision)
                for config in HUB_CONFIGS
            }
    except Exception as e:  # the hub client raises many types for "unreachable" or "missing"
        raise UserError(
            f"cannot load {label} from the Hugging Face hub ({reason(e, 160)}); "
            "without hub access pass --data-dir DIR holding R2MED's files, or run --tasks sample"
        ) from None

    def rows(config: str) -> Rows:
        return Rows(tables[config].to_list(), f"{label} config '{config}'",
                    lambda i: f"{label} config '{config}' row {i}")

    return build_task_data(
        *(rows(c) for c in HUB_CONFIGS),
        revision=revision,
        corpus_checksum=hashlib.sha256(f"{path}@{revision}".encode()).hexdigest(),
        source=label,
    )


@contextmanager
def _quiet_hub():
    """No hub warning per connection retry: a failure ends in one error line that says what to do."""
    import logging

    loggers = [logging.getLogger(name) for name in ("huggingface_hub", "datasets")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
