"""``run_settings.jsonl`` and ``model_type``, as r2med writes them without importing mteb.

``mteb_adapter.run_settings_text`` must leave the bytes mteb's ``ResultCache.save_to_cache`` leaves
(entries per split, merged with what the file held), ``run_settings_entries``/``run_settings_scopes``
must read a file as mteb's own readers do, ``package_versions`` must be mteb's, and a model_meta.json
with a ``model_type`` must be mteb's text while written without mteb. Everything is compared with
what the installed mteb does on the same input.
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from r2med_tasks import mteb_adapter

MODEL, REVISION = "org/model", "rev"


def subset(name: str, main: float = 0.5) -> dict:
    return {"ndcg_at_10": main, "main_score": main, "hf_subset": name, "languages": ["eng-Latn"]}


def task_result(task_name: str, scores: dict[str, list[dict]]):
    """An mteb TaskResult shaped like r2med's files (task_result_text's), with ``scores``."""
    from mteb.results import TaskResult

    data = json.loads(mteb_adapter.task_result_text(task_name, "data-rev", subset("default"), 1.0, []))
    return TaskResult.from_dict({**data, "scores": scores})


def folder(cache) -> Path:
    """The folder of ``cache`` (an mteb ResultCache) that save_to_cache writes MODEL's results to."""
    return cache.get_task_result_path("T", model_name=MODEL, model_revision=REVISION).parent


def replay(tmp_path: Path, steps: list[tuple[str, dict, object]], existing: str | None = None) -> str:
    """Saves each (task, scores, encode_kwargs) with mteb's ResultCache and with run_settings_text,
    checking after each save that run_settings.jsonl holds the same bytes; the final text."""
    import mteb

    cache = mteb.ResultCache(cache_path=tmp_path / "mteb")
    path = folder(cache) / "run_settings.jsonl"
    if existing is not None:
        path.parent.mkdir(parents=True)
        path.write_bytes(existing.encode("utf-8"))
    ours = existing
    for i, (task, scores, encode_kwargs) in enumerate(steps):
        cache.save_to_cache(task_result(task, scores), model_name=MODEL, model_revision=REVISION,
                            encode_kwargs=encode_kwargs)
        ours = mteb_adapter.run_settings_text(ours, task, scores, encode_kwargs)
        assert ours is not None and ours.encode("utf-8") == path.read_bytes(), (i, ours, path.read_text())
        # what r2med reads back from the file (text mode) gives the same next step
        assert path.read_text(encoding="utf-8") == ours
    check_readers(path)
    return ours


def check_readers(path: Path) -> None:
    """run_settings_entries and run_settings_scopes read ``path`` as mteb's readers do."""
    from mteb.results.task_result import _expand_run_settings_entry, _read_run_settings_from_file

    text = path.read_text(encoding="utf-8")
    entries = _read_run_settings_from_file(path)
    assert mteb_adapter.run_settings_entries(text) == entries
    theirs: dict = {}
    for entry in entries:
        for scope, _, settings in _expand_run_settings_entry(entry):
            theirs[scope] = settings
    ours = mteb_adapter.run_settings_scopes(text)
    assert ours == theirs and list(ours) == list(theirs)
    assert all(list(ours[s]) == list(theirs[s]) for s in theirs)  # key order too


def test_package_versions_are_mtebs():
    from mteb.cache.result_cache import _get_package_versions

    theirs = _get_package_versions()
    assert mteb_adapter.package_versions() == theirs and list(mteb_adapter.package_versions()) == list(theirs)
    assert mteb_adapter.package_versions() is mteb_adapter.package_versions()  # cached
    assert theirs["mteb"] == mteb_adapter.installed_version()


def test_single_task(tmp_path):
    text = replay(tmp_path, [("R2MEDBiologyRetrieval", {"test": [subset("default")]}, {"batch_size": 32})])
    (row,) = [json.loads(line) for line in text.splitlines()]
    assert row["task"] == "R2MEDBiologyRetrieval" and row["splits"] == ["test"] and row["subsets"] == ["default"]
    scopes = mteb_adapter.run_settings_scopes(text)
    assert list(scopes) == [("R2MEDBiologyRetrieval", "test", "default")]


