"""The anatomy every chapter shares. Running each chapter in smoke mode is tests/test_runtimes.py
(in Colab's runtimes)."""

import json
import re
from course_lib.book.runner import find_notebooks
from conftest import REPO

NOTEBOOKS = [p.name for p in find_notebooks(REPO / "nbs")]


def test_every_chapter_ends_with_summary_exercises_questionnaire_further_research():
    for name in NOTEBOOKS:
        if name.startswith("00_"):
            continue
        md = "\n".join(
            "".join(c["source"])
            for c in json.loads((REPO / "nbs" / name).read_text())["cells"]
            if c["cell_type"] == "markdown"
        )
        headings = ["## Summary", "## Questionnaire", "## Further research"]
        if not name.startswith("99_"):  # the command line's chapter has no exercises
            headings.insert(1, "## Exercises")
        for heading in headings:
            assert heading in md, f"{name} lacks {heading}"
        assert [md.find(h) for h in headings] == sorted(md.find(h) for h in headings), f"{name}: order"
        questions = md.split("## Questionnaire")[1].split("## Further research")[0]
        assert len(re.findall(r"^\d+\. ", questions, re.M)) >= 10, name


def test_every_notebook_has_a_parameters_cell_with_smoke():
    for name in NOTEBOOKS:
        cells = json.loads((REPO / "nbs" / name).read_text())["cells"]
        params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(params) == 1 and "SMOKE = False" in "".join(params[0]["source"]), name


def test_every_notebook_installs_course_lib_when_it_is_missing():
    """Opened from its Colab or Kaggle badge, each notebook (the index too) installs the library before
    importing it."""
    for name in NOTEBOOKS:
        cells = [
            c for c in json.loads((REPO / "nbs" / name).read_text())["cells"] if c["cell_type"] == "code"
        ]
        install = [i for i, c in enumerate(cells) if "%pip install" in "".join(c["source"])]
        assert install, f"{name} has no install cell"
        uses = [i for i, c in enumerate(cells) if i not in install and "course_lib" in "".join(c["source"])]
        assert uses and install[0] < uses[0], f"{name} uses course_lib before installing it"


# Colab opens a notebook on the runtime its metadata names (accelerator and colab.gpuType, as Colab saves
# them); Kaggle's own notebooks keep theirs under kaggle.accelerator. Every chapter trains on a T4 but
# chapter 08, which needs a TPU: Colab's v5e-1, Kaggle's v5e-8.
HARDWARE = {
    "GPU": ("T4", "nvidiaTeslaT4"),
    "TPU": ("V5E1", "tpuV5e8"),
}


def test_every_chapter_opens_on_the_hardware_it_needs():
    for folder in ("nbs", "ko"):
        for name in NOTEBOOKS:
            meta = json.loads((REPO / folder / name).read_text())["metadata"]
            want = "TPU" if name.startswith("08_") else "GPU"
            gpu_type, kaggle = HARDWARE[want]
            assert meta.get("accelerator") == want, (folder, name, meta.get("accelerator"))
            assert meta.get("colab", {}).get("gpuType") == gpu_type, (folder, name)
            assert meta.get("kaggle", {}).get("accelerator") == kaggle, (folder, name)
            assert meta["kaggle"]["isGpuEnabled"] is (want == "GPU") and meta["kaggle"]["isInternetEnabled"]


def test_the_index_says_how_to_pin_a_colab_runtime_version():
    md = "".join(
        "".join(c["source"]) for c in json.loads((REPO / "nbs" / "00_index.ipynb").read_text())["cells"]
    )
    assert "Runtime version" in md and "Change runtime type" in md
