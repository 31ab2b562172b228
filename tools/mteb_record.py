"""MTEB's R2MED results, recorded: every R2MED TaskResult of the MTEB results repository
(embeddings-benchmark/results) at one commit, into ``r2med_tasks/data/published/mteb_r2med.json``
(shown by ``r2med leaderboard --published all`` as MTEB results) and its sha256 beside it.

Only the R2MED tasks' files are read (by name: no other file is opened), and of each: ``main_score``
and ``ndcg_at_10`` of its first test score block, its ``dataset_revision`` and ``mteb_version``, its
path and its git blob id, so each figure can be checked against the repository at the commit. A
model is keyed as the board keys results folders, so its rows merge with the user's.

``python -m tools.mteb_record SRC [--commit REV] [--date DATE] [--output FILE]``. SRC is one of:

- a checkout of the repository (``git clone --depth 1 https://github.com/embeddings-benchmark/results``):
  its files are read from disk, its commit and commit date are git's (``HEAD``), and a file that
  differs from ``HEAD`` is refused;
- a bare git directory (or any git directory, read at ``--commit``, default ``HEAD``): the files are
  read with git, nothing is checked out;
- a folder extracted with ``git archive <commit> results | tar -x -C DIR`` (no git): give the
  commit with ``--commit`` and its date (ISO 8601, ``git log -1 --format=%cI <commit>``) with
  ``--date``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from r2med_tasks.files import atomic
from r2med_tasks.results.layout import EXPERIMENTS, MODEL_META, experiment_name
from r2med_tasks.board.published import MTEB_RECORD, MTEB_REPOSITORY
from r2med_tasks.tasks.specs import R2MED_TASKS

TASK_NAMES = [t.name for t in R2MED_TASKS]
# A TaskResult of an R2MED task in the repository: results/<org__model>/<revision>/[experiments/<name>/]<Task>.json
RESULT_PATH = re.compile(rf"^results/([^/]+)/([^/]+)/(?:{EXPERIMENTS}/([^/]+)/)?({'|'.join(TASK_NAMES)})\.json$")
# What the record keeps of a model's model_meta.json (those it gives, not null): the board's facts.
META_FIELDS = ("release_date", "n_parameters", "embed_dim", "max_tokens", "license", "open_weights", "reference",
               "model_type")
NOTE = ("R2MED tasks only; main_score and ndcg_at_10 (0-1) of each file's first test score block, as it gives "
        "them; file: its path in the repository at the commit, blob: its git blob id")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


def blob_id(data: bytes) -> str:
    """git's id of a file of this content (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Checkout:
    """A folder holding the repository's ``results/`` (a checkout, or a ``git archive`` extraction),
    or the ``results/`` folder itself."""

    def __init__(self, root: Path) -> None:
        self.root = root if (root / "results").is_dir() else root.parent
        if not (self.root / "results").is_dir():
            raise SystemExit(f"{root}: no results/ folder (a clone of {MTEB_REPOSITORY})")

    def paths(self) -> list[str]:
        found = []
        for pattern in ("*/*/R2MED*.json", f"*/*/{EXPERIMENTS}/*/R2MED*.json"):
            found += [p.relative_to(self.root).as_posix() for p in (self.root / "results").glob(pattern)]
        return sorted(p for p in found if RESULT_PATH.match(p))

    def read(self, path: str) -> bytes | None:
        file = self.root / path
        return file.read_bytes() if file.is_file() else None

    def blob(self, path: str, data: bytes) -> str:
        return blob_id(data)

    def commit(self, commit: str | None, date: str | None, paths: list[str]) -> tuple[str, str]:
        """The commit the files are (git's ``HEAD``, each file checked against it; else as given)."""
        inside = subprocess.run(["git", "-C", str(self.root), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True).stdout.strip() == "true"
        if not inside:
            if not (commit and date):
                raise SystemExit(f"{self.root}: not a git checkout; give the commit its files are (--commit) and "
                                 "its date (--date, git log -1 --format=%cI <commit>)")
            return commit, date
        head = git(self.root, "rev-parse", "HEAD").strip()
        if commit and not head.startswith(commit):
            raise SystemExit(f"{self.root}: checked out at {head}, not {commit}")
        at_head = {}
        for i in range(0, len(paths), 200):
            for line in git(self.root, "ls-tree", "HEAD", "--", *paths[i:i + 200]).splitlines():
                meta, path = line.split("\t", 1)
                at_head[path] = meta.split()[2]
        changed = [p for p in paths if at_head.get(p) != blob_id((self.root / p).read_bytes())]
        if changed:
            raise SystemExit(f"{self.root}: {len(changed)} files differ from HEAD ({changed[0]}, …): record a clean "
                             "checkout")
        return head, git(self.root, "log", "-1", "--format=%cI", "HEAD").strip()


class GitTree:
    """A git directory (bare or not) read at a commit, nothing checked out."""

    def __init__(self, gitdir: Path, commit: str) -> None:
        self.gitdir = gitdir
        self.commit_id = git(gitdir, "rev-parse", "--verify", f"{commit}^{{commit}}").strip()
        self.blobs = {}
        for line in git(gitdir, "ls-tree", "-r", self.commit_id, "--", "results").splitlines():
            meta, path = line.split("\t", 1)
            self.blobs[path] = meta.split()[2]

    def paths(self) -> list[str]:
        return sorted(p for p in self.blobs if RESULT_PATH.match(p))

    def read(self, path: str) -> bytes | None:
        blob = self.blobs.get(path)
        return None if blob is None else subprocess.run(["git", "-C", str(self.gitdir), "cat-file", "blob", blob],
                                                        check=True, capture_output=True).stdout

    def blob(self, path: str, data: bytes) -> str:
        return self.blobs[path]

    def commit(self, commit: str | None, date: str | None, paths: list[str]) -> tuple[str, str]:
        return self.commit_id, git(self.gitdir, "log", "-1", "--format=%cI", self.commit_id).strip()


def source_of(src: Path, commit: str | None):
    """The reader of ``src``: a git directory (``HEAD`` and ``objects/`` in it) read at ``commit``, else a folder."""
    if (src / "HEAD").is_file() and (src / "objects").is_dir():
        return GitTree(src, commit or "HEAD")
    return Checkout(src)


def build(src: Path, *, commit: str | None = None, date: str | None = None,
          warn=lambda line: print(line, file=sys.stderr)) -> dict:
    """The record of the R2MED results under ``src`` (see the module's docstring); ``warn``: each
    file left out, one line saying why."""
    tree = source_of(src, commit)
    paths = tree.paths()
    commit_id, commit_date = tree.commit(commit, date, paths)
    if not re.fullmatch(r"[0-9a-f]{40}", commit_id):
        raise SystemExit(f"--commit {commit_id}: give the full 40-character commit id")
    datetime.fromisoformat(commit_date)  # (an ISO 8601 date, or ValueError)
    models: dict[tuple, dict] = {}
    metas: dict[str, dict] = {}
    for path in paths:
        org_model, revision_folder, experiment_folder, task = RESULT_PATH.match(path).groups()
        folder = path.rsplit("/", 1)[0]
        if folder not in metas:  # (the folder's own, as ResultsFolder reads it: an experiment's in its folder)
            raw = tree.read(f"{folder}/{MODEL_META}")
            try:
                metas[folder] = json.loads(raw) if raw is not None else {}
            except ValueError:
                warn(f"{folder}/{MODEL_META}: not JSON; the folder's name names the model")
                metas[folder] = {}
        meta = metas[folder] if isinstance(metas[folder], dict) else {}
        data = tree.read(path)
        try:
            result = json.loads(data)
            test = result["scores"]["test"][0]
            main, ndcg = test["main_score"], test.get("ndcg_at_10")
            if result["task_name"] != task or isinstance(main, bool) or not isinstance(main, (int, float)) \
                    or not 0 <= main <= 1:
                raise ValueError(f"task_name {result['task_name']!r}, main_score {main!r}")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            warn(f"{path}: not an mteb TaskResult of {task} with a test score ({e}); left out")
            continue
        if ndcg != main:
            warn(f"{path}: main_score {main} is not its ndcg_at_10 {ndcg}; recorded as the file gives them")
        kwargs = meta.get("experiment_kwargs")
        experiment = experiment_name(kwargs) if isinstance(kwargs, dict) else experiment_folder
        name = str(meta.get("name") or org_model.replace("__", "/"))
        key = (name, str(meta.get("revision") or revision_folder), experiment)
        model = models.setdefault(key, {
            "name": key[0], "revision": key[1], "experiment": experiment,
            **({"experiment_kwargs": kwargs} if isinstance(kwargs, dict) and kwargs else {}),
            "folder": folder, "model_meta": {k: meta[k] for k in META_FIELDS if meta.get(k) is not None},
            "tasks": {}})
        if task in model["tasks"]:
            warn(f"{path}: {task} of {name} at {key[1]} is recorded from {model['tasks'][task]['file']}; left out")
            continue
        model["tasks"][task] = {"main_score": main, "ndcg_at_10": ndcg,
                                "dataset_revision": result.get("dataset_revision"),
                                "mteb_version": result.get("mteb_version"), "file": path,
                                "blob": tree.blob(path, data)}
    for model in models.values():
        model["tasks"] = {t: model["tasks"][t] for t in TASK_NAMES if t in model["tasks"]}
    return {"repository": MTEB_REPOSITORY, "commit": commit_id, "commit_date": commit_date,
            "generated_by": "python -m tools.mteb_record", "note": NOTE,
            "models": [models[k] for k in sorted(models, key=lambda k: (k[0].lower(), k[1], k[2] or ""))]}


def dumps(record: dict) -> str:
    """The record as the package ships it: a line per model's head and per task, keys in order."""
    lines = ["{", *(f"  {json.dumps(k)}: {json.dumps(record[k])}," for k in record if k != "models"), '  "models": [']
    for i, model in enumerate(record["models"]):
        head = {k: v for k, v in model.items() if k != "tasks"}
        lines.append("    {" + json.dumps(head, ensure_ascii=False)[1:-1] + ', "tasks": {')
        tasks = list(model["tasks"].items())
        for j, (task, result) in enumerate(tasks):
            lines.append(f"      {json.dumps(task)}: {json.dumps(result)}" + ("," if j < len(tasks) - 1 else ""))
        lines.append("    }}" + ("," if i < len(record["models"]) - 1 else ""))
    return "\n".join([*lines, "  ]", "}"]) + "\n"


def checksum_line(path: Path) -> str:
    """``path``'s ``sha256sum`` line, the file named as it lies beside the line's file."""
    return f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n"


def write(record: dict, output: Path = MTEB_RECORD) -> None:
    """The record and its sha256 (``<output>.sha256``, beside it)."""
    atomic.write_text(output, dumps(record))
    atomic.write_text(output.with_suffix(".sha256"), checksum_line(output))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mteb_record", description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help=f"a clone of {MTEB_REPOSITORY}, a git directory, or a folder "
                                               "extracted with git archive")
    parser.add_argument("--commit", help="a git directory: the commit to read (default HEAD); an extracted folder: "
                                         "the commit it was extracted from (full id)")
    parser.add_argument("--date", help="an extracted folder: the commit's date (git log -1 --format=%%cI)")
    parser.add_argument("--output", type=Path, default=MTEB_RECORD, help="default: the package's record")
    args = parser.parse_args(argv)
    record = build(args.src, commit=args.commit, date=args.date)
    write(record, args.output)
    tasks = sum(len(m["tasks"]) for m in record["models"])
    print(f"{args.output}: {len(record['models'])} models, {tasks} results, {record['repository']}@"
          f"{record['commit'][:7]} ({record['commit_date']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
