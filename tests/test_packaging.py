"The wheel installs into a clean venv with only its declared requirements."

import shutil
import subprocess
import sys
import venv
import pytest
from conftest import BIN, REPO


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
    # constraints.txt keeps the same versions as CI; it adds no packages. uv links the files from its cache
    # instead of copying them, so the venv costs little disk although torch is about 7 GB
    r = subprocess.run(
        [
            str(BIN / "uv"),
            "pip",
            "install",
            "-q",
            "-p",
            str(py),
            "-c",
            str(REPO / "constraints.txt"),
            str(wheel),
        ],
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
        [
            str(py),
            "-c",
            "import course_lib, course_lib.data, course_lib.support.cli; print(course_lib.__version__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(bin_ / "course-lib"), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "{train,predict,data}" in r.stdout, r.stdout
    r = subprocess.run(
        [
            str(bin_ / "course-book"),
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
        == "course-book: error: papermill is an optional part: pip install 'course_lib[book]'"
    ), r.stderr


def test_sdist_and_wheel_build_pass_twine_and_carry_the_right_metadata(tmp_path):
    "What `pip install course_lib` will get from PyPI: built and checked as the release workflow does."
    import email
    import re
    import tarfile
    import zipfile
    import course_lib

    dist = tmp_path / "dist"
    r = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    version = course_lib.__version__
    wheel = dist / f"course_lib-{version}-py3-none-any.whl"
    sdist = dist / f"course_lib-{version}.tar.gz"
    assert wheel.exists() and sdist.exists(), sorted(p.name for p in dist.iterdir())
    r = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and r.stdout.count("PASSED") == 2, r.stdout + r.stderr
    with zipfile.ZipFile(wheel) as z:
        meta = email.message_from_bytes(z.read(f"course_lib-{version}.dist-info/METADATA"))
        files = z.namelist()
    assert meta["Name"] == "course_lib" and meta["Version"] == version
    assert meta["License-Expression"] == "Apache-2.0" and meta["Requires-Python"] == ">=3.11"
    assert meta["Description-Content-Type"] == "text/markdown" and "# course_lib" in meta.get_payload()
    requires = meta.get_all("Requires-Dist")
    core = {re.split(r"[<>=!; ]", r)[0] for r in requires if "extra ==" not in r}
    assert {"torch", "torchvision", "pytorch-lightning", "albumentations", "fastcore"} <= core, core
    optional = {
        "torch_xla",
        "wandb",
        "nbdev",
        "papermill",
        "kaggle",
        "kagglehub",
        "sphinx",
        "timm",
        "safetensors",
    }
    assert not core & (optional | {"efficientnet_pytorch"}), core
    extras = {"tpu", "wandb", "kaggle", "efficientnet", "timm", "share", "docs", "book", "dev"}
    assert set(meta.get_all("Provides-Extra")) == extras
    lightning = next(r for r in requires if r.startswith("pytorch-lightning"))
    # 2.6.6 fixes load_from_checkpoint's code-execution bugs; the withdrawn 2.6.2 and 2.6.3 lie below it
    assert re.search(r">=\s*2\.6\.6", lightning), f"Lightning's floor: {lightning}"
    book = {re.split(r"[<>=; ]", r)[0] for r in requires if 'extra == "book"' in r}
    assert {"papermill", "ipykernel", "nbformat", "babel", "markdown-it-py", "course_lib[docs]"} <= book, book
    modules = (
        "data",
        "dataset",
        "pytorch_loop",
        "lightning",
        "support/xla",
        "experiment_tracking",
        "own_images",
    )
    assert {f"course_lib/{m}.py" for m in modules} <= set(files)
    book_modules = ("cli", "runner", "docs_sync", "translations", "website")
    assert {f"course_lib/book/{m}.py" for m in book_modules} <= set(files), "the book travels in the wheel"
    with tarfile.open(sdist) as t:
        names = t.getnames()
    assert f"course_lib-{version}/pyproject.toml" in names and f"course_lib-{version}/README.md" in names
