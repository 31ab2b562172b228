"""The suite's tiers (README, "Developing"): a test that starts a process says so."""

import subprocess
import sys

import pytest

from conftest import Forked


def test_an_unmarked_test_that_starts_python_or_forks_is_told_to_mark_it():
    with pytest.raises(AssertionError, match=r"starts Python in a subprocess: run it in this process \(run_cli\)"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(AssertionError, match=r"forks this worker: .*mark it @pytest.mark.process"):
        Forked(["--help"])
    assert subprocess.run(["true"], check=False).returncode == 0  # other programs run


@pytest.mark.process
def test_a_forked_command_has_streams_and_an_exit_code_of_its_own():
    done = Forked(["list", "tasks", "--json"], stdout=subprocess.PIPE, encoding="ascii")
    out, err = done.communicate()
    assert done.returncode == 0 and b"R2MEDSampleRetrieval" in out and err == ""
    bad = Forked(["run", "--plugin", "no-such-plugin"])
    _, err = bad.communicate()
    assert bad.returncode == 2 and "no-such-plugin" in err and "Traceback" not in err
