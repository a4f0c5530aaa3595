"""A lesson calls only what it, or an earlier lesson, wrote in front of the learner, or a framework's own API.
Library notebooks outside the numbered path keep what no lesson is about; the names below are theirs."""

import ast
import json
import re
from conftest import REPO

NBS = REPO / "nbs"
# What no lesson is about, by library notebook: where the data comes from (sources, kaggle_data), the sample
# generators (sample, fashion), the results record (results), the exercise checker, the error type, progress
# bars, the W&B mode and key rules and the offline reader (wandb_mode, offline_runs), the generators' seeding,
# and the CPU-for-TPU shim.
SUPPORT = {"sources.ipynb": None, "exercises.ipynb": None, "errors.ipynb": None, "progress.ipynb": None}
SUPPORT |= {"kaggle_data.ipynb": None, "sample.ipynb": None, "fashion.ipynb": None, "results.ipynb": None}
SUPPORT |= {"offline_runs.ipynb": None, "wandb_mode.ipynb": {"resolve_mode", "find_wandb_key"}}
SUPPORT |= {"seeding.ipynb": {"seed_everything"}, "xla.ipynb": {"xla_accelerator"}}


def _code(path):
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def _tree(src):
    """The cell's Python: an IPython magic or shell line (`!cmd`, `%magic`, and `out = !cmd`, which keeps the
    command's output) becomes `pass` at its indentation."""
    return ast.parse(re.sub(r"^(\s*)(\w+\s*=\s*)?[!%].*$", r"\1pass", src, flags=re.M))


def _written() -> dict:
    "Every exported top-level name, as (module, name), with the notebook whose `#| export` cell writes it."
    where = {}
    for nb in sorted(NBS.rglob("*.ipynb")):
        if "solutions" in nb.parts:
            continue
        exp = re.search(r"#\|\s*default_exp\s+(\S+)", "\n".join(_code(nb)))
        module = "course_lib." + exp.group(1).removesuffix(".__init__") if exp else None
        for src in _code(nb):
            if re.match(r"\s*#\|\s*export", src):
                for node in _tree(src).body:
                    names = [node.name] if hasattr(node, "name") else []
                    names += [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
                    for name in names:
                        where.setdefault((module, name), nb.relative_to(NBS).as_posix())
    return where


def _calls_outside_lessons(lesson, where) -> set:
    "The names a lesson imports from course_lib that no lesson up to it wrote and no support notebook keeps."
    number = int(lesson.name[:2])
    found = set()
    for src in _code(lesson):
        if re.match(r"\s*#\|\s*export", src):
            continue
        for node in ast.walk(_tree(src)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
                for alias in node.names:
                    home = where.get((node.module, alias.name), "")
                    if re.match(r"\d\d_", home) and int(home[:2]) <= number:
                        continue  # a lesson up to this one wrote it
                    if home.startswith("exercises/") or (home in SUPPORT and SUPPORT[home] is None):
                        continue
                    if alias.name in (SUPPORT.get(home) or ()):
                        continue
                    found.add(alias.name)
    return found


def test_lessons_call_only_what_a_lesson_wrote():
    where = _written()
    lessons = sorted(p for p in NBS.glob("[0-9][0-9]_*.ipynb") if p.name[:2] not in ("00", "01", "99"))
    assert len(lessons) == 10, [p.name for p in lessons]  # 01 runs the whole game; 00 and 99 are not lessons
    found = {p.name[:2]: _calls_outside_lessons(p, where) for p in lessons}
    assert not any(found.values()), {k: sorted(v) for k, v in found.items() if v}


def test_the_rule_sees_a_call_to_library_code(tmp_path):
    "A lesson that imports fit_lightning (the command line's Lightning engine) is caught."
    lesson = tmp_path / "05_x.ipynb"
    cells = [{"cell_type": "code", "source": ["from course_lib.support.trainer import fit_lightning\n"]}]
    cells += [{"cell_type": "code", "source": ["from course_lib.lightning import MelanomaModule\n"]}]
    lesson.write_text(json.dumps({"cells": cells}))
    assert _calls_outside_lessons(lesson, _written()) == {"fit_lightning"}


def test_the_package_keeps_the_lessons_modules_apart_from_their_support():
    """A lesson's module is named after its notebook (03_pytorch_loop.ipynb writes course_lib.pytorch_loop),
    and sits at the top of the package; every other notebook writes into a subpackage of its kind: `support`
    (what no lesson is about), `exercises` (the checker) or `book` (the course's own tooling)."""
    top, misplaced = set(), []
    for nb in sorted(NBS.rglob("*.ipynb")):
        exp = re.search(r"#\|\s*default_exp\s+(\S+)", "\n".join(_code(nb)))
        if "solutions" in nb.parts or not exp:
            continue
        module = exp.group(1).removesuffix(".__init__")
        if re.match(r"\d\d_", nb.name):
            top.add(module)
            if module != nb.stem[3:]:
                misplaced.append(f"{nb.name} writes course_lib.{module}")
        elif module.split(".")[0] not in ("support", "exercises", "book"):
            misplaced.append(f"{nb.relative_to(NBS)} writes course_lib.{module}, outside a subpackage")
    assert not misplaced, misplaced
    on_disk = {p.stem for p in (REPO / "course_lib").glob("*.py") if not p.name.startswith("_")}
    assert on_disk == top, sorted(on_disk ^ top)
