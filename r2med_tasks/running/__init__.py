"""Running a pipeline: plugin discovery, the registry of components and tasks, pipelines and their
options, the run request every entry point builds, the one runner, and r2med as an mteb model."""
