"""A local model's identity is a hash of its files' bytes, remembered per file (in this process and
in <cache>/fingerprints.json) so an unchanged model is not read again; model options that name no
model are refused in one line."""

import json
import os
import shutil

import pytest

from r2med_tasks import models
from r2med_tasks.errors import UserError
from r2med_tasks.models import check_model_ref, local_model_identity, model_identity


@pytest.fixture(autouse=True)
def own_fingerprints(tmp_path, monkeypatch):
    """This test's own persistent cache and an empty in-process one."""
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "_digests", {})
    return tmp_path / "cache" / "fingerprints.json"


def fake_model(folder, weights=bytes(range(256)) * 64):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(weights)
    return folder


@pytest.fixture
def hashed(monkeypatch):
    """The files read and hashed, in order."""
    calls = []
    real = models._sha256

    def counting(file):
        calls.append(file.name)
        return real(file)

    monkeypatch.setattr(models, "_sha256", counting)
    return calls


def test_other_weights_of_the_same_size_are_another_revision(tmp_path):
    folder = fake_model(tmp_path / "bge")
    name, revision = local_model_identity(folder)
    assert name == "local/bge" and revision.startswith("local-") and len(revision) == len("local-") + 16
    weights = folder / "model.safetensors"
    data, stat = weights.read_bytes(), weights.stat()
    weights.write_bytes(data[128:] + data[:128])  # rows permuted, in place: same size, same inode
    # a later save (set explicitly: a write within the clock's tick of the first may keep its mtime)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert (weights.stat().st_size, weights.stat().st_ino) == (stat.st_size, stat.st_ino)
    name2, permuted = local_model_identity(folder)
    assert name2 == name and permuted != revision
    models._digests.clear()  # the bytes decide, not what was remembered
    assert local_model_identity(fake_model(tmp_path / "other" / "bge", weights.read_bytes())) == (name, permuted)


def test_a_rewritten_file_is_hashed_again(tmp_path, hashed):
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    replacement = tmp_path / "new.safetensors"
    data = (folder / "model.safetensors").read_bytes()
    replacement.write_bytes(data[::-1])
    os.replace(replacement, folder / "model.safetensors")  # as a save does: a new inode (and mtime)
    hashed.clear()
    assert local_model_identity(folder)[1] != revision
    assert hashed == ["model.safetensors"]


def test_an_unchanged_folder_is_not_read_again(tmp_path, hashed, own_fingerprints):
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    assert sorted(hashed) == ["config.json", "model.safetensors"]
    hashed.clear()
    assert local_model_identity(folder)[1] == revision and hashed == []  # this process remembers
    models._digests.clear()  # another process: the fingerprints file remembers
    stored = json.loads(own_fingerprints.read_text())["files"]
    assert str((folder / "model.safetensors").resolve()) in stored
    assert local_model_identity(folder)[1] == revision and hashed == []
    (folder / "tokenizer.json").write_text("{}")  # a file added: only it is read
    assert local_model_identity(folder)[1] != revision and hashed == ["tokenizer.json"]


def test_the_same_files_elsewhere_are_the_same_model(tmp_path):
    folder = fake_model(tmp_path / "a" / "bge")
    copy = tmp_path / "b" / "bge"
    shutil.copytree(folder, copy)
    assert local_model_identity(copy) == local_model_identity(folder)
    assert model_identity(str(folder)) == local_model_identity(folder)
    nested = fake_model(tmp_path / "c" / "e5" / "model")  # a folder named "model": its parent names it
    assert local_model_identity(nested)[0] == "local/e5"


def test_hidden_files_and_editor_leftovers_are_not_part_of_the_model(tmp_path):
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main")
    (folder / ".cache" / "huggingface").mkdir(parents=True)
    (folder / ".cache" / "huggingface" / "x.lock").write_text("")
    (folder / ".config.json.swp").write_text("x")
    (folder / "config.json~").write_text("x")
    assert local_model_identity(folder)[1] == revision
    (folder / "tokenizer.json").write_text("{}")
    assert local_model_identity(folder)[1] != revision


