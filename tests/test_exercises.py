"""Every lesson chapter's exercises, both ways: each stub fails its check with a message that names what is
missing, each worked solution passes it. Hints and the questionnaire's answers are there to unfold."""

import re

import pytest
import torch
from conftest import REPO
from course_lib.exercises import registered
from course_lib.book.runner import find_notebooks
from exercise_cells import cells, exercise_cells, run_exercises, solutions_path, source

CHAPTERS = [p for p in find_notebooks(REPO / "nbs") if not p.name.startswith(("00_", "99_"))]
HEADING = re.compile(r"^### Exercise (\d+)\.(\d+): (.+)$", re.M)


def _exercises(chapter) -> dict:
    "{number: (title, markdown)} of the chapter's exercises, in order."
    found = {}
    for c in exercise_cells(chapter):
        m = HEADING.match(source(c)) if c["cell_type"] == "markdown" else None
        if m:
            found[f"{m[1]}.{m[2]}"] = (m[3].strip(), source(c))
    return found


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_exercises_are_numbered_titled_hinted_and_checked(chapter):
    found = _exercises(chapter)
    n = int(chapter.name[:2])
    assert 3 <= len(found) <= 5, f"{chapter.name} has {len(found)} exercises"
    assert list(found) == [f"{n}.{k}" for k in range(1, len(found) + 1)], list(found)
    for number, (title, text) in found.items():
        assert "<details><summary>Hint</summary>" in text, f"exercise {number} has no hint"
        assert number in registered(), f"exercise {number} has no check in course_lib.exercises"
        assert registered()[number].title == title, (number, registered()[number].title, title)
    solved = [
        m[1] for m in re.finditer(r"^### Exercise (\d+\.\d+)", _markdown(solutions_path(chapter)), re.M)
    ]
    assert solved == list(found), f"solutions/{chapter.name} solves {solved}"


@pytest.mark.parametrize(  # chapter 08's checks run answers on the XLA device: in .venv-tpu
    "chapter",
    [pytest.param(c, marks=pytest.mark.xla) if c.name.startswith("08_") else c for c in CHAPTERS],
    ids=lambda p: p.stem,
)
def test_stubs_fail_their_checks_and_solutions_pass(chapter):
    numbers = list(_exercises(chapter))
    stubs, solved = run_exercises(chapter)
    assert list(stubs) == numbers and list(solved) == numbers, (list(stubs), list(solved))
    for number in numbers:
        mark, message = stubs[number]
        assert mark == "✗" and message, (number, mark, message)
        assert not message.startswith("your code raised"), f"{number}'s stub crashes its check: {message}"
        assert "\n" not in message and len(message) < 200, (number, message)
        assert solved[number][0] == "✓", (number, solved[number])


def test_every_check_belongs_to_an_exercise_of_a_chapter():
    numbers = {n for ch in CHAPTERS for n in _exercises(ch)}
    assert set(registered()) == numbers, sorted(set(registered()) ^ numbers)


def _markdown(path) -> str:
    return "\n".join(source(c) for c in cells(path) if c["cell_type"] == "markdown")


@pytest.mark.parametrize("chapter", find_notebooks(REPO / "nbs")[1:], ids=lambda p: p.stem)
def test_every_question_has_an_answer_to_unfold(chapter):
    questionnaire = _markdown(chapter).split("## Questionnaire")[1].split("## Further research")[0]
    items = re.split(r"^\d+\. ", questionnaire, flags=re.M)[1:]
    assert len(items) >= 10, chapter.name
    for k, item in enumerate(items, 1):
        answer = re.search(r"<details><summary>Answer</summary>\n\n(.+?)\n\n\s*</details>", item, re.S)
        assert answer and answer[1].strip(), f"{chapter.name}: question {k} has no answer"


def test_a_check_reports_in_one_line_and_never_raises(capsys):
    from course_lib.exercises import check, verdict

    assert check("2.2", lambda n, seed, epoch: list(range(n))) is None  # nothing for a notebook to display
    assert capsys.readouterr().out == "✗ Exercise 2.2: the order is not shuffled\n"
    check("2.2", lambda n, seed, epoch: 1 / 0)
    assert capsys.readouterr().out == "✗ Exercise 2.2: your code raised ZeroDivisionError: division by zero\n"
    assert verdict("0.0", None)[1].startswith("✗ there is no exercise 0.0: the course has 1.1, 1.2, ")

    def right(n, seed, epoch):
        return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 10**6 + epoch))

    assert verdict("2.2", right) == (True, "✓ Exercise 2.2: right")