def test_splits_and_subsets(tmp_path):
    """Several subsets (unsorted, repeated), splits sharing subsets in one row, a split with no scores."""
    scores = {"test": [subset("b"), subset("a"), subset("b")], "dev": [subset("a"), subset("b")],
              "train": [subset("a")], "empty": []}
    text = replay(tmp_path, [("Task", scores, {"batch_size": 8, "prompt": "ä"})])
    rows = [json.loads(line) for line in text.splitlines()]
    assert [(r["splits"], r["subsets"]) for r in rows] == [(["dev", "test"], ["a", "b"]), (["train"], ["a"])]


def test_two_tasks_merge(tmp_path):
    text = replay(tmp_path, [("TaskA", {"test": [subset("default")]}, {"batch_size": 32}),
                      ("TaskB", {"test": [subset("default")], "dev": [subset("default")]}, {"batch_size": 32}),
                      ("TaskC", {"test": [subset("default")]}, None)])
    rows = [json.loads(line) for line in text.splitlines()]
    assert [(r["task"], r["splits"], r["encode_kwargs"]) for r in rows] == [
        ("TaskA", ["test"], {"batch_size": 32}), ("TaskB", ["dev", "test"], {"batch_size": 32}), ("TaskC", ["test"], {})]


def test_same_task_saved_again_replaces_its_settings(tmp_path):
    text = replay(tmp_path, [
        ("TaskA", {"dev": [subset("x"), subset("y")], "test": [subset("x"), subset("y")]}, {"batch_size": 32}),
        ("TaskB", {"test": [subset("default")]}, {"batch_size": 32}),
        ("TaskA", {"test": [subset("y")]}, {"batch_size": 64}),  # part of it, new settings
        ("TaskA", {"dev": [subset("x"), subset("y")]}, {"batch_size": 64}),
        ("TaskB", {"test": [subset("default")]}, {"batch_size": 32}),  # the same settings again
    ])
    scopes = mteb_adapter.run_settings_scopes(text)
    assert scopes[("TaskA", "test", "x")]["encode_kwargs"] == {"batch_size": 32}
    assert scopes[("TaskA", "test", "y")]["encode_kwargs"] == {"batch_size": 64}


LEGACY = "\n".join([
    json.dumps({"task": "Old", "split": "test", "subset": "default", "encode_kwargs": {"batch_size": 4}}),
    "{not json",
    "",
    "   ",
    "[1, 2]",  # JSON, but not an entry
    json.dumps({"task": "Old", "split": "dev", "subset": "default", "encode_kwargs": {"batch_size": 4}}),
    json.dumps({"task": "Both", "splits": ["test"], "split": "kept", "subsets": ["default"], "version": {}}),
    json.dumps({"task": "NoSplit", "encode_kwargs": {}}),  # covers nothing
    '{"task": "Dup", "splits": ["test"], "subsets": ["default"], "encode_kwargs": {"a": 1}, "encode_kwargs": {"a": 2}}',
    json.dumps({"encode_kwargs": {}, "splits": ["test"], "subsets": ["default"], "task": "Order"}),
]) + "\r\n" + json.dumps({"task": "Crlf", "splits": ["test"], "subsets": ["default"], "x": float("nan")}) + "\r"


def test_pre_existing_file_with_legacy_and_unparseable_lines(tmp_path, caplog):
    text = replay(tmp_path, [("Old", {"test": [subset("default")]}, {"batch_size": 16}),
                             ("New", {"test": [subset("default")]}, {})], existing=LEGACY)
    scopes = mteb_adapter.run_settings_scopes(text)
    assert scopes[("Old", "dev", "default")]["encode_kwargs"] == {"batch_size": 4}  # legacy entry kept
    assert scopes[("Old", "test", "default")]["encode_kwargs"] == {"batch_size": 16}  # replaced
    assert "Could not parse run_settings line '{not json'" in caplog.text


