"""A computed task's outcome is built from what the runner computed and wrote, never read back:
equal, field for field, to what reading its results folder gives (a reused task's way), and so is
the run's average interval."""

from pathlib import Path

import pytest

from conftest import make_data_dir
from r2med_tasks.results.outcomes import TaskOutcome, average_ci


@pytest.fixture
def two_tasks(tmp_path) -> Path:
    return make_data_dir(tmp_path / "data")


def assert_as_read(outcome) -> None:
    from r2med_tasks.api import registry

    for task in outcome.tasks:
        (spec,) = registry().tasks([task.task])
        assert task.status == "computed"
        assert TaskOutcome.read(spec, task.results_dir, status="computed", official_data=task.official_data) == task
    assert average_ci(outcome.tasks) == outcome.average_ci


def llm(server, *, rerank: bool = True) -> dict:
    """HyDE (and the LLM reranker) through the local chat server, priced: usage and dollars in the cost."""
    reranker = {"llm-rerank.llm": f"{server.url}#test-model", "llm-rerank.price": (1, 2)}
    return {"llm": f"{server.url}#test-model", "price": (1, 2), **({"options": reranker} if rerank else {})}


def test_a_rewriter_retriever_and_reranker_run_outcome_is_what_its_folder_reads(evaluate, chat_server, two_tasks):
    outcome = evaluate("hyde", "bm25", "llm-rerank", tasks=["Biology", "Bioinformatics"], data_dir=two_tasks,
                       rerank_k=3, **llm(chat_server))
    assert all(t.usage is not None and t.seconds for t in outcome.tasks)
    assert_as_read(outcome)


def test_a_reranker_on_a_reused_first_stage_counts_its_recorded_cost_in_memory(evaluate, chat_server, two_tasks):
    evaluate("hyde", "bm25", tasks=["Biology"], data_dir=two_tasks, **llm(chat_server, rerank=False))
    outcome = evaluate("hyde", "bm25", "llm-rerank", tasks=["Biology"], data_dir=two_tasks, rerank_k=3,
                       **llm(chat_server))
    assert_as_read(outcome)


def test_a_computed_task_reads_no_per_query_file(evaluate, two_tasks, monkeypatch):
    """The reading path stays for reused tasks only."""
    from r2med_tasks.results.folder import ResultsFolder

    def refuse(*args, **kwargs):
        raise AssertionError("a computed task's outcome read back from its folder")

    monkeypatch.setattr(TaskOutcome, "read", refuse)
    monkeypatch.setattr(ResultsFolder, "per_query_scores", refuse)
    outcome = evaluate("bm25", tasks=["Biology", "Bioinformatics"], data_dir=two_tasks)
    monkeypatch.undo()
    assert_as_read(outcome)
