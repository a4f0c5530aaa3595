"""A chapter's exercises run in-process: the cells under `## Exercises` as the chapter has them (the stubs),
and the code of its solutions notebook (the worked solutions). Each returns the lines `check` printed."""

import contextlib
import io
import json
import linecache
import re
import sys
import types
from pathlib import Path

LINE = re.compile(r"^([✓✗]) Exercise (\d+\.\d+): ?(.*)$", re.M)


def cells(path: Path) -> list:
    return json.loads(Path(path).read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def exercise_cells(path: Path) -> list:
    "The cells from `## Exercises` up to `## Questionnaire`."
    cs = cells(path)
    start = next(i for i, c in enumerate(cs) if source(c).startswith("## Exercises"))
    end = next(i for i, c in enumerate(cs) if source(c).startswith("## Questionnaire"))
    return cs[start:end]


def solutions_path(chapter: Path) -> Path:
    return chapter.parent / "solutions" / chapter.name


def _run(code_cells: list) -> dict:
    "Execute the cells in one namespace; {exercise number: (mark, message)} from the lines check printed."
    # an importable module, as a notebook's __main__ is: Dynamo (chapter 07's checks) imports a traced
    # function's module to read its globals
    module = sys.modules["__exercises__"] = types.ModuleType("__exercises__")
    out, ns = io.StringIO(), module.__dict__
    with contextlib.redirect_stdout(out):
        for k, c in enumerate(code_cells):
            text = source(c)
            if text.lstrip().startswith("#| hide"):
                continue  # the install cell for Colab and Kaggle
            name = f"<exercise cell {k}>"  # in linecache, as IPython keeps a cell: inspect.getsource reads it
            linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)
            exec(compile(text, name, "exec"), ns)
    return {m[2]: (m[1], m[3]) for m in LINE.finditer(out.getvalue())}


def run_exercises(chapter: Path) -> tuple[dict, dict]:
    "What the checks said of the chapter's stubs, and of its solutions notebook."
    stubs = _run([c for c in exercise_cells(chapter) if c["cell_type"] == "code"])
    solved = _run([c for c in cells(solutions_path(chapter)) if c["cell_type"] == "code"])
    return stubs, solved
