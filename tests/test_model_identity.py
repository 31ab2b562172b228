"""A local model's identity is a hash of its files' bytes (through linked files and folders),
remembered per file (in this process and in <cache>/fingerprints.json, by path, size, mtime, ctime
and inode) so an unchanged model is not read again, and a file written in place is; model options
that name no model are refused in one line."""

import json
import os
import shutil
import time

import pytest

from r2med_tasks.components import model_refs as models
from r2med_tasks.errors import UserError
from r2med_tasks.components.model_refs import ModelRef


def local_model_identity(folder, **kw):
    """A model folder's name and revision, as a model option naming it gets them."""
    return ModelRef(str(folder)).identity(**kw)


@pytest.fixture(autouse=True)
def own_fingerprints(tmp_path, monkeypatch):
    """This test's own persistent cache and an empty in-process one."""
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "_digests", {})
    saved_a_while_ago(monkeypatch)
    return tmp_path / "cache" / "fingerprints.json"


def saved_a_while_ago(monkeypatch):
    """Hash as if the files had been written a minute before (as a model usually was): a file
    changed within the last moments is read again each time (models.RACY_NS), so these tests'
    just-written files would never be remembered."""
    monkeypatch.setattr(models, "_now_ns", lambda: time.time_ns() + 60 * 10**9)


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


def write_in_place(file, data):
    """Write ``data`` (the file's size) over ``file`` in place and put its times back, as
    ``rsync -t --inplace`` or ``cp -p`` over an older checkpoint do: size, inode and mtime kept;
    only the ctime tells (the kernel sets it on every write, and on the utime that restores mtime)."""
    before = file.stat()
    assert len(data) == before.st_size
    deadline = time.monotonic() + 5
    while True:
        with open(file, "r+b") as f:
            f.write(data)
        os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = file.stat()
        if after.st_ctime_ns != before.st_ctime_ns or time.monotonic() > deadline:
            break
        time.sleep(0.01)  # still the clock tick of the first write: write again in the next one
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (before.st_size, before.st_ino, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns


def test_a_file_written_in_place_with_its_size_and_mtime_kept_is_another_revision(tmp_path, hashed,
                                                                                  own_fingerprints):
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    hashed.clear()
    assert local_model_identity(folder)[1] == revision and hashed == []  # remembered
    weights = folder / "model.safetensors"
    write_in_place(weights, weights.read_bytes()[::-1])
    edited = local_model_identity(folder)[1]
    assert edited != revision and hashed == ["model.safetensors"]
    models._digests.clear()  # another process: the fingerprints file does not answer for the old bytes
    assert local_model_identity(folder)[1] == edited
    copy = tmp_path / "copy" / "bge"
    shutil.copytree(folder, copy)
    assert local_model_identity(copy)[1] == edited  # the bytes decide


def test_a_file_changed_moments_ago_is_read_again(tmp_path, hashed, monkeypatch):
    """When in doubt, the bytes: a write within the same clock tick as the one before keeps every
    time the file has, so a digest is remembered only for a file last changed a while before."""
    monkeypatch.setattr(models, "_now_ns", time.time_ns)  # the files below were written just now
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    hashed.clear()
    assert local_model_identity(folder)[1] == revision
    assert sorted(hashed) == ["config.json", "model.safetensors"]  # not remembered: read again
    saved_a_while_ago(monkeypatch)
    hashed.clear()
    local_model_identity(folder)
    hashed.clear()
    assert local_model_identity(folder)[1] == revision and hashed == []


def test_fingerprints_written_before_ctimes_were_recorded_are_not_believed(tmp_path, own_fingerprints):
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder)[1]
    stored = json.loads(own_fingerprints.read_text())
    for entry in stored["files"].values():
        assert "ctime_ns" in entry
        del entry["ctime_ns"]
        entry["sha256"] = "0" * 64  # what an older r2med remembered of another state of the same stat
    own_fingerprints.write_text(json.dumps(stored))
    models._digests.clear()
    assert local_model_identity(folder)[1] == revision