def test_a_file_renamed_is_another_model(tmp_path):
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    assert local_model_identity(folder)[1] != revision


@pytest.mark.parametrize("content", ["{not json", '{"files": [1, 2]}', '{"files": {"/x": {"size": "big"}}}', "[]", ""])
def test_a_corrupt_fingerprints_file_is_ignored_and_rewritten(tmp_path, hashed, own_fingerprints, content):
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    models._digests.clear()
    own_fingerprints.write_text(content)
    hashed.clear()
    assert local_model_identity(folder)[1] == revision
    assert sorted(hashed) == ["config.json", "model.safetensors"]
    assert len(json.loads(own_fingerprints.read_text())["files"]) == 2  # rewritten whole


def test_a_wrong_digest_in_the_fingerprints_file_is_believed_only_for_that_exact_file(tmp_path, own_fingerprints):
    """(The file is keyed by path, size, mtime and inode: an entry for another state is not used.)"""
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    stored = json.loads(own_fingerprints.read_text())
    for entry in stored["files"].values():
        entry["size"] += 1
        entry["sha256"] = "0" * 64
    own_fingerprints.write_text(json.dumps(stored))
    models._digests.clear()
    assert local_model_identity(folder)[1] == revision


def test_an_unwritable_cache_folder_is_passed_over(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    folder = fake_model(tmp_path / "bge")
    assert local_model_identity(folder)[1].startswith("local-")


def test_without_r2med_cache_dir_the_user_cache_folder_keeps_the_fingerprints(tmp_path, monkeypatch):
    from r2med_tasks.context import default_cache_dir

    monkeypatch.delenv("R2MED_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    local_model_identity(fake_model(tmp_path / "bge"))
    assert (default_cache_dir() / "fingerprints.json").is_file()


def test_a_hub_cache_snapshot_keeps_the_hubs_name_and_revision(tmp_path):
    snapshot = fake_model(tmp_path / "hub" / "models--BAAI--bge-base-en-v1.5" / "snapshots" / "abc123")
    assert local_model_identity(snapshot) == ("BAAI/bge-base-en-v1.5", "abc123")


@pytest.mark.parametrize("ref", ["", "   "])
def test_an_empty_model_is_refused(ref):
    with pytest.raises(UserError) as e:
        check_model_ref(ref, option="st.model")
    assert str(e.value) == "-o st.model=: empty; give a hub id (org/name) or a model folder"


def test_a_folder_without_a_model_is_refused_and_not_read(tmp_path, hashed):
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "big.bin").write_bytes(b"x" * 1000)
    with pytest.raises(UserError) as e:
        check_model_ref(str(folder), option="st.model")
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"-o st.model={folder}: not a model folder")
    assert "config.json" in message and "modules.json" in message
    assert model_identity(str(folder)) == (str(folder), "unpinned") and hashed == []


@pytest.mark.parametrize("marker", ["config.json", "modules.json", "config_sentence_transformers.json",
                                    "sentence_bert_config.json", "adapter_config.json"])
def test_a_folder_with_a_model_configuration_is_accepted(tmp_path, marker):
    """The one configuration file makes a folder a model's (with or without the final slash);
    without it, the folder is refused."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / marker).write_text("{}")
    assert check_model_ref(str(tmp_path / "m"), option="st.model") is None
    assert check_model_ref(str(tmp_path / "m") + "/", option="st.model") is None
    (tmp_path / "m" / marker).unlink()
    with pytest.raises(UserError, match="not a model folder"):
        check_model_ref(str(tmp_path / "m"), option="st.model")


def test_the_cli_refuses_a_folder_without_a_model_in_one_line(run_cli, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    code, _, err = run_cli("run", "--plugin", "st", "-o", f"model={empty}", "--tasks", "sample",
                           "--output", tmp_path / "out", "--dry-run")
    assert code == 2 and "Traceback" not in err
    assert f"-o st.model={empty}: not a model folder" in err and len(err.strip().splitlines()) == 1
