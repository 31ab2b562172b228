"""Build-time generators: the code that regenerates files the package ships (the published record,
the published results and their manifest, the docs' table of published runs) from the authors'
files or the shipped data. Run from the repository root (``python -m tools.NAME``); nothing in
``r2med_tasks`` or ``r2med_plugins`` imports it."""
