"""What `pip install .` (not editable) installs: every Python package of the source tree."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_every_subpackage_is_listed_for_setuptools():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    dirs = {name: ROOT / folder for name, folder in config["package-dir"].items()}
    found = set()
    for name, folder in dirs.items():
        for init in folder.rglob("__init__.py"):
            parts = init.parent.relative_to(folder).parts
            found.add(".".join([name, *parts]))
    assert found == listed, f"missing from [tool.setuptools] packages: {sorted(found - listed)}"
