"""A corpus is parsed only when its texts are read, and each data file is hashed once per run.

A warm run of an id-only component (BM25 from its cached index) reads the validated document ids
cached under the run's cache folder, keyed by the corpus file's content hash, instead of parsing
the corpus; the texts load on first access, after checking that the file still holds that content.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl, write_jsonl
from r2med_tasks.tasks import datafiles, loading
from r2med_tasks.tasks.loading import load_local
from r2med_tasks.errors import UserError
from r2med_tasks.tasks.specs import TaskSpec


@pytest.fixture
def folder(tmp_path) -> Path:
    """The sample task as Biology, with judgments that draw warnings (an unknown query, a missing
    document), so a load from cached ids is seen to warn as a full one does."""
    folder = tmp_path / "data" / "Biology"
    shutil.copytree(SAMPLE, folder)
    qrels = read_jsonl(folder / "qrels.jsonl")
    write_jsonl(folder / "qrels.jsonl", qrels + [{"q_id": "nobody", "p_id": "d1", "score": 1},
                                                 {"q_id": qrels[0]["q_id"], "p_id": "absent", "score": 1}])
    return folder


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The names of the files ``read_jsonl`` parses from now on."""
    seen, real = [], loading.read_jsonl

    def counting(path):
        seen.append(path.name)
        return real(path)

    monkeypatch.setattr(loading, "read_jsonl", counting)
    return seen


def ids_files(cache: Path) -> list[Path]:
    return sorted((cache / "corpus").glob("*.ids")) if (cache / "corpus").exists() else []


def test_a_second_load_reads_the_cached_ids_and_parses_the_texts_only_when_read(folder, tmp_path, parses):
    full = load_local(folder)
    load_local(folder, cache_dir=tmp_path / "cache")  # parses, validates, caches the ids
    assert parses.count("corpus.jsonl") == 2 and len(ids_files(tmp_path / "cache")) == 1
    parses.clear()
    warm = load_local(folder, cache_dir=tmp_path / "cache")
    assert parses == ["query.jsonl", "qrels.jsonl"]
    assert warm.corpus.ids == full.corpus.ids and len(warm.corpus) == len(full.corpus)
    assert warm.corpus.checksum == full.corpus.checksum and warm.revision == full.revision
    assert warm.queries == full.queries and warm.qrels == full.qrels
    assert warm.corpus.folder == full.corpus.folder == folder
    assert warm.warnings == full.warnings and len(full.warnings) == 2
    assert parses == ["query.jsonl", "qrels.jsonl"]
    assert warm.corpus.texts == full.corpus.texts and warm.corpus.texts is warm.corpus.texts
    assert parses == ["query.jsonl", "qrels.jsonl", "corpus.jsonl"]  # once, on first access


def test_an_edited_corpus_gets_its_own_ids(folder, tmp_path):
    cache = tmp_path / "cache"
    before = load_local(folder, cache_dir=cache)
    rows = read_jsonl(folder / "corpus.jsonl")
    rows[-1] = {"id": "renamed-document", "text": "a new text"}
    write_jsonl(folder / "corpus.jsonl", rows)
    after = load_local(folder, cache_dir=cache)
    assert after.corpus.checksum != before.corpus.checksum and len(ids_files(cache)) == 2
    assert after.corpus.ids[-1] == "renamed-document" and after.corpus.ids[:-1] == before.corpus.ids[:-1]
    assert load_local(folder, cache_dir=cache).corpus.texts[-1] == "a new text"


@pytest.mark.parametrize("damage", [lambda b: b[:-7], lambda b: b.replace(b"s-cardio-01\n", b"s-cardio-09\n"), lambda b: b"\0garbage",
                                    lambda b: b""], ids=["truncated", "edited", "garbage", "empty"])
def test_a_damaged_ids_file_is_ignored_and_rebuilt(folder, tmp_path, parses, damage):
    cache = tmp_path / "cache"
    expected = load_local(folder, cache_dir=cache).corpus.ids
    [ids_file] = ids_files(cache)
    whole = ids_file.read_bytes()
    ids_file.write_bytes(damage(whole))
    parses.clear()
    assert load_local(folder, cache_dir=cache).corpus.ids == expected
    assert parses.count("corpus.jsonl") == 1 and ids_file.read_bytes() == whole


def test_a_corpus_changed_before_its_texts_are_read_is_one_line(folder, tmp_path):
    load_local(folder, cache_dir=tmp_path / "cache")
    corpus = load_local(folder, cache_dir=tmp_path / "cache").corpus
    with (folder / "corpus.jsonl").open("a") as f:
        f.write('{"id": "late", "text": "written during the run"}\n')
    with pytest.raises(UserError) as error:
        _ = corpus.texts
    message = str(error.value)
    assert len(message.splitlines()) == 1 and message.startswith(f"{folder / 'corpus.jsonl'}: changed during the run")


def test_an_invalid_corpus_is_never_cached(folder, tmp_path):
    rows = read_jsonl(folder / "corpus.jsonl")
    write_jsonl(folder / "corpus.jsonl", rows + [rows[0]])
    for _ in range(2):
        with pytest.raises(UserError, match="duplicate document id"):
            load_local(folder, cache_dir=tmp_path / "cache")
    assert ids_files(tmp_path / "cache") == []


