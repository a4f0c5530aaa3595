"Every chapter runs top to bottom in smoke mode under the course runner."
import json, re
import pytest
from course_lib.cli import find_notebooks, run_notebook
from conftest import REPO

NOTEBOOKS = [p.name for p in find_notebooks(REPO / "nbs")]


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_smoke_mode(name, tmp_path):
    row = run_notebook(REPO / "nbs" / name, tmp_path, {"SMOKE": True}, timeout=1200)
    assert row["status"] == "ok", row["error"]
    assert row["results"], "each chapter records its key results"
    executed = json.loads((tmp_path / name).read_text())
    errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


def test_every_chapter_ends_with_summary_questionnaire_further_research():
    for name in NOTEBOOKS:
        if name.startswith("00_"): continue
        md = "\n".join("".join(c["source"]) for c in json.loads((REPO / "nbs" / name).read_text())["cells"]
                       if c["cell_type"] == "markdown")
        for heading in ("## Summary", "## Questionnaire", "## Further research"):
            assert heading in md, f"{name} lacks {heading}"
        questions = md.split("## Questionnaire")[1].split("## Further research")[0]
        assert len(re.findall(r"^\d+\. ", questions, re.M)) >= 10, name


def test_every_notebook_has_a_parameters_cell_with_smoke():
    for name in NOTEBOOKS:
        cells = json.loads((REPO / "nbs" / name).read_text())["cells"]
        params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(params) == 1 and "SMOKE = False" in "".join(params[0]["source"]), name
