"""The Korean edition: catalogs complete and never behind the English prose, terms as TERMINOLOGY.md fixes
them, and Korean notebooks in step with the English ones, with the same code, that run."""

import json
import re
import shutil
import subprocess

import pytest
from conftest import REPO
from course_lib.book.runner import run_notebook
from course_lib.book.translations import (
    LANGUAGES,
    LEARNER_SECTIONS,
    TRANSLATED_DIR,
    catalog_path,
    catalog_stats,
    banned_terms,
    message_sections,
    question_problems,
    read_catalog,
    style_problems,
    terminology,
    translate,
    translated_notebooks,
    translation_problems,
)

FIX = "run `course-book sync-docs`, then translate what it marks (see CONTRIBUTING.md)"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_entry_is_translated_and_none_is_fuzzy(lang):
    stats = catalog_stats(REPO, lang)
    behind = {nb: s for nb, s in stats.items() if s["translated"] != s["entries"] or s["fuzzy"]}
    assert not behind, f"{lang} is behind the English: {behind}; {FIX}"
    assert sum(s["entries"] for s in stats.values()) > 900


@pytest.mark.parametrize("lang", LANGUAGES)
def test_catalogs_and_translated_notebooks_are_in_step_with_the_english(lang):
    "Like the nbdev export check: an English change without `course-book sync-docs` fails here."
    assert translate(REPO, lang, write=False) == [], FIX


@pytest.mark.parametrize("lang", LANGUAGES)
def test_translations_keep_code_links_tables_and_the_chosen_terms(lang):
    terms = terminology(REPO, lang)
    assert len(terms) >= 10
    problems = []
    for nb in translated_notebooks(REPO):
        for m in read_catalog(catalog_path(REPO, lang, nb.name)):
            if m.id and m.string:
                problems += [
                    f"{nb.name}: {p}: {m.id[:60]!r}" for p in translation_problems(m.id, m.string, terms)
                ]
    assert not problems, "\n".join(problems[:30])


@pytest.mark.parametrize("lang", LANGUAGES)
def test_one_word_per_meaning_one_register_and_no_semicolons(lang):
    banned = banned_terms(REPO, lang)
    assert len(banned) >= 15
    problems = [
        f"{nb.name}: {p}: {m.string[:70]!r}"
        for nb in translated_notebooks(REPO)
        for m in read_catalog(catalog_path(REPO, lang, nb.name))
        if m.id and m.string
        for p in style_problems(m.string, banned)
    ]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])


def test_questions_are_asked_in_the_register_of_their_kind():
    """A question's place decides its kind, whatever the English punctuation: under `## Exercises`,
    `## Questionnaire` or `## Further research` it is put to the learner and ends in -ㅂ니까?; elsewhere the
    prose asks it and answers it, in -ㄹ까요? (TERMINOLOGY.md)."""
    problems, asked = [], 0
    for nb in translated_notebooks(REPO):
        where = message_sections(nb)
        for m in read_catalog(catalog_path(REPO, "ko", nb.name)):
            if m.id and m.string:
                learner = bool(where.get(m.id, set()) & set(LEARNER_SECTIONS))
                asked += learner and "?" in m.string
                problems += [f"{nb.name}: {p}: {m.id[:60]!r}" for p in question_problems(m.string, learner)]
    assert not problems, "\n".join(problems)
    assert asked > 100, f"only {asked} questions found under {LEARNER_SECTIONS}: were the headings renamed?"


# A finished Korean sentence (-다, -요, -까) followed by a colon and more text on the same line: the
# English colon kept where Korean ends the sentence or joins with a connective. Colons Korean does use
# stay allowed: after a label (힌트:, 예:), and at a line's end, before a list, a code block or a table.
SENTENCE_COLON = re.compile(r"(다|요|까)\s*:[ \t]+\S")


@pytest.mark.parametrize("lang", ["ko"])
def test_no_colon_joins_two_sentences(lang):
    joined = [
        f"{nb.name}: {m.string[:80]!r}"
        for nb in translated_notebooks(REPO)
        for m in read_catalog(catalog_path(REPO, lang, nb.name))
        if m.id and m.string and SENTENCE_COLON.search(re.sub(r"`[^`]*`|\]\([^)]*\)", "", m.string))
    ]
    assert not joined, f"{len(joined)} entries:\n" + "\n".join(joined[:20])
    assert SENTENCE_COLON.search("공짜가 아닙니다: 첫 호출이") and not SENTENCE_COLON.search("힌트: 보세요")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_identical_english_has_identical_translations(lang):
    seen = {}
    for nb in translated_notebooks(REPO):
        for m in read_catalog(catalog_path(REPO, lang, nb.name)):
            if m.id:
                seen.setdefault(m.id, {}).setdefault(m.string, []).append(nb.name)
    differ = {en[:60]: list(tr.values()) for en, tr in seen.items() if len(tr) > 1}
    assert not differ, f"one English message, several translations: {differ}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_gettext_accepts_every_catalog(lang):
    "gettext's own checker, as Poedit, Weblate or a .mo build runs it: no error, no warning."
    assert shutil.which("msgfmt"), "msgfmt not found: install gettext (apt install gettext)"
    for nb in translated_notebooks(REPO):
        po = catalog_path(REPO, lang, nb.name)
        r = subprocess.run(["msgfmt", "-c", "-o", "/dev/null", str(po)], capture_output=True, text=True)
        assert r.returncode == 0 and not r.stderr, f"{po.name}: {r.stderr}"


