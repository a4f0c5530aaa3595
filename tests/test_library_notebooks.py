"""The library modules' notebooks (outside the lesson path, which the course runner does not run) and the
book's notebooks (nbs/book/) execute top to bottom: their asserts are checks of the module they export."""

import pytest
from conftest import REPO
from course_lib.book.runner import find_notebooks, run_notebook

NUMBERED = {p.name for p in find_notebooks(REPO / "nbs")}
LIBRARY = sorted(p.name for p in (REPO / "nbs").glob("*.ipynb") if p.name not in NUMBERED)
BOOK = sorted(f"book/{p.name}" for p in (REPO / "nbs" / "book").glob("*.ipynb"))


def test_every_library_notebook_is_found():
    library = {"errors.ipynb", "checks.ipynb", "outputs.ipynb", "runs.ipynb", "offline_runs.ipynb"}
    library |= {"sources.ipynb", "progress.ipynb", "wandb_mode.ipynb", "models.ipynb", "tables.ipynb"}
    library |= {"precision.ipynb", "checkpoints.ipynb", "cli.ipynb", "seeding.ipynb", "xla.ipynb"}
    library |= {"fitting.ipynb", "pixels.ipynb"}
    assert library <= set(LIBRARY)
    names = {"cli", "runner", "docs_sync", "translations", "website"}
    assert {f"book/{n}.ipynb" for n in names} == set(BOOK)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIBRARY + BOOK)
def test_library_notebook_runs(name, tmp_path):
    row = run_notebook(REPO / "nbs" / name, tmp_path, {}, timeout=600)
    assert row["status"] == "ok", row["error"]
