"""The public modules that moved into sub-packages still import at their old paths for one release:
each name forwards to the new module, and the import warns once, naming the new place."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from r2med_tasks._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_forwards_and_warns(old):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace: dict = {}
        exec(compile(f"import {old} as module", __file__, "exec"), namespace)  # an import statement in this file
        module = namespace["module"]
    new = importlib.import_module(MOVED[old])
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert messages == [f"{old} moved to {MOVED[old]}; plugins import from r2med_tasks.plugin "
                        "(the old path goes in the next release)"]
    assert caught[0].filename == __file__  # the warning points at the importing line
    public = [n for n in vars(new) if not n.startswith("_")]
    assert public and all(getattr(module, n) is getattr(new, n) for n in public)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


@pytest.mark.process  # a fresh interpreter
def test_old_from_imports_work_in_a_fresh_process():
    """As a third-party plugin written before the move imports: ``from r2med_tasks.X import name``,
    the names renamed with the move (the fusion methods, the results folder) under their old names too."""
    code = ("import warnings; warnings.simplefilter('error')\n"
            "try:\n    from r2med_tasks.layout import run_folder\nexcept DeprecationWarning as e: print('warned', e)\n"
            "warnings.simplefilter('ignore')\n"
            "from r2med_tasks.layout import RunFolder, run_folder; from r2med_tasks.fusion import METHODS\n"
            "from r2med_tasks.results.layout import ResultsFolder, results_folder_of\n"
            "from r2med_tasks.scoring.fusion import FUSION_METHODS\n"
            "print(run_folder is results_folder_of and RunFolder is ResultsFolder, METHODS == FUSION_METHODS)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["warned r2med_tasks.layout moved to r2med_tasks.results.layout; plugins import from "
                                "r2med_tasks.plugin (the old path goes in the next release)", "True True"]


def test_the_namespace_holds_the_moved_modules_public_contract():
    """What plugins took from the old modules, they find in the namespace."""
    import r2med_tasks.plugin as api

    for name in ("results_folder_of", "run_name", "slug", "Options", "options_model", "Run", "read_trec", "Searcher",
                 "Corpus", "Query", "hookimpl", "fuse", "score", "top_k_indices", "check_model_ref", "Journal"):
        assert hasattr(api, name), name
