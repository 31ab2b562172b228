"""Running a pipeline: plugin discovery (``discovery``), the registry of components and tasks
(``registry``), pipelines and their options (``pipelines``), the one runner (``runner``) with
its cost accounting (``costs``) and console display (``display``), the run request every entry point
builds (``request``), fusion of saved runs (``fusing``) and r2med as an mteb model (``mteb_model``)."""
