"""``python -m r2med_tasks.cli``: the ``r2med`` command."""

from . import main

main()
