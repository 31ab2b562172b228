"""Running a pipeline: plugin discovery (``discovery``), the registry of components and tasks
(``registry``), pipelines and their options (``pipelines``), the one runner (``runner``), the run
request every entry point builds (``request``) and r2med as an mteb model (``mteb_model``)."""
