"The course-lib command line: help, data sample, one-line errors."

import pandas as pd
import pytest
from course_lib.data import KAGGLE_COLUMNS
from conftest import run_cli, run_main


def _help(capsys, *args) -> str:
    "`course-lib ARGS --help` in this process: what it prints (argparse exits with status 0)."
    from course_lib.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main([*map(str, args), "--help"])
    assert stop.value.code == 0, args
    return capsys.readouterr().out


def test_help_lists_every_command(capsys):
    out = _help(capsys)
    for cmd in ("data", "run-notebooks", "sync-docs"):
        assert cmd in out


def test_every_subcommand_has_help(capsys):
    for args in (["data", "sample"], ["data", "kaggle"], ["run-notebooks"], ["sync-docs"]):
        assert "--" in _help(capsys, *args), args


def test_the_installed_program_prints_its_help():
    "The console script itself, once: the entry point in pyproject.toml reaches main."
    r = run_cli("--help", timeout=60)
    assert r.returncode == 0 and "usage: course-lib" in r.stdout and "train" in r.stdout


def test_data_sample_writes_kaggle_layout(tmp_path):
    r = run_cli(
        "data", "sample", "--out", tmp_path / "d", "--n", 12, "--img-size", 32, "--seed", 1, timeout=120
    )
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(tmp_path / "d" / "train.csv")
    assert list(df.columns) == KAGGLE_COLUMNS and len(df) == 12
    assert all((tmp_path / "d" / "train" / f"{n}.jpg").is_file() for n in df.image_name)


def test_bad_argument_is_one_line_error(tmp_path, capsys):
    code, _, err = run_main(capsys, "data", "sample", "--out", tmp_path / "d", "--n", -3)
    assert code == 1 and err == "course-lib: error: --n must be at least 1, got -3\n"
    assert not (tmp_path / "d").exists()


def test_unknown_command_is_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        run_main(capsys, "fly")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "invalid choice" in err and "Traceback" not in err