def test_a_run_caches_the_ids_and_its_warm_rerun_parses_no_corpus(evaluate, data_dir, tmp_path, parses):
    first = evaluate("bm25", tasks=["Biology", "Medical-Sciences"], data_dir=data_dir)
    assert len(ids_files(tmp_path / "cache")) == 1  # both tasks share the sample's corpus
    parses.clear()
    again = evaluate("bm25", tasks=["Biology", "Medical-Sciences"], data_dir=data_dir, overwrite=True)
    assert "corpus.jsonl" not in parses  # BM25 comes from its cached index: no text is needed
    assert {t: (s.ndcg_at_10, s.status) for t, s in again.items()} == \
        {t: (s.ndcg_at_10, "computed") for t, s in first.items()}


def test_fuse_keeps_the_ids_in_its_cache_dir(evaluate, data_dir, tmp_path, parses):
    """`r2med fuse --data-dir` reads the judgments through the corpus ids kept under its --cache-dir
    (a corpus it saw once is not parsed again), and nothing under the default cache folder."""
    from r2med_tasks.api import fuse_runs
    from r2med_tasks.components.context import default_cache_dir

    members = []
    for name in ("bm25", "bm25-okapi"):
        (folder,) = evaluate(name, tasks=["Biology"], data_dir=data_dir).results_dirs
        members.append(Path(folder))
    before = ids_files(default_cache_dir())
    for output in ("fused", "again"):
        parses.clear()
        fused = fuse_runs(members, data_dir=data_dir, cache_dir=tmp_path / "fuse-cache", output=tmp_path / output)
        assert list(fused) == ["R2MEDBiologyRetrieval"] and fused.results_dirs[0].startswith(str(tmp_path / output))
        assert parses.count("corpus.jsonl") == (1 if output == "fused" else 0)
    assert len(ids_files(tmp_path / "fuse-cache")) == 1 and ids_files(default_cache_dir()) == before


class CountingHashlib:
    """``hashlib`` for ``r2med_tasks.tasks.datafiles``, recording every digest it computes."""

    def __init__(self) -> None:
        self.digests: list[str] = []

    def sha256(self, data: bytes = b""):
        digests, h = self.digests, hashlib.sha256(data)

        class Recorded:
            update = h.update

            def hexdigest(self) -> str:
                digests.append(h.hexdigest())
                return digests[-1]

        return Recorded()


def file_digests(folder: Path) -> list[str]:
    return [hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in datafiles.FILES]


@pytest.mark.parametrize("cached,ahead", [(False, False), (True, False), (True, True)],
                         ids=["no-cache", "cached-ids", "hashed-ahead"])
def test_a_run_hashes_each_file_once(folder, tmp_path, monkeypatch, cached, ahead):
    """Also when the runner has started hashing the files ahead, on another thread."""
    task = TaskSpec(name="R2MEDBiologyRetrieval", short_name="Biology", description="")
    cache = tmp_path / "cache" if cached else None
    if cached:
        task.load(folder.parent, cache_dir=cache)
        monkeypatch.setattr(datafiles, "_DIGESTS", {})  # as a new process: the ids are cached, no digest
    counting = CountingHashlib()
    monkeypatch.setattr(datafiles, "hashlib", counting)
    if ahead:
        datafiles.hash_ahead([folder])
    identity = task.source(folder.parent).identity()
    data = task.load(folder.parent, cache_dir=cache)
    assert data.revision == identity["revision"]
    assert [counting.digests.count(d) for d in file_digests(folder)] == [1, 1, 1]


def test_a_file_changed_between_identity_and_load_is_hashed_again(folder):
    task = TaskSpec(name="R2MEDBiologyRetrieval", short_name="Biology", description="")
    identity = task.source(folder.parent).identity()
    queries = read_jsonl(folder / "query.jsonl")
    write_jsonl(folder / "query.jsonl", queries[:-1])
    data = task.load(folder.parent)
    assert data.revision != identity["revision"]
    assert data.revision == task.source(folder.parent).identity()["revision"] == loading._revision(file_digests(folder))


def test_a_failed_hash_ahead_is_redone_or_named_when_its_task_comes(folder, monkeypatch):
    """A background hash that fails (a read error) is done again by the task's own read, which
    names the file in one line if it fails too."""
    task = TaskSpec(name="R2MEDBiologyRetrieval", short_name="Biology", description="")
    real, failures = datafiles._sha256_of, {"left": 3}  # the three background hashes fail

    def flaky(path):
        if failures["left"]:
            failures["left"] -= 1
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(datafiles, "_DIGESTS", {})
    monkeypatch.setattr(datafiles, "_sha256_of", flaky)
    datafiles.hash_ahead([folder])
    assert task.source(folder.parent).identity()["revision"] == loading._revision(file_digests(folder))

    monkeypatch.setattr(datafiles, "_DIGESTS", {})
    failures["left"] = 99
    datafiles.hash_ahead([folder])
    with pytest.raises(UserError, match=r"^\S*corpus.jsonl: cannot read it \(Permission denied\)"):
        task.source(folder.parent).identity()
