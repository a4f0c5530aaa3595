"The course website: built from the course run by `course-book site`, every page opened in headless Chromium."

import importlib
import json
import os
import re
import shutil
from pathlib import Path
import pytest
from course_lib.book.runner import find_notebooks
from conftest import FAKE_SECRETS, REPO, WANDB_DATA_DIR, run_book
from site_check import check

RUN = REPO / "_course_run"  # what the README's first command executed


@pytest.fixture(scope="module")
def course_run():
    "The README's first command's course run; made here in smoke mode when that command has not run."
    chapters = find_notebooks(REPO / "nbs")
    if not all((RUN / p.name).exists() for p in chapters):
        r = run_book("run-notebooks", "--smoke", "--out", RUN, timeout=3600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return RUN


@pytest.fixture(scope="module")
def site(course_run, tmp_path_factory):
    "The README's first command's site when it was built from this course run; else built here."
    built = REPO / "_site"
    newest_run = max(p.stat().st_mtime for p in course_run.glob("*.ipynb"))
    if (built / "index.html").exists() and (built / "index.html").stat().st_mtime > newest_run:
        return built
    out = tmp_path_factory.mktemp("site") / "_site"
    r = run_book("site", "--run", course_run, "--out", out, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert sorted(p.name for p in out.parent.iterdir()) == ["_site"], "nothing is left beside the site"
    print(r.stdout)
    return out


def _chromium():
    "The browser tools/setup-browser.sh found, else Debian's chromium."
    found = os.environ.get("COURSE_LIB_CHROMIUM") or shutil.which("chromium")
    assert found, "no Chromium: run the tests with tools/run-tests.sh, which installs one"
    return found


def test_every_page_loads_without_errors_broken_links_or_missing_plots(site, course_run):
    shots = course_run / "screenshots"
    pages, problems = check(site, shots, _chromium())
    assert not problems, "\n".join(problems[:40])
    chapters = [p.stem for p in find_notebooks(REPO / "nbs") if not p.name.startswith("00_")]
    assert {f"nbs/{c}.html" for c in chapters} | {f"ko/nbs/{c}.html" for c in chapters} <= set(pages)
    assert "index.html" in pages and "api/index.html" in pages
    pictures = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".woff", ".woff2", ".ttf", ".eot"}
    mine = (str(REPO).encode(), (str(Path.home()) + "/").encode())
    leaks = [
        str(p.relative_to(site))
        for p in site.rglob("*")
        if p.is_file() and p.suffix not in pictures and any(m in p.read_bytes() for m in mine)
    ]
    assert not leaks, f"files of the site that hold this machine's paths: {leaks}"
    for name in ("index.png", "chapter-03.png", "exercise-03.png", "ko-index.png", "ko-chapter-03.png"):
        assert (shots / name).stat().st_size > 10_000, name


PAGES = {  # a small site with one fault per page: the check names each
    "index.html": '<a href="nbs/01_a.html">a</a> <a href="gone.html">gone</a>',
    "nbs/01_a.html": '<img src="../missing.png"><a href="../index.html#nowhere">anchor</a>',
    "nbs/02_b.html": "<script>console.error('boom')</script>",
    "nbs/03_c.html": '<img src="http://203.0.113.1/x.png">',
}


def test_the_site_check_names_every_kind_of_fault(tmp_path):
    for rel, body in PAGES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"<!doctype html><html><body>{body}</body></html>")
    pages, problems = check(tmp_path, None, _chromium())
    assert pages == sorted(PAGES)
    found = "\n".join(problems)
    for expected in (
        "index.html: broken link http://127.0.0.1:",
        "nbs/01_a.html: image ../missing.png did not load",
        "nbs/01_a.html: missing anchor http://127.0.0.1:",
        "nbs/02_b.html: console error: boom",
        "nbs/03_c.html: request to another host: http://203.0.113.1/x.png",
        "nbs/02_b.html: a chapter page without plots",
    ):
        assert expected in found, (expected, problems)
    assert not any(p.startswith("index.html: a chapter") for p in problems)


