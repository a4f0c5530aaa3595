"The course-lib command line: help, data sample, one-line errors."

import pandas as pd
from course_lib.data import KAGGLE_COLUMNS
from conftest import run_cli


def test_help_lists_every_command():
    r = run_cli("--help", timeout=60)
    assert r.returncode == 0
    for cmd in ("data", "run-notebooks", "sync-docs"):
        assert cmd in r.stdout


def test_every_subcommand_has_help():
    for args in (["data", "sample"], ["data", "kaggle"], ["run-notebooks"], ["sync-docs"]):
        r = run_cli(*args, "--help", timeout=60)
        assert r.returncode == 0 and "--" in r.stdout, args


def test_data_sample_writes_kaggle_layout(tmp_path):
    r = run_cli(
        "data", "sample", "--out", tmp_path / "d", "--n", 12, "--img-size", 32, "--seed", 1, timeout=120
    )
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(tmp_path / "d" / "train.csv")
    assert list(df.columns) == KAGGLE_COLUMNS and len(df) == 12
    assert all((tmp_path / "d" / "train" / f"{n}.jpg").is_file() for n in df.image_name)


def test_bad_argument_is_one_line_error(tmp_path):
    r = run_cli("data", "sample", "--out", tmp_path / "d", "--n", -3, timeout=60)
    assert r.returncode == 1 and r.stderr == "course-lib: error: --n must be at least 1, got -3\n"
    assert not (tmp_path / "d").exists()


def test_unknown_command_is_usage_error():
    r = run_cli("fly", timeout=60)
    assert r.returncode == 2 and "invalid choice" in r.stderr and "Traceback" not in r.stderr
