import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("WANDB_MODE", "disabled")  # tracking tests ask for offline explicitly
# W&B copies every logged artifact into its data folder (default: under the home folder) and keeps
# offline runs' copies: the tests' copies go to a folder removed when the session ends
WANDB_DATA_DIR = tempfile.mkdtemp(prefix="course-lib-wandb-data-")
os.environ["WANDB_DATA_DIR"] = WANDB_DATA_DIR
atexit.register(shutil.rmtree, WANDB_DATA_DIR, ignore_errors=True)


def run_cli(*args, env=None, cwd=None, timeout=600):
    "Run the installed `course-lib` program; returns the CompletedProcess (text mode)."
    return subprocess.run(
        [str(BIN / "course-lib"), *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd or REPO,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_main(capsys, *args) -> tuple[int, str, str]:
    """Run `course-lib ARGS` in this process (course_lib.cli.main); returns (exit status, stdout, stderr).
    For argument and input errors, which stop before any training: no Python start-up per case."""
    from course_lib.cli import main

    capsys.readouterr()  # drop what earlier steps printed
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory):
    "A small generated sample set in the Kaggle layout, shared by the session's tests."
    from course_lib.data import make_sample_dataset

    return make_sample_dataset(tmp_path_factory.mktemp("sample") / "melanoma", n=120, img_size=48, seed=7)


@pytest.fixture
def no_kaggle_env(tmp_path, monkeypatch):
    "An environment with no Kaggle credentials anywhere (home and config folder point to an empty tmp dir)."
    for k in ("KAGGLE_API_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / ".kaggle"))
    return {"HOME": str(tmp_path), "KAGGLE_CONFIG_DIR": str(tmp_path / ".kaggle")}


RUNTIMES = {"colab-gpu": ("3.13", "2.11.0"), "colab-tpu": ("3.13", "2.9.0")}  # Python, torch
FAKE_SECRETS = {"WANDB_API_KEY": "f" * 40, "KAGGLE_USERNAME": "learner-fake", "KAGGLE_KEY": "k" * 32}


@pytest.fixture(scope="session")
def runtime_runs():
    """Run tools/check-runtime.sh for each Colab runtime once per session, with FAKE_SECRETS in the
    environment (tests/test_site.py looks for them in what chapter 09 wrote); returns name -> (exit status,
    summary, output)."""
    runs = {}
    for name in RUNTIMES:
        r = subprocess.run(
            ["bash", str(REPO / "tools" / "check-runtime.sh"), name],
            cwd=REPO,
            text=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **FAKE_SECRETS},
            timeout=2400,
        )
        print(r.stdout[-3000:])
        summary_path = REPO / "_runtimes" / name / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        runs[name] = (r.returncode, summary, r.stdout[-3000:] + r.stderr[-3000:])
    return runs