def test_every_page_has_its_korean_twin_and_a_switch_both_ways(site):
    "Every English page switches to the same page in Korean (pages only in English: to the Korean home)."
    import subprocess

    found = subprocess.run(["fc-list", ":lang=ko"], capture_output=True, text=True).stdout
    assert found.strip(), (
        "no font with Hangul: the Korean screenshots would show boxes (tools/setup-browser.sh)"
    )
    english = [p for p in site.rglob("*.html") if "ko" not in p.relative_to(site).parts[:1]]
    for page in english:
        rel = page.relative_to(site).as_posix()
        if rel.startswith(("_static", "genindex", "search")):
            continue
        html = page.read_text()
        switch = re.search(r'<a class="btn language-switch" href="([^"]+)" hreflang="ko">한국어</a>', html)
        assert switch, f"{rel} has no switch to Korean"
        twin = (page.parent / switch[1]).resolve()
        assert twin.exists(), (rel, switch[1])
        if not (rel == "index.html" or rel.startswith("api/") or re.match(r"nbs/\d\d_", rel)):
            assert twin == (site / "ko" / "index.html").resolve(), (rel, switch[1])  # English only
        else:
            assert twin == (site / "ko" / rel).resolve(), (rel, switch[1])
            back = re.search(
                r'<a class="btn language-switch" href="([^"]+)" hreflang="en">English</a>', twin.read_text()
            )
            assert back and (twin.parent / back[1]).resolve() == page.resolve(), (
                f"ko/{rel} does not switch back"
            )
    chapters = [p.stem for p in find_notebooks(REPO / "nbs") if not p.name.startswith("00_")]
    for stem in chapters:
        assert "<h1>" in (site / "ko" / "nbs" / f"{stem}.html").read_text(), stem


def _sidebar(page) -> dict:
    "caption -> the pages its part of the sidebar links to, read from a built page."
    nav = re.search(r'<nav class="bd-links bd-docs-nav"(.*?)</nav>', page.read_text(), re.S)[1]
    parts = re.split(r'<p aria-level="2" class="caption" role="heading"><span class="caption-text">', nav)
    return {
        part.split("</span>", 1)[0]: re.findall(r'class="reference internal" href="([^"#]+)"', part)
        for part in parts[1:]
    }


def test_the_sidebar_puts_the_chapters_first_and_the_books_tooling_apart(site):
    "English: chapters, the library, more pages, the book's tooling apart; Korean: its translated pages only."
    chapters = [f"nbs/{p.stem}.html" for p in find_notebooks(REPO / "nbs")[1:]]
    english = _sidebar(site / "index.html")
    assert list(english) == ["Chapters", "The library", "More", "For contributors"], list(english)
    assert english["Chapters"] == chapters
    assert "api/index.html" in english["The library"] and "nbs/errors.html" in english["The library"]
    book = {f"nbs/book/{m}.html" for m in ("cli", "runner", "docs_sync", "translations", "website")}
    assert book <= set(english["For contributors"]), english["For contributors"]
    assert not book & {p for part in list(english.values())[:3] for p in part}
    korean = _sidebar(site / "ko" / "index.html")
    assert list(korean) == ["챕터", "라이브러리"] and korean["챕터"] == chapters, korean
    library = korean["라이브러리"]
    assert library[0] == "api/index.html" and all(p.startswith("api/") for p in library), library
    assert not (site / "api" / "book.runner.html").exists(), "the reference covers the learner's library"


def test_every_exported_name_has_a_reference_entry_linked_both_ways(site):
    learner = sorted((REPO / "course_lib").glob("[!_]*.py")) + [REPO / "course_lib" / "exercises"]
    for module_path in learner:  # the modules, and the one package with a module of its own (the book aside)
        module = module_path.stem
        page = (site / "api" / f"{module}.html").read_text()
        names = importlib.import_module(f"course_lib.{module}").__all__
        missing = [n for n in names if f'id="{n}"' not in page]
        assert not missing, (module, missing)
        taught = re.search(r'Taught in <a class="reference internal" href="\.\./nbs/([\w.]+)\.html', page)
        assert taught, f"api/{module}.html does not link to its notebook"
        chapter = (site / "nbs" / f"{taught[1]}.html").read_text()
        assert f'href="../api/{module}.html#{names[0]}"' in chapter, f"{taught[1]} does not link back"


FOLDED = {  # per language: the site's folder, the chapters' folder, and the titles of the folded blocks
    "en": ("", "nbs", "Exercise", {"Hint": "Hint", "Solution": "Solution", "Answer": "Answer"}),
    "ko": ("ko/", "ko", "연습 문제", {"Hint": "힌트", "Solution": "풀이", "Answer": "답"}),
}


