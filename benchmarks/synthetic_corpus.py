"""Synthetic corpora at R2MED's full scale, in R2MED's layout, for timing (not for scores).

Document and query counts and mean lengths (words) follow the paper's table (r2med-spec.md §1.1):
357k documents and ~82M words over the eight datasets. Words are drawn, Zipf-distributed and
seeded, from English text found on this machine (the Python standard library's sources), mixed
with the tokens that make analyzers work: numbers, decimals, hyphenated terms, possessives, units.

    python benchmarks/synthetic_corpus.py OUT_DIR [--scale 1.0] [--seed 0]
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import json
import re
import sysconfig
from collections import Counter
from pathlib import Path

import numpy as np

# name: (documents, queries, mean document words, mean query words)
R2MED_SHAPE = {
    "Biology": (57359, 103, 83.6, 115.2),
    "Bioinformatics": (47473, 77, 150.5, 273.8),
    "Medical-Sciences": (34810, 88, 122.7, 107.1),
    "MedXpertQA-Exam": (61379, 97, 154.9, 233.2),
    "MedQA-Diag": (56250, 118, 179.7, 167.8),
    "PMC-Treatment": (28954, 150, 149.3, 449.3),
    "PMC-Clinical": (60406, 114, 480.4, 182.8),
    "IIYi-Clinical": (10449, 129, 1273.0, 602.3),
}
SPECIAL = ["7.2", "3,000mg", "IL-6", "COVID-19", "HbA1c", "beta-blocker", "patient's", "2-3", "10–20",
           "5mg/kg", "CD4+", "TNF-α", "Ménière's", "N-acetylcysteine", "1,25-dihydroxyvitamin"]


def vocabulary(limit: int = 60000) -> list[str]:
    """Distinct words from the standard library's sources, most frequent first."""
    counts: Counter[str] = Counter()  # insertion-ordered: ties keep first-seen order
    word = re.compile(r"[A-Za-z][a-z]{1,14}")
    for path in _first_sources(Path(sysconfig.get_paths()["stdlib"]), 3000):
        counts.update(word.findall(path.read_text(errors="ignore")))
    return sorted(counts, key=lambda w: -counts[w])[:limit]


def _first_sources(root: Path, n: int) -> list[Path]:
    """``sorted(root.rglob("*.py"))[:n]`` without walking the whole tree (site-packages can be
    huge): a depth-first walk with each folder's entries in name order yields paths in sorted
    order, and symlinked folders are not entered, as with ``rglob``."""
    found: list[Path] = []

    def walk(folder: Path) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if len(found) >= n:
                return
            if fnmatch.fnmatchcase(entry.name, "*.py"):
                found.append(folder / entry.name)
            try:
                is_dir = entry.is_dir() and not entry.is_symlink()
            except OSError:
                is_dir = False
            if is_dir:
                walk(folder / entry.name)

    walk(root)
    return found


def texts(rng: np.random.Generator, words: np.ndarray, n: int, mean_len: float) -> list[str]:
    lengths = np.maximum(5, rng.gamma(2.0, mean_len / 2.0, size=n)).astype(int)
    zipf = 1.0 / np.arange(1, len(words) + 1)
    tokens = words[rng.choice(len(words), size=int(lengths.sum()), p=zipf / zipf.sum())]
    special = rng.random(len(tokens)) < 0.01
    tokens[special] = rng.choice(SPECIAL, size=int(special.sum()))
    out, start = [], 0
    for length in lengths:
        out.append(" ".join(tokens[start:start + length]) + ".")
        start += length
    return out


def write(out_dir: Path, scale: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = np.array(vocabulary(), dtype=object)
    for name, (n_docs, n_queries, doc_len, query_len) in R2MED_SHAPE.items():
        folder = out_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        n_docs = max(10, int(n_docs * scale))
        docs = texts(rng, words, n_docs, doc_len)
        queries = texts(rng, words, n_queries, query_len)
        with (folder / "corpus.jsonl").open("w") as f:
            f.writelines(json.dumps({"id": f"{name}-d{i}", "text": t}) + "\n" for i, t in enumerate(docs))
        with (folder / "query.jsonl").open("w") as f:
            f.writelines(json.dumps({"id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(queries))
        with (folder / "qrels.jsonl").open("w") as f:
            for i in range(n_queries):
                for j in rng.choice(n_docs, size=3, replace=False):
                    f.write(json.dumps({"q_id": f"q{i}", "p_id": f"{name}-d{j}", "score": 1}) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each corpus to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write(args.out_dir, args.scale, args.seed)
