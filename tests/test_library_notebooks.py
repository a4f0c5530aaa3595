"""The library modules' notebooks (outside the lesson path, which the course runner does not run) and the
book's notebooks (nbs/book/) execute top to bottom: their asserts are checks of the module they export. They
run one after another in one Python process (tests/library_notebooks.py), each in a fresh shell."""

import json
import os
import subprocess
import sys
from pathlib import Path
import pytest
from conftest import REPO
from course_lib.book.runner import find_notebooks

NUMBERED = {p.name for p in find_notebooks(REPO / "nbs")}
LIBRARY = sorted(p.name for p in (REPO / "nbs").glob("*.ipynb") if p.name not in NUMBERED)
BOOK = sorted(f"book/{p.name}" for p in (REPO / "nbs" / "book").glob("*.ipynb"))


def test_every_library_notebook_is_found():
    library = {"errors.ipynb", "checks.ipynb", "outputs.ipynb", "runs.ipynb", "offline_runs.ipynb"}
    library |= {"sources.ipynb", "progress.ipynb", "wandb_mode.ipynb", "trainer.ipynb"}
    library |= {"kaggle_data.ipynb", "sample.ipynb", "fashion.ipynb", "results.ipynb", "settings.ipynb"}
    library |= {
        "precision.ipynb",
        "checkpoints.ipynb",
        "cli.ipynb",
        "seeding.ipynb",
        "xla.ipynb",
        "colab.ipynb",
    }
    assert library == set(LIBRARY) - {"exercises.ipynb"}
    names = {"cli", "runner", "docs_sync", "translations", "website"}
    assert {f"book/{n}.ipynb" for n in names} == set(BOOK)


@pytest.fixture(scope="module")
def notebook_runs(tmp_path_factory, request):
    """Every library and book notebook this session tests (xla.ipynb in .venv-tpu, the others in .venv) run in
    one process: ({name: {ok, seconds}}, its stderr)."""
    out = tmp_path_factory.mktemp("library-notebooks") / "results.json"
    chosen = [
        item.callspec.params["name"]
        for item in request.session.items
        if item.originalname == "test_library_notebook_runs"
    ]
    paths = [str(REPO / "nbs" / name) for name in chosen]
    r = subprocess.run(
        [sys.executable, str(REPO / "tests" / "library_notebooks.py"), str(out), *paths],
        capture_output=True,
        text=True,
        timeout=1500,
        env={**os.environ, "MPLBACKEND": "Agg"},
        stdin=subprocess.DEVNULL,
    )
    results = json.loads(out.read_text()) if out.exists() else {}
    return {Path(k).relative_to(REPO / "nbs").as_posix(): v for k, v in results.items()}, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.xla) if n == "xla.ipynb" else n for n in LIBRARY + BOOK]
)
def test_library_notebook_runs(name, notebook_runs):
    results, stderr = notebook_runs
    assert name in results, f"{name} never finished: the process stopped before it\n{stderr[-3000:]}"
    if not results[name]["ok"]:
        part = stderr.split(f"=== {REPO / 'nbs' / name}")[-1].split("\n=== ")[0]
        pytest.fail(f"{name} failed:\n{part[-4000:]}")
