"""R2MED's eight datasets as MTEB-style retrieval tasks, plus the offline ``sample`` task. Names,
hub paths and revisions are mteb's, so results written here merge with published MTEB results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .datafiles import FILES
from .loading import load_hub, load_local, local_revision
from .taskdata import TaskData
from ..errors import UserError

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata

GROUPS = {
    "qa-reference": "Q&A reference retrieval",
    "clinical-evidence": "clinical evidence retrieval",
    "clinical-case": "clinical case retrieval",
}


@dataclass(frozen=True)
class TaskSpec:
    """A retrieval task: where its data lives and how it is named. ``key`` is the upstream code's
    dataset key, which instruction tables use."""

    name: str
    short_name: str
    description: str
    group: str | None = None
    hub_path: str | None = None
    revision: str | None = None
    local_path: Path | None = None
    key: str | None = None
    aliases: tuple[str, ...] = ()
    reference: str | None = None
    date: tuple[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_r2med(self) -> bool:
        return bool(self.hub_path and self.hub_path.startswith("R2MED/"))

    def find_folder(self, data_dir: Path, *, only_task: bool) -> Path:
        """The folder holding this task's files: ``DIR/<short name>/`` (any case), or a flat ``DIR``
        when it is the only task asked for."""
        if not data_dir.is_dir():
            raise UserError(f"--data-dir {data_dir}: not a folder")
        candidates = [data_dir / n for n in (self.short_name, self.name)]
        candidates += [p for p in data_dir.iterdir() if p.is_dir() and p.name.lower() == self.short_name.lower()]
        for folder in candidates:
            if (folder / FILES[0]).exists():
                return folder
        if only_task and (data_dir / FILES[0]).exists():
            return data_dir
        raise UserError(
            f"--data-dir {data_dir}: no data for {self.short_name}; expected "
            f"{data_dir / self.short_name / FILES[0]} (and {FILES[1]}, {FILES[2]} beside it)"
        )

    def source(self, data_dir: Path | None = None, *, only_task: bool = False) -> TaskSource:
        """Where a run reads this task's data, resolved once: ``data_dir``'s folder for it (a flat
        ``data_dir`` when it is the only task), else the package's folder, else the hub. A one-line
        UserError when ``data_dir`` holds no data for it."""
        if data_dir is not None:
            return TaskSource(self, self.find_folder(data_dir, only_task=only_task), from_data_dir=True)
        return TaskSource(self, self.local_path, from_data_dir=False)

    def load(self, data_dir: Path | None = None, *, only_task: bool = False,
             cache_dir: Path | None = None) -> TaskData:
        """This task's data, resolved and loaded in one call."""
        return self.source(data_dir, only_task=only_task).load(cache_dir=cache_dir)

    def mteb_metadata(self, revision: str) -> TaskMetadata:
        """mteb's TaskMetadata for this task, carrying the revision of the data actually used."""
        from ..mteb_adapter import task_metadata

        return task_metadata(self.name, revision, lambda: dict(
            name=self.name,
            description=self.description,
            dataset={"path": self.hub_path or f"local/{self.short_name}", "revision": revision},
            reference=self.reference,
            type="Retrieval",
            category="t2t",
            modalities=["text"],
            eval_splits=["test"],
            eval_langs=["eng-Latn"],
            main_score="ndcg_at_10",
            domains=["Medical"],
            date=self.date,
            task_subtypes=["Article retrieval"],
            license="cc-by-4.0",
            annotations_creators="LM-generated and reviewed",
            dialect=[],
            sample_creation="found",
            bibtex_citation="",
        ))

    def to_mteb_task(self, data_dir: Path | None = None):
        """An ``AbsTaskRetrieval`` instance that loads through this harness, for ``mteb.evaluate``."""
        from ..mteb_adapter import retrieval_task

        data = self.load(data_dir, only_task=True)
        return retrieval_task(self.name, self.mteb_metadata(data.revision), lambda: (
            dict(zip(data.corpus.ids, data.corpus.texts)), {q.id: q.text for q in data.queries}, data.qrels))


