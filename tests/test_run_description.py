"""One run is described once and carried: the results folder a pipeline writes carries its spec (a
folder opened by its path only reads), each task's data source is resolved once, the run's own
command is never parsed back, and the summary compares the configuration the run carried."""

from dataclasses import replace

import pytest

from r2med_tasks.results.folder import ResultsFolder
from r2med_tasks.results.identity import canonical


def test_a_folder_opened_by_its_path_reads_and_refuses_to_write(evaluate):
    outcome = evaluate("bm25")
    folder = ResultsFolder(outcome.results_dirs[0])
    assert folder.task_names() == ["R2MEDSampleRetrieval"] and folder.display_name() == "BM25"
    for write in (folder.claim, folder.prune, lambda: folder.status("R2MEDSampleRetrieval", {}),
                  lambda: folder.record_text("R2MEDSampleRetrieval")):
        with pytest.raises(TypeError, match=r"opened for reading; ResultsFolder\.for_pipeline"):
            write()
    written = ResultsFolder.for_pipeline(folder.path.parents[2], outcome.spec, local=True)  # (out/local-data/model/revision)
    assert written.path == folder.path and written.status("R2MEDSampleRetrieval", outcome.spec.task_identity(
        "R2MEDSampleRetrieval", folder.identity("R2MEDSampleRetrieval")["data"])).reuse


def test_a_run_never_parses_its_own_command(evaluate, monkeypatch):
    """The words that reproduce a run come from the spec it carried; parsing is for stored commands."""
    from r2med_tasks.running import request

    def refuse(*args, **kwargs):
        raise AssertionError("a run parsed a command")

    monkeypatch.setattr(request, "parse_command", refuse)
    monkeypatch.setattr(request, "parse_run_args", refuse)
    outcome = evaluate("bm25", options={"k1": 1.2})
    assert outcome.spec.command == ("r2med-run", "--plugin", "bm25", "-o", "k1=1.2")
    assert outcome.command.startswith("r2med-run --plugin bm25 -o k1=1.2 --tasks sample --output ")
    assert ResultsFolder(outcome.results_dirs[0]).record()["config"] == canonical(outcome.spec.config)


def test_the_runner_resolves_each_task_once(evaluate, data_dir, monkeypatch):
    """Where a task's data is read from (and so which folder its results go to) is asked once per
    task and run, not at each step that needs it."""
    from r2med_tasks.tasks.specs import TaskSpec

    asked: list[str] = []
    resolve = TaskSpec.source

    def counted(self, *args, **kwargs):
        asked.append(self.short_name)
        return resolve(self, *args, **kwargs)

    monkeypatch.setattr(TaskSpec, "source", counted)
    evaluate("bm25", tasks=["Biology", "Bioinformatics"], data_dir=data_dir)
    evaluate("bm25", tasks=["Biology", "Bioinformatics"], data_dir=data_dir)  # reused: asked as often
    assert asked == ["Biology", "Bioinformatics"] * 2


def test_the_summary_compares_the_configuration_the_run_carried(evaluate, data_dir, capsys):
    """A run of a published row's configuration on official data is set beside the row's numbers
    from what the run carried: its record on disk is not read back (here it is gone)."""
    from r2med_tasks.cli.run import print_summary

    outcome = evaluate("bm25", tasks=["Biology"], data_dir=data_dir)
    outcome.tasks = [replace(t, official_data=True) for t in outcome.tasks]  # as a run on the hub's data
    ResultsFolder(outcome.results_dirs[0]).record_file.unlink()
    print_summary(outcome, as_json=False)
    assert "the R2MED leaderboard's row 'BM25'" in capsys.readouterr().out


def test_a_published_rows_configuration_is_built_once(monkeypatch):
    from r2med_tasks.board.leaderboard import published_row_for
    from r2med_tasks.board.sources import command_config
    from r2med_tasks.running import pipelines

    built, build = [], pipelines.build_pipeline

    def counted(*args, **kwargs):
        built.append(args[1])
        return build(*args, **kwargs)

    monkeypatch.setattr(pipelines, "build_pipeline", counted)
    command_config.cache_clear()
    config = command_config("r2med-run --plugin bm25")
    assert [published_row_for("BM25", config).system for _ in range(3)] == ["BM25"] * 3
    assert built == [["bm25"]]
