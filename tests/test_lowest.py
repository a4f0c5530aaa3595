"""The lowest versions course_lib's requirements allow: installed with uv's lowest-direct resolution into a
clean Python 3.11 environment, they run chapter 04 in smoke mode (the deeper suite: 02 and 04). Every floor
in pyproject.toml is the version used. The environment, .venv-lowest, is reused while its stamp
(pyproject.toml and the interpreter) is unchanged; course_lib itself is installed again every time."""

import hashlib
import json
import os
import shutil
import subprocess
import tomllib
import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from conftest import REPO

# the plain loop beside Lightning (chapter 04 fits both engines on chapter 02's loaders): every base
# requirement is used there; the deeper suite adds chapter 02's own cells (the dataset, the augmentations, its
# plots); every chapter runs on CI's versions in the course command
CHAPTERS = {False: ("04_*", ["04"]), True: ("0[24]_*", ["02", "04"])}  # per push, --deep: pattern, chapters


def _floors() -> dict:
    "Each base requirement's lower bound, as written in pyproject.toml."
    reqs = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for line in reqs:
        req = Requirement(line)
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert lows, (
            f"{line}: every requirement needs a floor, or the lowest resolution picks an ancient release"
        )
        floors[req.name] = lows[0]
    return floors


def _lowest_python() -> str:
    "An interpreter of the lowest Python that pyproject.toml allows, found as tools/setup-venv.sh finds one."
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"].lstrip(">=")
    found = subprocess.run(
        ["bash", "-c", f"source tools/find-python.sh && python_for {version}"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert found, f"no Python {version} here: pyenv install {version}, or uv python install {version}"
    return found


@pytest.mark.slow
def test_lowest_allowed_versions_run_chapter_04_and_with_deep_02(tmp_path, request):
    chapters, want = CHAPTERS[request.config.getoption("--deep")]
    uv = shutil.which("uv", path=str(REPO / ".venv" / "bin") + os.pathsep + os.environ["PATH"])
    assert uv, "uv is part of course_lib[dev]"
    venv = REPO / ".venv-lowest"
    py = venv / "bin" / "python"

    def run(*cmd, **kw):
        return subprocess.run(
            [str(c) for c in cmd], capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw
        )

    python = _lowest_python()
    stamp = hashlib.sha256((REPO / "pyproject.toml").read_bytes() + python.encode()).hexdigest()[:16]
    stamp_file = venv / ".lowest_stamp"
    reuse = stamp_file.exists() and stamp_file.read_text() == stamp
    if not reuse:
        shutil.rmtree(venv, ignore_errors=True)
        r = run(uv, "venv", "-q", "-p", python, venv)
        assert r.returncode == 0, r.stderr
    lowest = ("--resolution", "lowest-direct") + (("--reinstall-package", "course_lib") if reuse else ())
    r = run(
        uv,
        "pip",
        "install",
        "-q",
        "-p",
        py,
        *lowest,
        f"course_lib[efficientnet] @ file://{REPO}",
        timeout=1800,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    r = run(uv, "pip", "install", "-q", "-p", py, "papermill", "ipykernel", "nbformat", "psutil", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    stamp_file.write_text(stamp)
    r = run(
        py,
        "-c",
        "import importlib.metadata as md, json, sys; "
        "print(json.dumps({n: md.version(n) for n in sys.argv[1:]}))",
        *_floors(),
    )
    installed = json.loads(r.stdout)
    (tmp_path / "versions.json").write_text(json.dumps(installed, indent=2))
    print("lowest versions:", installed)
    differ = {
        n: (low, installed[n])
        for n, low in _floors().items()
        if Version(Version(installed[n]).public) != Version(low)
    }
    assert not differ, f"floor vs installed: {differ}"
    r = run(
        venv / "bin" / "course-book",
        "run-notebooks",
        "--smoke",
        "--only",
        chapters,
        "--out",
        tmp_path / "run",
        "--nbs",
        REPO / "nbs",
        cwd=REPO,
        timeout=1800,
        env={**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"},
    )
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    ran = [(s["notebook"][:2], s["status"]) for s in summary]
    assert r.returncode == 0 and ran == [(n, "ok") for n in want], (summary, r.stderr[-2000:])