SCRIPT = {"ko": re.compile(r"[\uac00-\ud7a3]")}  # a translation's prose is written in its script: Hangul


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_entry_is_the_english_copied(lang):
    "An msgstr without a word of the language (a heading copied as it was) is untranslated, whatever it says."
    code = re.compile(r"`[^`]+`|\]\([^)]*\)|https?://\S+")
    copied = [
        f"{nb.name}: {m.id[:60]!r}"
        for nb in translated_notebooks(REPO)
        for m in read_catalog(catalog_path(REPO, lang, nb.name))
        if m.id
        and re.search("[A-Za-z]{3}", code.sub("", m.id))
        and not SCRIPT[lang].search(code.sub("", m.string))
    ]
    assert not copied, f"{FIX}: {copied}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_terminology_fixes_each_term_once(lang):
    text = (REPO / "locales" / lang / "TERMINOLOGY.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| English")]
    english = [r.split("|")[1].strip() for r in rows]
    assert len(rows) >= 40 and len(english) == len(set(english)), "a term listed twice"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_translated_notebooks_have_the_english_code_and_translated_prose(lang):
    hangul = re.compile(r"[\uac00-\ud7a3]")
    for nb in translated_notebooks(REPO):
        en = json.loads(nb.read_text())["cells"]
        tr = json.loads((REPO / TRANSLATED_DIR[lang] / nb.name).read_text())["cells"]
        assert [(c["id"], c["cell_type"]) for c in en] == [(c["id"], c["cell_type"]) for c in tr], nb.name
        code = [(a["source"], b["source"]) for a, b in zip(en, tr) if a["cell_type"] == "code"]
        assert all(a == b for a, b in code), f"{nb.name}: a code cell differs"
        prose = ["".join(c["source"]) for c in tr if c["cell_type"] == "markdown"]
        assert all(hangul.search(p) for p in prose if re.search(r"[A-Za-z]{4}", p)), nb.name


@pytest.mark.slow
def test_a_korean_notebook_runs_in_smoke_mode(tmp_path):
    "The generated files execute: chapter 02 in Korean, with its exercises' checks."
    row = run_notebook(REPO / "ko" / "02_dataset.ipynb", tmp_path, {"SMOKE": True}, timeout=600)
    assert row["status"] == "ok", row["error"]
    cells = json.loads((tmp_path / "02_dataset.ipynb").read_text())["cells"]
    printed = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
    assert "✗ Exercise 2.1: Microscope returned None for an image: write make_params and transform" in printed
    assert "데이터셋" in "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_an_english_change_marks_its_entry_fuzzy_and_a_new_paragraph_untranslated(tmp_path):
    "What keeps the Korean from falling behind: the tests above fail until the translator mends both."
    (tmp_path / "nbs").mkdir()
    shutil.copy(REPO / "nbs" / "99_cli.ipynb", tmp_path / "nbs")
    po = catalog_path(tmp_path, "ko", "99_cli.ipynb")
    po.parent.mkdir(parents=True)
    shutil.copy(catalog_path(REPO, "ko", "99_cli.ipynb"), po)
    nb = json.loads((tmp_path / "nbs" / "99_cli.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "Everything the notebooks teach" in "".join(c["source"]))
    old = next(m for m in read_catalog(po) if m.id.startswith("Everything the notebooks teach"))
    cell["source"] = "".join(cell["source"]).replace("the notebooks teach", "the chapters teach")
    nb["cells"].append({"cell_type": "markdown", "id": "new", "metadata": {}, "source": "A new paragraph."})
    (tmp_path / "nbs" / "99_cli.ipynb").write_text(json.dumps(nb))
    assert str(po.relative_to(tmp_path)) in translate(tmp_path, "ko")
    stats = catalog_stats(tmp_path, "ko")["99_cli.ipynb"]
    assert (stats["fuzzy"], stats["untranslated"]) == (1, 1), stats
    changed = next(m for m in read_catalog(po) if m.id.startswith("Everything the chapters teach"))
    assert changed.fuzzy and changed.string == old.string, "the old translation stays, marked for review"
    ko = json.loads((tmp_path / "ko" / "99_cli.ipynb").read_text())
    assert "".join(ko["cells"][-1]["source"]) == "A new paragraph."  # English until translated


@pytest.mark.parametrize(
    "missing, package", [("babel", "babel"), ("markdown_it", "markdown-it-py"), ("sphinx", "sphinx")]
)
def test_the_tooling_names_its_extra_when_a_package_is_missing(missing, package, monkeypatch):
    "sync-docs and site stop in one line naming the `book` extra, before writing anything."
    import importlib.util
    from course_lib.book import website
    from course_lib.support.errors import CourseLibError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a)
    )
    want = f"needs {package}: pip install 'course_lib\\[book\\]'"
    with pytest.raises(CourseLibError, match=want):
        if missing == "sphinx":
            website._require_site_tools()  # what build_site checks once the course run is there
        else:
            translate(REPO, "ko", write=False)
