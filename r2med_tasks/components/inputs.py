"""The files a component reads for a task, beyond the task's data, whose content can change its
result (replayed generations, a plugin's own per-task files). The component names them
(``inputs(task, *, folder)``); the runner reads each once and fingerprints it into the task's
identity before the stored result is checked, and hands the component the bytes it fingerprinted
(``context.input(label)``), so what a component reads is what the identity holds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import PluginError, UserError


@dataclass(frozen=True)
class TaskInputs:
    """One component's input files for one task: label (the file's path relative to the folder it
    was found in: never a machine path, so the identity is the same on any machine) -> its bytes."""

    who: str
    files: dict[str, bytes] = field(default_factory=dict)

    def identity(self) -> dict[str, str]:
        """What the task's identity holds of them: each label's sha256."""
        return {label: "sha256:" + hashlib.sha256(data).hexdigest() for label, data in sorted(self.files.items())}

    def read(self, label: str) -> bytes:
        """``context.input(label)``: the bytes fingerprinted, of a file the component named."""
        if label not in self.files:
            named = ", ".join(sorted(self.files)) or "none"
            raise PluginError(f"{self.who}: context.input({label!r}) names no file its inputs(task, folder=) gave for "
                              f"this task (it gave: {named}); a file read otherwise is not in the results' identity")
        return self.files[label]


def read_inputs(component: Any, task: Any, folder: Path | None, *, who: str) -> TaskInputs:
    """The files ``component.inputs(task, folder=folder)`` names (none without that method), read.
    ``folder``: the task's local data folder, None when its data comes from the hub."""
    if not callable(getattr(component, "inputs", None)):
        return TaskInputs(who)
    named = component.inputs(task, folder=folder)
    files = {}
    for label, path in dict(named or {}).items():
        parts = PurePosixPath(label).parts if isinstance(label, str) else ()
        if not parts or PurePosixPath(label).is_absolute() or ".." in parts or "\\" in label:
            raise PluginError(f"{who}: inputs() label {label!r}: a relative path with / (the file's path in the "
                              "folder it was found in), never a machine path")
        try:
            files[label] = Path(path).read_bytes()
        except FileNotFoundError:
            raise UserError(f"{path}: file not found ({who} reads it for {task.name})") from None
        except OSError as e:
            raise UserError(f"{path}: cannot be read ({e.strerror or e}; {who} reads it for {task.name})") from None
    return TaskInputs(who, files)
