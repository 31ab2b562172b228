"""Training data that overlaps a task's source, said out loud. A model says it in its component's
``model_meta()`` under :data:`OVERLAP_KEY`, a published paper's row in its record; each note names
the R2MED dataset (short name), the training set, who reported it and how far it was checked. The
board shows the notes beside the row: they never change a score or a rank.
"""

from __future__ import annotations

from typing import Any

from ..tasks.specs import R2MED_TASKS

OVERLAP_KEY = "training_overlap"
NOTE_FIELDS = ("task", "dataset", "source", "status")  # every note has them all, as non-empty text
OVERLAP_MARK = "†"  # the board's mark beside a system with a note (the note itself below the table, or its title)


def overlap_notes(value: Any) -> list[dict[str, str]] | None:
    """``value`` as a list of notes ({task, dataset, source, status}, and ``model`` where a row
    names which of its models), or None when it is no such list (a file or a plugin gave something
    else). Missing (None) is no note."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        return None
    tasks = {t.short_name for t in R2MED_TASKS}
    notes = []
    for note in value:
        if not isinstance(note, dict) or not set(NOTE_FIELDS) <= set(note) or not set(note) <= {*NOTE_FIELDS, "model"} \
                or not all(isinstance(v, str) and v.strip() for v in note.values()) or note["task"] not in tasks:
            return None
        notes.append({k: note[k] for k in ("model", *NOTE_FIELDS) if k in note})
    return notes


def overlap_text(note: dict[str, str]) -> str:
    """One note as the board says it: "Diver-Retriever-4B: training data includes truehealth/medqa,
    the source of MedQA-Diag (reported by ...; not independently confirmed)"."""
    who = f"{note['model']}: " if note.get("model") else ""
    return (f"{who}training data includes {note['dataset']}, the source of {note['task']} "
            f"({note['source']}; {note['status']})")
