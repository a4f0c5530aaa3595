"Repository checks: clean notebooks, course_lib/ freshly exported, docs in sync, README == CI, no secrets."

import json
import re
import shutil
import subprocess
from conftest import REPO, BIN, run_book
from course_lib.book.docs_sync import RELATIVE_LINK


def _project_copy(tmp_path):
    for name in ("nbs", "course_lib"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def test_notebooks_are_clean(tmp_path):
    proj = _project_copy(tmp_path)
    subprocess.run([str(BIN / "nbdev-clean")], cwd=proj, check=True, capture_output=True)
    for nb in sorted((REPO / "nbs").rglob("*.ipynb")):  # the solutions notebooks too
        name = nb.relative_to(REPO / "nbs")
        assert (proj / "nbs" / name).read_text() == nb.read_text(), f"{name} is not clean: run nbdev-clean"
        cells = json.loads(nb.read_text())["cells"]
        assert not any(
            c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code"
        )


def test_library_matches_a_fresh_export(tmp_path):
    proj = _project_copy(tmp_path)
    shutil.rmtree(proj / "course_lib")  # a stale module left behind would otherwise go unnoticed
    (proj / "course_lib").mkdir()
    shutil.copy(REPO / "course_lib" / "__init__.py", proj / "course_lib")  # holds the version nbdev keeps
    subprocess.run([str(BIN / "nbdev-export")], cwd=proj, check=True, capture_output=True)
    fresh = {p.relative_to(proj / "course_lib"): p.read_text() for p in (proj / "course_lib").rglob("*.py")}
    ours = {p.relative_to(REPO / "course_lib"): p.read_text() for p in (REPO / "course_lib").rglob("*.py")}
    assert fresh.keys() == ours.keys(), "modules differ from nbdev-export: edit the notebooks, then export"
    for k in fresh:
        assert fresh[k] == ours[k], (
            f"course_lib/{k} differs from nbdev-export: edit the notebooks, not the .py"
        )


def test_docs_are_in_sync():
    r = run_book("sync-docs", "--check", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def _readme_commands():
    block = re.search(r"<!-- commands -->\n```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)[1]
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_ci_runs_exactly_the_readme_commands():
    ci = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]
    assert _readme_commands() == ci == ["bash tools/run-course.sh", "bash tools/run-tests.sh"]


def test_inductor_cache_is_kept_per_cpu_capability():
    """Inductor's FX graph cache key leaves ATEN_CPU_CAPABILITY out (torch 2.9): a kernel compiled under a cap
    and loaded without it gave wrong numbers. The README's commands keep one cache per capability."""
    import os

    def cache_dir(**extra):
        script = "source tools/setup-venv.sh >/dev/null && echo $TORCHINDUCTOR_CACHE_DIR"
        env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}  # the suite may run capped
        env = {**env, "TORCHINDUCTOR_CACHE_DIR": "/tmp/shared", **extra}
        r = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    native, avx2 = cache_dir(), cache_dir(ATEN_CPU_CAPABILITY="avx2")
    assert native == str(REPO / ".cache" / "inductor-native"), native
    assert avx2 == str(REPO / ".cache" / "inductor-avx2"), avx2


def test_workflow_runs_the_same_commands():
    wf = (REPO / ".github" / "workflows" / "test.yaml").read_text()
    assert "bash .ci/run" in wf


SECRET_PATTERNS = {
    "W&B key (40 hex)": r"\b[0-9a-f]{40}\b",
    "key assignment": (
        r"(?i)(api[_-]?key|wandb_key|kaggle_key|token|secret)"
        r"[\"']?\s*[:=]\s*[\"'][A-Za-z0-9_\-]{16,}[\"']"
    ),
    "GitHub token": r"\bgh[pousr]_[A-Za-z0-9]{30,}",
    "AWS key": r"\bAKIA[0-9A-Z]{16}\b",
    "Hugging Face token": r"\bhf_[A-Za-z0-9]{30,}",
}


def test_no_secrets_in_tracked_files():
    files = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    hits = []
    for f in files:
        p = REPO / f
        if f in ("constraints.txt", "constraints-tpu.txt") or not p.is_file() or p.stat().st_size > 2_000_000:
            continue
        text = p.read_text(errors="ignore")
        if f.startswith(".github/workflows/"):  # actions pinned by commit SHA (40 hex) are not keys
            text = re.sub(r"(uses:\s*\S+@)[0-9a-f]{40}\b", r"\1SHA", text)
        hits += [f"{f}: {what}" for what, pat in SECRET_PATTERNS.items() if re.search(pat, text)]
    assert not hits, hits


def test_secret_patterns_catch_a_planted_key():
    fake = (
        "0123456789abcdef" * 2 + "01234567"
    )  # assembled at run time, so this file does not trip the scan itself
    planted = 'FLAGS = {"wandb_key": "' + fake + '"}'
    assert re.search(SECRET_PATTERNS["W&B key (40 hex)"], planted)
    assert re.search(SECRET_PATTERNS["key assignment"], planted)


def test_ruff_passes_on_library_notebooks_tests_and_bench():
    """ruff with pyproject.toml's rules: one statement per line, lines of 110 characters at most (checked in
    nbs/, where the library is written), no unused imports."""
    ruff = BIN / "ruff"  # installed with course_lib[dev]
    r = subprocess.run(
        [ruff, "check", "course_lib", "nbs", "tests", "bench"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "All checks passed" in r.stdout


def _library_modules():
    "(dotted module name, path) for every module of course_lib, the book's included; nbdev's index aside."
    for path in sorted((REPO / "course_lib").rglob("*.py")):
        if not path.stem.startswith("_"):
            yield ".".join(path.relative_to(REPO).with_suffix("").parts), path


def test_every_exported_parameter_is_documented():
    "nbdev's docments style: a comment after each parameter, so show_doc and help() explain it."
    import importlib
    import inspect
    from course_lib.book.website import parameter_docs

    undocumented = []
    modules = dict(_library_modules())
    assert "course_lib.pytorch_loop" in modules and "course_lib.book.website" in modules, sorted(modules)
    for name_, path in modules.items():
        module = importlib.import_module(name_)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            fn = obj.__init__ if inspect.isclass(obj) and "__init__" in vars(obj) else obj
            if not inspect.isfunction(fn):
                continue
            docs = parameter_docs(obj)  # what the site's API reference shows
            params = [p for p in inspect.signature(fn).parameters if p != "self"]
            undocumented += [f"{name_}.{name}({p})" for p in params if not docs.get(p)]
    assert not undocumented, undocumented


def test_the_recorded_course_run_in_the_index_covers_every_notebook():
    from course_lib.book.docs_sync import RESULTS_FILE
    from course_lib.book.runner import find_notebooks

    record = json.loads((REPO / RESULTS_FILE).read_text())
    recorded = [n["notebook"] for n in record["notebooks"]]
    assert recorded == [p.name for p in find_notebooks(REPO / "nbs")], (
        "a notebook was added or renamed: record a new run (course-book run-notebooks --smoke --record ...)"
    )
    assert all(n["status"] == "ok" for n in record["notebooks"])


def test_every_relative_link_in_the_notebooks_and_docs_points_at_a_file():
    """The English and Korean notebooks (solutions too) and the repository's markdown, as GitHub and Jupyter
    open them."""
    notebooks = [*(REPO / "nbs").rglob("*.ipynb"), *(REPO / "ko").glob("*.ipynb")]
    docs = [*REPO.glob("*.md"), *(REPO / "bench").glob("*.md"), *(REPO / "locales").rglob("*.md")]
    broken = []
    for path in notebooks + docs:
        if ".ipynb_checkpoints" in path.parts:
            continue
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            text = path.read_text()
        for target in RELATIVE_LINK.findall(text):
            file = target.split("#")[0]
            if file and not (path.parent / file).exists():
                broken.append(f"{path.relative_to(REPO)}: {target}")
    assert len(notebooks) > 30 and not broken, "\n".join(broken)


def test_the_test_scheduler_keeps_each_file_on_one_worker():
    """tools/run-tests.sh runs two pytest-xdist workers: conftest's scheduler keeps a file's tests on one
    (its module fixtures made once) and puts the two files that read the Colab runtime check on the same one
    (the check deletes and rewrites _runtimes/, so two at once would break each other)."""
    from types import SimpleNamespace
    from conftest import pytest_xdist_make_scheduler

    config = SimpleNamespace(getvalue=lambda name: ["popen", "popen"] if name == "tx" else None)
    scope = pytest_xdist_make_scheduler(config, None)._split_scope
    assert scope("tests/test_xla.py::test_a") == scope("tests/test_xla.py::test_b[x@y]")
    assert scope("tests/test_xla.py::test_a") != scope("tests/test_cli.py::test_a")
    assert scope("tests/test_site.py::test_a") == scope("tests/test_runtimes.py::test_b[colab-gpu]")


def test_no_page_links_to_itself():
    """A link on a page goes somewhere else: the Korean index's link to the Korean edition leads to its
    English original instead (the English index's link leads to the Korean one)."""
    notebooks = [*(REPO / "nbs").glob("[0-9][0-9]_*.ipynb"), *(REPO / "ko").glob("*.ipynb")]
    itself = []
    for path in notebooks:
        cells = json.loads(path.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        for target in RELATIVE_LINK.findall(text):
            file = target.split("#")[0]
            if file and (path.parent / file).resolve() == path.resolve():
                itself.append(f"{path.relative_to(REPO)}: {target}")
    assert len(notebooks) > 20 and not itself, itself
