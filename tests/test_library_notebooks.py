"""The library modules' notebooks (outside the lesson path, which the course runner does not run) execute
top to bottom: their asserts are checks of the module they export."""

import pytest
from conftest import REPO
from course_lib.runner import find_notebooks, run_notebook

NUMBERED = {p.name for p in find_notebooks(REPO / "nbs")}
LIBRARY = sorted(p.name for p in (REPO / "nbs").glob("*.ipynb") if p.name not in NUMBERED)


def test_every_library_notebook_is_found():
    assert {"errors.ipynb", "checks.ipynb", "outputs.ipynb", "runs.ipynb", "runner.ipynb"} <= set(LIBRARY)
    assert {"docs_sync.ipynb", "website.ipynb", "offline_runs.ipynb"} <= set(LIBRARY)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIBRARY)
def test_library_notebook_runs(name, tmp_path):
    row = run_notebook(REPO / "nbs" / name, tmp_path, {}, timeout=600)
    assert row["status"] == "ok", row["error"]