@dataclass(frozen=True)
class TaskSource:
    """Where one task's data is read from in a run (:meth:`TaskSpec.source`), resolved once and
    passed around: a local ``folder`` (``--data-dir``'s, or the package's own) or the hub (None);
    what identifies that data (:meth:`identity`) and how it loads (:meth:`load`)."""

    task: TaskSpec
    folder: Path | None
    from_data_dir: bool  # the folder is --data-dir's (source "local"), not the package's ("package")

    @property
    def local(self) -> bool:
        """Whether the data is read from local files (results then go to the local-data tree)."""
        return self.folder is not None

    def identity(self, revision: str | None = None) -> dict[str, Any]:
        """Which data the run reads, without loading it: the hub path at its revision, or the
        checksum of local files (``revision``: already known from loading). ``official``: R2MED's
        own data at mteb's pinned revision, the only data published numbers speak of."""
        task = self.task
        if self.folder is not None:
            return {"source": "local" if self.from_data_dir else "package",
                    "revision": revision or local_revision(self.folder), "official": False}
        if task.hub_path and task.revision:
            return {"source": "hub", "path": task.hub_path, "revision": revision or task.revision,
                    "official": task.is_r2med and (revision or task.revision) == task.revision}
        raise UserError(f"task {task.name} has no data source; pass --data-dir DIR")

    def load(self, *, cache_dir: Path | None = None) -> TaskData:
        """The task's data. ``cache_dir``: the run's cache folder, where a local corpus's validated
        ids are kept so that a later load parses its texts only when a component reads them."""
        if self.folder is not None:
            return load_local(self.folder, cache_dir=cache_dir)
        if self.task.hub_path and self.task.revision:
            return load_hub(self.task.hub_path, self.task.revision)
        raise UserError(f"task {self.task.name} has no data source; pass --data-dir DIR")


def _r2med(name, short, group, key, revision, date, n_docs, n_queries) -> TaskSpec:
    return TaskSpec(
        name=f"R2MED{name}Retrieval",
        short_name=short,
        description=f"R2MED {short}: {GROUPS[group]} ({n_queries} queries, {n_docs:,} documents).",
        group=group,
        hub_path=f"R2MED/{short}",
        revision=revision,
        key=key,
        aliases=(short,),
        reference=f"https://huggingface.co/datasets/R2MED/{short}",
        date=date,
        extra={"n_docs": n_docs, "n_queries": n_queries},
    )


# Order, groups and counts follow the paper's table (and the authors' README); revisions and dates are mteb's.
R2MED_TASKS: tuple[TaskSpec, ...] = (
    _r2med("Biology", "Biology", "qa-reference", "Stack-Biology",
           "8b9fec2db9eda4b5742d03732213fbaee8169556", ("2011-01-01", "2024-06-30"), 57359, 103),
    _r2med("Bioinformatics", "Bioinformatics", "qa-reference", "Stack-Bioinformatics",
           "6021fce366892cbfd7837fa85a4128ea93315e18", ("2011-01-01", "2025-05-31"), 47473, 77),
    _r2med("MedicalSciences", "Medical-Sciences", "qa-reference", "Stack-Medical",
           "1b48911514c80bf9182222d99752ad75e23b4b47", ("2011-01-01", "2025-05-31"), 34810, 88),
    _r2med("MedXpertQAExam", "MedXpertQA-Exam", "clinical-evidence", "MedXpertQA-Exam",
           "b457ea43db9ae5db74c3a3e5be0a213d0f85ac3a", ("1995-01-01", "2025-01-31"), 61379, 97),
    _r2med("MedQADiag", "MedQA-Diag", "clinical-evidence", "MedQA-Diag",
           "78b585990279cc01a493f876c1b0cf09557fba57", ("1992-01-01", "2020-09-30"), 56250, 118),
    _r2med("PMCTreatment", "PMC-Treatment", "clinical-evidence", "PMC-Treat",
           "53c489a44a3664ba352c07550b72b4525a5968d5", ("2000-02-01", "2025-03-31"), 28954, 150),
    _r2med("PMCClinical", "PMC-Clinical", "clinical-case", "PMCPatients",
           "812829522f7eaa407ef82b96717be85788a50f7e", ("2000-02-01", "2023-04-30"), 60406, 114),
    _r2med("IIYiClinical", "IIYi-Clinical", "clinical-case", "IIYiPatients-EN",
           "974abbc9bc281c3169180a6aa5d7586cfd2f5877", ("2002-07-01", "2025-05-31"), 10449, 129),
)

PINNED_REVISIONS = {t.name: t.revision for t in R2MED_TASKS}
SHORT_NAMES = {t.name: t.short_name for t in R2MED_TASKS}

SAMPLE_TASK = TaskSpec(
    name="R2MEDSampleRetrieval",
    short_name="sample",
    description="Offline sample written for this harness: 48 short medical passages, 10 queries "
    "of the three R2MED task types. For quick starts and tests, not for reporting.",
    local_path=Path(__file__).parents[1] / "data" / "sample",
    key="Stack-Medical",  # instructions and prompts worded for a medical Q&A post
    aliases=("sample",),
    extra={"n_docs": 48, "n_queries": 10},
)


def normalize(name: str) -> str:
    """Matching key: case, dashes, underscores and spaces don't matter (``pmc_clinical``)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())