@pytest.mark.parametrize("lang", FOLDED)
def test_hints_solutions_and_answers_are_folded_under_each_exercise_and_question(site, lang):
    """A chapter page, in each language, folds each exercise's hint and worked solution, and each question's
    answer."""
    folder, chapters, exercise, titles = FOLDED[lang]
    total = 0
    for chapter in find_notebooks(REPO / "nbs")[1:]:
        page = (site / f"{folder}nbs" / f"{chapter.stem}.html").read_text()
        cells = json.loads((REPO / chapters / chapter.name).read_text())["cells"]
        md = "\n".join("".join(c["source"]) for c in cells)
        exercises = len(re.findall(rf"^### {exercise} \d+\.\d+:", md, re.M))
        questions = md.count(f"<details><summary>{titles['Answer']}</summary>")
        opened = re.findall(r'<details class="sd-sphinx-override sd-dropdown[^"]*"\s+open', page)
        summaries = re.findall(
            r'<summary class="sd-summary-title[^>]*>\s*<span class="sd-summary-text">(\w+)', page
        )
        want = {titles["Hint"]: exercises, titles["Solution"]: exercises, titles["Answer"]: questions}
        assert {k: summaries.count(k) for k in want} == want, (lang, chapter.name)
        assert not opened and questions >= 10, (lang, chapter.name)
        total += exercises
    assert total >= 30, f"{total} exercises found: the headings are not read as exercises"


def test_site_without_a_course_run_is_one_clear_error(tmp_path):
    r = run_book("site", "--run", tmp_path / "nothing", "--out", tmp_path / "site", timeout=120)
    assert r.returncode == 1 and not (tmp_path / "site").exists()
    assert r.stderr.startswith("course-book: error: ")
    assert "run `course-book run-notebooks --smoke" in r.stderr


def test_keys_in_the_environment_stay_out_of_the_run_and_the_site(
    course_run, runtime_runs, tmp_path, monkeypatch
):
    """Chapter 09 run with W&B and Kaggle keys in the environment (the colab-gpu runtime profile runs it so,
    see conftest.runtime_runs), and the site built with them there: neither the executed notebooks, nor
    W&B's files, nor any page holds them."""
    from course_lib.book.website import build_site

    _, summary, output = runtime_runs["colab-gpu"]
    rows = {r["notebook"]: r for r in summary.get("notebooks", [])}
    assert rows.get("09_experiment_tracking.ipynb", {}).get("status") == "ok", output
    for k, v in FAKE_SECRETS.items():
        monkeypatch.setenv(k, v)
    profile_run = REPO / "_runtimes" / "colab-gpu" / "run"
    run = tmp_path / "run"
    shutil.copytree(course_run, run, ignore=shutil.ignore_patterns("09_*", "wandb-data", "screenshots"))
    for p in profile_run.glob("09_*"):
        shutil.copy(p, run / p.name)
    build_site(
        run, tmp_path / "site", root=REPO, translations=False
    )  # the Korean pages show the same outputs
    for folder in (profile_run, Path(WANDB_DATA_DIR), run, tmp_path / "site"):
        for p in folder.rglob("*"):
            if p.is_file() and p.stat().st_size < 50_000_000:
                text = p.read_bytes()
                found = [k for k, v in FAKE_SECRETS.items() if v.encode() in text]
                assert not found, f"{p} holds {found}"


def test_no_page_shows_a_progress_bar_warning(site):
    "Without ipywidgets the bars are text bars (course_lib.support.progress), without tqdm.auto's warning."
    chapters = [*(site / "nbs").glob("[01]*.html"), *(site / "ko" / "nbs").glob("[01]*.html")]
    pages = {str(p.relative_to(site)): p.read_text() for p in chapters}
    warned = [name for name, text in pages.items() if "TqdmWarning" in text]
    assert len(pages) >= 20 and not warned, f"chapters that show tqdm's IProgress warning: {warned}"
    rich = [name for name, text in pages.items() if 'install "ipywidgets" for Jupyter' in text]
    assert not rich, f"chapters that show rich's ipywidgets warning (Lightning's default bar): {rich}"
    bars = [name for name, text in pages.items() if "epochs:" in text]
    assert bars, "the chapters that train show their progress bars as text"
