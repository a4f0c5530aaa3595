"""Every bad input we tried, through the real command line: one clear line, exit 1, nothing written.

The table CASES is the source of the "Bad input" table in README.md (Troubleshooting); a test keeps them in sync."""
import re, shutil
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from conftest import REPO, run_cli
from course_lib.dataset import validate_table


def _first(d, df): return d / "train" / f"{df.image_name[0]}.jpg"

def _csv(d, df): df.to_csv(d / "train.csv", index=False)

CASES = [  # (bad input, how it is made, extra arguments, what the user sees)
    ("corrupt JPEG (not an image)", lambda d, df: _first(d, df).write_bytes(b"not a jpeg" * 20), [],
     r"1 image\(s\) cannot be used: ISIC_\d+\.jpg unreadable \(UnidentifiedImageError\)"),
    ("truncated JPEG", lambda d, df: _first(d, df).write_bytes(_first(d, df).read_bytes()[:300]), [],
     r"1 image\(s\) cannot be used: ISIC_\d+\.jpg unreadable \(OSError\)"),
    ("zero-byte image file", lambda d, df: _first(d, df).write_bytes(b""), [], r"ISIC_\d+\.jpg empty file"),
    ("missing image file", lambda d, df: _first(d, df).unlink(), [], r"ISIC_\d+\.jpg missing"),
    ("CSV without the target column", lambda d, df: _csv(d, df.drop(columns="target")), [], r"train\.csv lacks column\(s\) target; found"),
    ("label values other than 0/1", lambda d, df: _csv(d, df.assign(target=np.where(df.index == 2, 3, df.target))), [],
     r"target must be 0 or 1; 1 rows are not"),
    ("empty table (header only)", lambda d, df: _csv(d, df.iloc[:0]), [], r"train\.csv has no rows"),
    ("image_name with ../", lambda d, df: _csv(d, df.assign(image_name=["../../etc/x"] + list(df.image_name[1:]))), [],
     r"points outside"),
    ("image_name that is an absolute path", lambda d, df: _csv(d, df.assign(image_name=["/etc/passwd"] + list(df.image_name[1:]))), [],
     r"points outside"),
    ("CSV that is not UTF-8", lambda d, df: (d / "train.csv").write_bytes((d / "train.csv").read_bytes() + "é,x\n".encode("latin-1")), [],
     r"is not UTF-8 text: save it as UTF-8 CSV"),
    ("unknown --arch", None, ["--arch", "vgg99"], r"unknown --arch 'vgg99'; choose one of"),
    ("--accumulate 0", None, ["--accumulate", "0"], r"--accumulate must be at least 1, got 0"),
    ("negative --epochs", None, ["--epochs", "-2"], r"--epochs must be at least 1, got -2"),
    ("--precision 8", None, ["--precision", "8"], r"--precision must be one of 32, 16-mixed, bf16-mixed"),
    ("--engine xla with fp16", None, ["--engine", "xla", "--precision", "16-mixed"], r"--engine xla supports --precision 32 or bf16-mixed"),
    ("--engine xla with --normalize-on-device", None, ["--engine", "xla", "--normalize-on-device"],
     r"--normalize-on-device is supported by the pytorch and lightning engines, not xla"),
    ("--resume with nothing to resume", None, ["--resume"], r"--resume: no checkpoints in"),
    ("a data folder that does not exist", None, ["--data", "/no/such/folder"], r"--data /no/such/folder is not a folder"),
    ("a data folder without train.csv", lambda d, df: (d / "train.csv").unlink(), [], r"has no train\.csv \(expected the Kaggle layout\)"),
]


@pytest.fixture
def data_copy(sample_dir, tmp_path):
    shutil.copytree(sample_dir, tmp_path / "d")
    return tmp_path / "d", pd.read_csv(tmp_path / "d" / "train.csv")


@pytest.mark.parametrize("what, damage, args, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_1_nothing_written(what, damage, args, message, data_copy, tmp_path):
    d, df = data_copy
    if damage: damage(d, df)
    data = [] if "--data" in args else ["--data", d]
    r = run_cli("train", *data, *args, "--out", tmp_path / "out", timeout=300)
    assert r.returncode == 1, (what, r.stdout[-500:], r.stderr[-1500:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("course-lib: error: ") and re.search(message, lines[0]), (what, r.stderr)
    assert not (tmp_path / "out").exists(), f"{what}: something was written"


def test_readme_lists_every_bad_input():
    readme = (REPO / "README.md").read_text()
    for what, *_ in CASES:
        assert f"| {what} |" in readme, f"README's bad-input table lacks: {what}"


@pytest.mark.parametrize("convert, notice", [
    (lambda p: Image.open(p).convert("RGBA").save(p, format="PNG"), "are not RGB (grayscale or alpha); they are converted"),
    (lambda p: Image.open(p).convert("L").save(p, format="JPEG"), "are not RGB (grayscale or alpha); they are converted"),
    (lambda p: Image.open(p).resize((30, 20)).save(p, format="JPEG"), "differ from the table's width/height (e.g. "),
])
def test_fixable_images_are_converted_with_a_notice(convert, notice, data_copy, capsys):
    d, df = data_copy
    convert(_first(d, df))
    validate_table(df, d)
    out = capsys.readouterr().out
    assert notice in out and len(out.strip().splitlines()) == 1, out
