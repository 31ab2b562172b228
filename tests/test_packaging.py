"""What `pip install .` (not editable) installs: every Python package of the source tree."""

import tomllib
from pathlib import Path

import pytest

from conftest import build_wheels

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
    data = {f"r2med_tasks.data.{d.name}" for d in (ROOT / "r2med_tasks" / "data").iterdir() if d.is_dir()}
    assert found | data == listed, f"missing from [tool.setuptools] packages: {sorted(found | data - listed)}"


@pytest.mark.process  # the build backend builds the wheel
def test_package_data_ships_in_the_wheel(tmp_path):
    """The data folders (the sample task, the leaderboard, the published results) and the plugins'
    data files are in the wheel, and building it gives no warning about them. Built from a copy of
    the sources, as setuptools leaves build/ and *.egg-info/ in the tree it builds."""
    import shutil
    import zipfile

    def left_out(folder: str, names: list[str]) -> list[str]:  # what no wheel takes
        top = {".git", ".venv", "build", "results", "tests", "benchmarks", "docs"} if Path(folder) == ROOT else set()
        return [n for n in names if n in top or n == "__pycache__" or n.endswith(".egg-info")]

    source = shutil.copytree(ROOT, tmp_path / "source", ignore=left_out)
    built = build_wheels(tmp_path, source)
    assert built.returncode == 0, built.stderr
    assert "absent from the `packages` configuration" not in built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "r2med_tasks" / "data").rglob("*") if p.is_file()}
    assert shipped and shipped <= names
    # the plugins' data files (Query2Doc's examples and their licence), under the installed package's name
    assert {f"r2med_plugins/gar/{n}" for n in ("r2med_example.py.txt", "R2MED_LICENSE.txt")} <= names
