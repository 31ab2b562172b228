"""The public modules that moved into sub-packages, importable at their old paths for
one release: ``import r2med_tasks.layout`` gives a thin module that forwards every name to
``r2med_tasks.results.layout`` and warns once (``DeprecationWarning``). Plugin authors import from
:mod:`r2med_tasks.plugin` instead; nothing in r2med itself uses the old paths (a test checks).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

MOVED = {
    "r2med_tasks.atomic": "r2med_tasks.files.atomic",
    "r2med_tasks.combine": "r2med_tasks.components.combine",
    "r2med_tasks.context": "r2med_tasks.components.context",
    "r2med_tasks.datafiles": "r2med_tasks.tasks.datafiles",
    "r2med_tasks.encoders": "r2med_tasks.components.encoders",
    "r2med_tasks.evaluation": "r2med_tasks.scoring.evaluation",
    "r2med_tasks.fusion": "r2med_tasks.scoring.fusion",
    "r2med_tasks.hookspecs": "r2med_tasks.components.hookspecs",
    "r2med_tasks.journal": "r2med_tasks.files.journal",
    "r2med_tasks.layout": "r2med_tasks.results.layout",
    "r2med_tasks.models": "r2med_tasks.components.model_refs",
    "r2med_tasks.options": "r2med_tasks.components.options",
    "r2med_tasks.ranking": "r2med_tasks.scoring.ranking",
    "r2med_tasks.runs": "r2med_tasks.scoring.runs",
    "r2med_tasks.searcher": "r2med_tasks.components.searcher",
    "r2med_tasks.taskdata": "r2med_tasks.tasks.taskdata",
}
# names that changed with the move: r2med_tasks.fusion.METHODS, r2med_tasks.layout.RunFolder and run_folder
RENAMED = {"METHODS": "FUSION_METHODS", "RunFolder": "ResultsFolder", "run_folder": "results_folder_of"}


class _Forwarding(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        target = importlib.import_module(MOVED[spec.name])
        module = types.ModuleType(spec.name, target.__doc__)

        def forward(name: str):
            return getattr(target, RENAMED.get(name, name))

        module.__getattr__ = forward  # type: ignore[method-assign]
        module.__dir__ = lambda: dir(target)  # type: ignore[method-assign]
        module.__all__ = getattr(target, "__all__", [n for n in vars(target) if not n.startswith("_")])
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        warnings.warn(f"{module.__name__} moved to {MOVED[module.__name__]}; plugins import from r2med_tasks.plugin "
                      "(the old path goes in the next release)", DeprecationWarning, stacklevel=2)


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.machinery.ModuleSpec(fullname, _Forwarding())
        return None


def install() -> None:
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(_OldPaths())
