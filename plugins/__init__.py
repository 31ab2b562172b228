"""Built-in plugins of the r2med harness; each module registers through the ``r2med`` entry-point
group, exactly as a third-party package does."""