def test_a_linked_subfolder_is_part_of_the_model(tmp_path):
    """``1_Pooling -> ../pooling``: the model loads its config through the link, so it is hashed."""
    folder = fake_model(tmp_path / "bge")
    pooling = tmp_path / "pooling"
    pooling.mkdir()
    (pooling / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (folder / "1_Pooling").symlink_to(pooling, target_is_directory=True)
    (folder / "tokenizer.json").symlink_to(tmp_path / "pooling" / "config.json")  # a linked file, as before
    revision = local_model_identity(folder)[1]
    assert [r for r, _ in models._model_files(folder)] == ["1_Pooling/config.json", "config.json",
                                                          "model.safetensors", "tokenizer.json"]
    copy = tmp_path / "copy" / "bge"
    shutil.copytree(folder, copy, symlinks=False)  # the same files, links resolved: the same model
    assert local_model_identity(copy)[1] == revision
    (pooling / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert local_model_identity(folder)[1] != revision


def test_a_link_loop_in_a_model_folder_ends_and_its_files_count_once(tmp_path):
    folder = fake_model(tmp_path / "bge")
    pooling = tmp_path / "pooling"
    pooling.mkdir()
    (pooling / "config.json").write_text("{}")
    (pooling / "model").symlink_to(folder, target_is_directory=True)  # back into the model: a cycle
    (folder / "1_Pooling").symlink_to(pooling, target_is_directory=True)
    (folder / "again").symlink_to(".", target_is_directory=True)  # the folder itself
    (folder / "sub").mkdir()
    (folder / "sub" / "up").symlink_to("..", target_is_directory=True)  # an ancestor
    (folder / "sub" / "top").symlink_to("/", target_is_directory=True)  # every folder's ancestor
    (folder / "outside").symlink_to(tmp_path, target_is_directory=True)  # the folder that holds the model
    (folder / "a").symlink_to("b")  # links to each other: neither resolves
    (folder / "b").symlink_to("a")
    (folder / "gone").symlink_to(tmp_path / "nothing-here")
    started = time.monotonic()
    name, revision = local_model_identity(folder)
    assert time.monotonic() - started < 10 and name == "local/bge" and revision.startswith("local-")
    assert [r for r, _ in models._model_files(folder)] == ["1_Pooling/config.json", "config.json",
                                                          "model.safetensors"]
    assert models.content_digest(folder) == models.content_digest(folder)


def test_a_folder_with_absurdly_many_files_is_refused_in_one_line(tmp_path, monkeypatch):
    folder = fake_model(tmp_path / "bge")
    (tmp_path / "elsewhere").mkdir()
    for i in range(3):
        (tmp_path / "elsewhere" / f"{i}.bin").write_bytes(b"x")
    (folder / "data").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    monkeypatch.setattr(models, "MAX_MODEL_FILES", 3)
    with pytest.raises(UserError) as e:
        local_model_identity(folder)
    assert str(e.value).startswith(f"{folder}: more than 3 files") and "\n" not in str(e.value)


def test_fingerprints_are_kept_in_the_cache_folder_given_and_nowhere_else(tmp_path, monkeypatch):
    """``cache_dir=``, or the run's (``fingerprints_in``, which ``r2med-run --cache-dir`` sets):
    nothing is written to $R2MED_CACHE_DIR or the user's cache folder."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "env-cache"))
    folder = fake_model(tmp_path / "bge")
    revision = local_model_identity(folder, cache_dir=tmp_path / "given")[1]
    assert len(json.loads((tmp_path / "given" / "fingerprints.json").read_text())["files"]) == 2
    models._digests.clear()
    with models.fingerprints_in(tmp_path / "run-cache"):
        assert ModelRef(str(folder)).identity()[1] == revision
    assert (tmp_path / "run-cache" / "fingerprints.json").is_file()
    assert not home.exists() and not (tmp_path / "env-cache").exists()
    assert models.fingerprints_file() == tmp_path / "env-cache" / "fingerprints.json"  # outside a run, as before


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
    """(The file is keyed by path, size, mtime, ctime and inode: an entry for another state is not used.)"""
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
    from r2med_tasks.components.context import default_cache_dir

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
        ModelRef(ref, option="st.model")
    assert str(e.value) == "-o st.model=: empty; give a hub id (org/name) or a model folder"


def test_a_folder_without_a_model_is_refused_and_not_read(tmp_path, hashed):
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "big.bin").write_bytes(b"x" * 1000)
    with pytest.raises(UserError) as e:
        ModelRef(str(folder), option="st.model")
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"-o st.model={folder}: not a model folder")
    assert "config.json" in message and "modules.json" in message
    assert hashed == []


@pytest.mark.parametrize("marker", ["config.json", "modules.json", "config_sentence_transformers.json",
                                    "sentence_bert_config.json", "adapter_config.json"])
def test_a_folder_with_a_model_configuration_is_accepted(tmp_path, marker):
    """The one configuration file makes a folder a model's (with or without the final slash);
    without it, the folder is refused."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / marker).write_text("{}")
    assert ModelRef(str(tmp_path / "m"), option="st.model").identity()[0] == "local/m"
    assert ModelRef(str(tmp_path / "m") + "/", option="st.model").identity()[0] == "local/m"
    (tmp_path / "m" / marker).unlink()
    with pytest.raises(UserError, match="not a model folder"):
        ModelRef(str(tmp_path / "m"), option="st.model")


def test_the_cli_refuses_a_folder_without_a_model_in_one_line(run_cli, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    code, _, err = run_cli("run", "--plugin", "st", "-o", f"model={empty}", "--tasks", "sample",
                           "--output", tmp_path / "out", "--dry-run")
    assert code == 2 and "Traceback" not in err
    assert f"-o st.model={empty}: not a model folder" in err and len(err.strip().splitlines()) == 1


def test_weights_are_known_by_their_content_wherever_the_folder_is(tmp_path):
    """``ModelRef.weights()``: the same files under another folder name are the same weights; other
    bytes are other weights; a hub id has no files to hash."""
    folder = fake_model(tmp_path / "bge")
    weights = ModelRef(str(folder)).weights()
    assert weights.startswith("sha256-") and len(weights) == len("sha256-") + 32
    assert ModelRef(str(shutil.copytree(folder, tmp_path / "copy"))).weights() == weights
    assert ModelRef(str(fake_model(tmp_path / "other", b"other bytes"))).weights() != weights
    with pytest.raises(UserError, match=r"^-o st\.model=org/name: not a local folder"):
        ModelRef("org/name", option="st.model").weights()
