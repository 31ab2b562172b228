"""The pure-Python analyzer against tokens recorded from pyserini 0.21's Lucene analyzer.

tests/data/lucene_analyzer_cases.json was produced once with the real thing
(``Analyzer(get_lucene_analyzer())``, Java 17); these tests need neither Java nor pyserini.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugins.bm25 import analyzer
from r2med_plugins.bm25.analyzer import (
    ANALYZER_VERSION,
    STOPWORDS,
    LuceneEnglishAnalyzer,
    analyze,
    analyze_many,
    porter_stem,
    tokenize,
)

REFERENCE = json.loads(
    (Path(__file__).parent / "data" / "lucene_analyzer_cases.json").read_text(encoding="utf-8")
)
CASES = REFERENCE["cases"]
REAL_TEXT = REFERENCE["real_text"]


def _case_id(case: dict) -> str:
    return ascii(case["text"][:40])


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_tokenizer_matches_lucene_standard_tokenizer(case: dict) -> None:
    assert tokenize(case["text"]) == case["tokens"]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_analyze_matches_pyserini(case: dict) -> None:
    assert analyze(case["text"]) == case["terms"]


def test_real_text_matches_pyserini() -> None:
    mismatches = [c["text"][:60] for c in REAL_TEXT if analyze(c["text"]) != c["terms"]]
    assert mismatches == []


def test_porter_stems_match_lucene() -> None:
    stems = REFERENCE["stems"]
    assert {word: porter_stem(word) for word in stems} == stems


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        # Departures of Lucene's (Porter's reference) stemmer that Snowball's "porter" lacks.
        ("analogi", "analog"),
        ("sensibli", "sensibl"),
        ("abli", "abli"),
        # Words of one or two UTF-16 units are never stemmed.
        ("is", "is"),
        ("as", "as"),
        # Beyond the BMP a character is two UTF-16 units: long enough to stem, and no "double
        # consonant" between two equal characters.
        ("\U0001d431s", "\U0001d431"),
        ("a\U0001d431\U0001d431ing", "a\U0001d431\U0001d431"),
    ],
)
def test_porter_stem_edge_cases(word: str, stem: str) -> None:
    assert porter_stem(word) == stem


def test_documented_example() -> None:
    assert analyze("City buses are running on time.") == ["citi", "buse", "run", "time"]


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("7.2 3,000mg 5mg/kg", ["7.2", "3,000mg", "5mg", "kg"]),
        ("IL-6 COVID-19 HbA1c CD4+", ["il", "6", "covid", "19", "hba1c", "cd4"]),
        ("John's users' boss’s", ["john", "user", "boss"]),
        ("ΟΔΟΣ İ", ["οδοσ", "i"]),  # Java lower-casing: no final sigma, no combining dot
    ],
)
def test_spot_checks(text: str, terms: list[str]) -> None:
    assert analyze(text) == terms


def test_long_runs_are_cut_into_255_unit_tokens() -> None:
    assert [len(t) for t in tokenize("a" * 600)] == [255, 255, 90]
    # a character outside the BMP is two units and is never split
    assert [len(t) for t in tokenize("a" * 254 + "\U0001d431" + "b")] == [254, 2]


def test_stopwords_are_lucenes_english_set() -> None:
    assert len(STOPWORDS) == 33
    assert analyze(" ".join(sorted(STOPWORDS))) == []


def test_analyze_many_and_small_caches_agree() -> None:
    texts = [c["text"] for c in CASES] * 2
    expected = [c["terms"] for c in CASES] * 2
    assert analyze_many(texts) == expected
    tiny = LuceneEnglishAnalyzer(max_cache_entries=3)
    assert tiny.analyze_many(texts) == expected
    tiny.clear_cache()
    assert tiny.analyze(texts[4]) == expected[4]


def test_every_first_character_is_accepted() -> None:
    # The scanner relies on JFlex's catch-all rule: any single character is a (possibly ignored)
    # match, so scanning always advances.
    n_classes = max(analyzer._CLASS_IDS) + 1
    assert all(analyzer._KIND[analyzer._NEXT[analyzer._START][c]] for c in range(n_classes))


def test_version_is_declared() -> None:
    assert isinstance(ANALYZER_VERSION, str) and ANALYZER_VERSION


def test_threads_stem_as_one_thread_does() -> None:
    """Queries are analysed on several threads at once (an agent's searches, one per request in
    flight): each gets the stems one thread gives, never another's half-stemmed word. The
    interpreter switches threads every microsecond here, so shared state would show at once."""
    import sys
    import threading

    stems = REFERENCE["stems"]
    words = list(stems) * 20
    got: list[dict[str, str] | BaseException] = []

    def stem_all() -> None:
        try:
            got.append({word: porter_stem(word) for word in words})
        except BaseException as e:  # noqa: BLE001 - reported below
            got.append(e)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=stem_all) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    assert got == [stems] * 4
