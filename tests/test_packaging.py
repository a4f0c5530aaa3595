"The wheel installs into a clean venv with only its declared requirements."

import shutil
import subprocess
import sys
import venv
import pytest
from conftest import REPO


@pytest.mark.slow
def test_wheel_installs_with_only_declared_requirements(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(REPO)],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("course_lib-*.whl"))
    venv.create(tmp_path / "venv", with_pip=True)
    try:
        _check_venv(tmp_path, wheel)
    finally:
        shutil.rmtree(tmp_path / "venv", ignore_errors=True)  # torch makes it ~7 GB


def _check_venv(tmp_path, wheel):
    """Install the wheel with its declared requirements into tmp_path/venv, then check what came with it
    and what works."""
    py, bin_ = tmp_path / "venv" / "bin" / "python", tmp_path / "venv" / "bin"
    # constraints.txt keeps the same versions as CI (and lets pip reuse its cache); it adds no packages
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "-c", str(REPO / "constraints.txt"), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    installed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True
    ).stdout.lower()
    for optional in ("torch-xla", "torch_xla", "wandb", "nbdev", "papermill", "kaggle"):
        assert f"\n{optional}==" not in "\n" + installed, f"{optional} is not a core requirement"
    r = subprocess.run(
        [str(py), "-c", "import course_lib, course_lib.data, course_lib.cli; print(course_lib.__version__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(bin_ / "course-lib"), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "run-notebooks" in r.stdout
    r = subprocess.run(
        [
            str(bin_ / "course-lib"),
            "run-notebooks",
            "--nbs",
            str(REPO / "nbs"),
            "--only",
            "00_",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert (
        r.returncode == 1
        and r.stderr.strip().splitlines()[-1]
        == "course-lib: error: papermill is an optional part: pip install 'course_lib[dev]'"
    ), r.stderr
