"The course-lib command line: help, data sample, one-line errors."

import pandas as pd
import pytest
from course_lib.support.kaggle_data import KAGGLE_COLUMNS
from conftest import run_cli, run_main


def _help(capsys, *args, book: bool = False) -> str:
    "`course-lib ARGS --help` (`course-book` when `book`) in this process: what it prints (exit status 0)."
    from course_lib.book.cli import main as book_main
    from course_lib.support.cli import main as learner_main

    main = book_main if book else learner_main
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main([*map(str, args), "--help"])
    assert stop.value.code == 0, args
    return capsys.readouterr().out


def test_help_lists_the_learners_commands_only(capsys):
    "`course-lib` is the learner's program; running the notebooks and building the site are the book's."
    assert "{train,predict,data}" in _help(capsys)
    assert "{run-notebooks,site,sync-docs}" in _help(capsys, book=True)


def test_every_subcommand_has_help(capsys):
    for args in (["train"], ["predict"], ["data", "sample"], ["data", "kaggle"]):
        assert "--" in _help(capsys, *args), args
    for args in (["run-notebooks"], ["site"], ["sync-docs"]):
        assert "--" in _help(capsys, *args, book=True), args


def test_the_book_commands_are_not_the_learners(capsys):
    "A maintainer's command given to `course-lib` is refused by argparse, naming the learner's choices."
    from course_lib.support.cli import main

    for cmd in ("run-notebooks", "site", "sync-docs"):
        capsys.readouterr()
        with pytest.raises(SystemExit) as stop:
            main([cmd])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and f"invalid choice: '{cmd}'" in err, err


def test_the_installed_program_prints_its_help_without_loading_the_heavy_libraries():
    """The console script itself, once: the entry point in pyproject.toml reaches main, and the help comes
    before torch, pandas, scikit-learn or wandb are imported (Python lists every import it makes)."""
    r = run_cli("--help", env={"PYTHONPROFILEIMPORTTIME": "1"}, timeout=60)
    assert r.returncode == 0 and "usage: course-lib" in r.stdout and "train" in r.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if "|" in line}
    assert "course_lib.support.cli" in imported, sorted(imported)[:20]
    heavy = {"torch", "pandas", "sklearn", "scipy", "wandb", "numpy"} & imported
    assert not heavy, f"course-lib --help imported {sorted(heavy)}"


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