def test_readers_on_a_legacy_file(tmp_path):
    path = tmp_path / "run_settings.jsonl"
    path.write_bytes(LEGACY.encode("utf-8"))
    check_readers(path)
    assert mteb_adapter.run_settings_scopes(LEGACY)[("Both", "test", "default")]["split"] == "kept"


def test_encode_kwargs_none_and_not_json(tmp_path):
    class Odd:
        def __str__(self):
            return "odd!"

    text = replay(tmp_path, [
        ("TaskA", {"test": [subset("default")]}, None),
        ("TaskB", {"test": [subset("default")]}, {"cache": Path("/tmp/x"), "obj": Odd(), "t": (1, 2),
                                                  "nan": float("nan"), "nested": {"p": Path("y")}}),
        ("TaskC", {"test": [subset("default")]}, {}),
    ])
    scopes = mteb_adapter.run_settings_scopes(text)
    assert scopes[("TaskA", "test", "default")]["encode_kwargs"] == {}
    assert scopes[("TaskB", "test", "default")]["encode_kwargs"]["cache"] == "/tmp/x"


def test_no_splits_leaves_the_file_alone(tmp_path):
    import mteb

    cache = mteb.ResultCache(cache_path=tmp_path)
    cache.save_to_cache(task_result("T", {}), model_name=MODEL, model_revision=REVISION)
    assert (folder(cache) / "T.json").exists() and not (folder(cache) / "run_settings.jsonl").exists()
    assert mteb_adapter.run_settings_text(None, "T", {}, None) is None
    assert mteb_adapter.run_settings_text(LEGACY, "T", {}, None) == LEGACY


@pytest.mark.process  # what a fresh interpreter imports
def test_run_settings_import_no_mteb():
    code = ("import sys\nfrom r2med_tasks import mteb_adapter as a\n"
            "t = a.run_settings_text(None, 'T', {'test': [{'hf_subset': 'default'}]}, {'batch_size': 1})\n"
            "a.run_settings_scopes(t)\n"
            "print(sorted(m for m in ('mteb', 'torch', 'sentence_transformers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- model_type


def test_model_types_are_mtebs():
    from mteb.models.model_meta import MODEL_TYPES

    assert mteb_adapter.MODEL_TYPES == frozenset(typing.get_args(MODEL_TYPES))


@pytest.mark.parametrize("model_type", [[t] for t in sorted(mteb_adapter.MODEL_TYPES)]
                         + [["dense", "sparse"], ["sparse", "cross-encoder"], ["dense", "dense"]])
def test_model_type_written_without_mteb_is_mtebs(model_type, monkeypatch):
    info = {"name": "r2med/splade", "revision": "0", "framework": ["PyTorch"], "model_type": model_type}
    update = {"experiment_kwargs": {"top_k": 10}}
    theirs = json.dumps(mteb_adapter.model_meta(info, update, registered=True).to_dict(), default=str, indent=4)

    def no_mteb(*args, **kwargs):
        raise AssertionError("went through mteb")

    monkeypatch.setattr(mteb_adapter, "model_meta", no_mteb)
    assert mteb_adapter.model_meta_text(info, update, registered=True) == theirs


@pytest.mark.parametrize("model_type", [[], "sparse", [1]])
def test_other_model_type_values_go_through_mteb(model_type, monkeypatch):
    info = {"name": "r2med/x", "revision": "0", "model_type": model_type}
    monkeypatch.setattr(mteb_adapter, "model_meta", lambda *a, **k: _Sentinel())  # mteb's path, stubbed
    assert mteb_adapter.model_meta_text(info, {}, registered=False) == '"sentinel"'


class _Sentinel:
    def to_dict(self):
        return "sentinel"


def test_an_unknown_model_type_is_refused_by_mteb():
    with pytest.raises(Exception, match="model_type"):
        mteb_adapter.model_meta_text({"name": "r2med/x", "revision": "0", "model_type": ["bogus"]}, {},
                                     registered=False)
