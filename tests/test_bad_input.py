"""Every bad input we tried, through the command line's `main` in this process: one clear line, exit 1,
nothing written.

The table CASES is the source of the "Bad input" table in TROUBLESHOOTING.md; a test keeps them in sync."""

import json
import re
import shutil
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from conftest import OFFLINE_RUN, REPO, run_cli, run_main
from course_lib.dataset import validate_table


def _first(d, df):
    return d / "train" / f"{df.image_name[0]}.jpg"


def _csv(d, df):
    df.to_csv(d / "train.csv", index=False)


CASES = [  # (bad input, how it is made, extra arguments, what the user sees)
    (
        "corrupt JPEG (not an image)",
        lambda d, df: _first(d, df).write_bytes(b"not a jpeg" * 20),
        [],
        r"1 image\(s\) cannot be used: ISIC_\d+\.jpg unreadable \(UnidentifiedImageError\)",
    ),
    (
        "truncated JPEG",
        lambda d, df: _first(d, df).write_bytes(_first(d, df).read_bytes()[:300]),
        [],
        r"1 image\(s\) cannot be used: ISIC_\d+\.jpg unreadable \(OSError\)",
    ),
    ("zero-byte image file", lambda d, df: _first(d, df).write_bytes(b""), [], r"ISIC_\d+\.jpg empty file"),
    ("missing image file", lambda d, df: _first(d, df).unlink(), [], r"ISIC_\d+\.jpg missing"),
    (
        "CSV without the target column",
        lambda d, df: _csv(d, df.drop(columns="target")),
        [],
        r"train\.csv lacks column\(s\) target; found",
    ),
    (
        "label values other than 0/1",
        lambda d, df: _csv(d, df.assign(target=np.where(df.index == 2, 3, df.target))),
        [],
        r"target must be 0 or 1; 1 rows are not",
    ),
    ("empty table (header only)", lambda d, df: _csv(d, df.iloc[:0]), [], r"train\.csv has no rows"),
    (
        "image_name with ../",
        lambda d, df: _csv(d, df.assign(image_name=["../../etc/x"] + list(df.image_name[1:]))),
        [],
        r"points outside",
    ),
    (
        "image_name that is an absolute path",
        lambda d, df: _csv(d, df.assign(image_name=["/etc/passwd"] + list(df.image_name[1:]))),
        [],
        r"points outside",
    ),
    (
        "CSV that is not UTF-8",
        lambda d, df: (d / "train.csv").write_bytes(
            (d / "train.csv").read_bytes() + "é,x\n".encode("latin-1")
        ),
        [],
        r"is not UTF-8 text: save it as UTF-8 CSV",
    ),
    ("unknown --arch", None, ["--arch", "vgg99"], r"unknown --arch 'vgg99'; choose one of .*or timm/<name>$"),
    ("unknown timm model", None, ["--arch", "timm/nosuchnet"], r"timm has no model 'nosuchnet' \(timm\.list"),
    ("--accumulate 0", None, ["--accumulate", "0"], r"--accumulate must be at least 1, got 0"),
    ("negative --epochs", None, ["--epochs", "-2"], r"--epochs must be at least 1, got -2"),
    ("--precision 8", None, ["--precision", "8"], r"--precision must be one of 32, 16-mixed, bf16-mixed"),
    (
        "--engine xla with fp16",
        None,
        ["--engine", "xla", "--precision", "16-mixed"],
        r"--engine xla supports --precision 32 or bf16-mixed",
    ),
    (
        "--engine xla with --normalize-on-device",
        None,
        ["--engine", "xla", "--normalize-on-device"],
        r"--normalize-on-device is supported by the pytorch and lightning engines, not xla",
    ),
    ("--resume with nothing to resume", None, ["--resume"], r"--resume: no checkpoints in"),
    (
        "a data folder that does not exist",
        None,
        ["--data", "/no/such/folder"],
        r"--data /no/such/folder is not a folder",
    ),
    (
        "a data folder without train.csv",
        lambda d, df: (d / "train.csv").unlink(),
        [],
        r"has no train\.csv \(expected the Kaggle layout\)",
    ),
    ("--num-workers -1", None, ["--num-workers", "-1"], r"--num-workers must be 0 or more, got -1"),
    (
        "--fold beyond the folds (pytorch)",
        None,
        ["--fold", "7"],
        r"--fold 7 does not exist: the table is split into 5 folds, 0 to 4",
    ),
    (
        "--fold beyond the folds (lightning)",
        None,
        ["--engine", "lightning", "--fold", "5"],
        r"--fold 5 does not exist",
    ),
    ("--fold beyond the folds (xla)", None, ["--engine", "xla", "--fold", "9"], r"--fold 9 does not exist"),
    (
        "--engine xla with --channels-last",
        None,
        ["--engine", "xla", "--channels-last"],
        r"--channels-last is supported by the pytorch and lightning engines, not xla",
    ),
    (
        "--devices 2 with the pytorch engine",
        None,
        ["--devices", "2"],
        r"--devices 2 needs --engine lightning \(DDP\)",
    ),
    (
        "the same image_name twice",
        lambda d, df: _csv(d, pd.concat([df, df.iloc[:1]])),
        [],
        r"image_name repeats: ISIC_\d+ and 0 more appear twice or more; list each image once",
    ),
    (
        "an empty patient_id cell",
        lambda d, df: _csv(d, df.assign(patient_id=[None] + list(df.patient_id[1:]))),
        [],
        r"patient_id is empty in 1 row\(s\), e.g. line 2 of train\.csv: fill it in",
    ),
    (
        "an empty image_name cell",
        lambda d, df: _csv(d, df.assign(image_name=[""] + list(df.image_name[1:]))),
        [],
        r"image_name is empty in 1 row\(s\), e.g. line 2 of train\.csv",
    ),
    (
        "a 16-bit image (a scanner's or microscope's PNG)",
        lambda d, df: Image.fromarray(np.full((48, 48), 40000, np.uint16)).save(_first(d, df), format="PNG"),
        [],
        r"ISIC_\d+\.jpg has 16-bit or float pixels \(mode I;16\): save it as an 8-bit RGB image",
    ),
    (
        "an image too large to open safely",
        lambda d, df: Image.new("1", (14_000, 14_000)).save(_first(d, df), format="PNG"),
        [],
        r"ISIC_\d+\.jpg too large to open safely \(DecompressionBombError\)",
    ),
    (
        "a validation fold with one class",
        lambda d, df: _csv(d, df.assign(target=0)),
        [],
        r"validation fold 0 holds only benign images \(\d+\), so its ROC AUC is undefined",
    ),
    ("--seed -1", None, ["--seed", "-1"], r"--seed must be between 0 and 4294967295, got -1"),
    ("--lr inf", None, ["--lr", "inf"], r"--lr must be a positive finite number, got inf"),
    ("--lr nan", None, ["--lr", "nan"], r"--lr must be a positive finite number, got nan"),
]

OFFLINE = {
    "https_proxy": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
}  # a closed port: no download works
ENV_CASES = [  # (bad input, environment, extra arguments, what the user sees)
    (
        "WANDB_MODE set to a value wandb rejects",
        {"WANDB_MODE": "sometimes"},
        [],
        r"WANDB_MODE='sometimes' is not a W&B mode: set it to online, offline or disabled, or unset it",
    ),
    (
        "--pretrained without internet",
        OFFLINE,
        ["--pretrained", "--arch", "resnet18"],
        r"no pretrained resnet18 weights could be loaded \(URLError.*--allow-random-init",
    ),
    (
        "--pretrained torchvision EfficientNet without internet",
        OFFLINE,
        ["--pretrained", "--arch", "efficientnet_b0"],
        r"no pretrained efficientnet_b0 weights could be loaded \(URLError.*--allow-random-init",
    ),
]


@pytest.fixture
def data_copy(sample_dir, tmp_path):
    shutil.copytree(sample_dir, tmp_path / "d")
    return tmp_path / "d", pd.read_csv(tmp_path / "d" / "train.csv")


def _one_line(what, code, err, message):
    lines = err.strip().splitlines()
    assert code == 1, (what, err[-1500:])
    assert len(lines) == 1 and lines[0].startswith("course-lib: error: ") and re.search(message, lines[0]), (
        what,
        err,
    )


# the cases that reach the XLA engine's own checks (after torch_xla is imported): in .venv-tpu
NEEDS_XLA = {"--fold beyond the folds (xla)"}


@pytest.mark.parametrize(
    "what, damage, args, message",
    [pytest.param(*c, marks=pytest.mark.xla) if c[0] in NEEDS_XLA else c for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_bad_input_is_one_line_exit_1_nothing_written(
    what, damage, args, message, data_copy, tmp_path, capsys
):
    d, df = data_copy
    if damage:
        damage(d, df)
    data = [] if "--data" in args else ["--data", d]
    code, _, err = run_main(capsys, "train", *data, *args, "--out", tmp_path / "out")
    _one_line(what, code, err, message)
    assert not (tmp_path / "out").exists(), f"{what}: something was written"


@pytest.mark.parametrize("what, env, args, message", ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_bad_environment_is_one_line_exit_1_nothing_written(
    what, env, args, message, sample_dir, tmp_path, capsys, monkeypatch
):
    for k, v in {**env, "TORCH_HOME": str(tmp_path / "torch")}.items():  # an empty weights cache
        monkeypatch.setenv(k, v)
    code, _, err = run_main(capsys, "train", "--data", sample_dir, *args, "--out", tmp_path / "out")
    _one_line(what, code, err, message)
    assert not (tmp_path / "out").exists(), f"{what}: something was written"


@pytest.mark.slow
def test_allow_random_init_trains_without_weights(sample_dir, tmp_path, capsys, monkeypatch):
    "In this process, with the same closed proxy as the environment cases and an empty torch cache."
    for k, v in {**OFFLINE, "TORCH_HOME": str(tmp_path / "torch")}.items():
        monkeypatch.setenv(k, v)
    args = ["--pretrained", "--allow-random-init", "--arch", "resnet18", "--epochs", 1, "--img-size", 32]
    code, out, err = run_main(capsys, "train", "--data", sample_dir, *args, "--out", tmp_path / "out")
    assert code == 0, err[-2000:]
    assert "notice: no pretrained resnet18 weights" in out and (tmp_path / "out" / "metrics.json").exists()


@pytest.mark.slow
def test_resume_with_other_settings_names_them(sample_dir, tmp_path, offline_run, capsys):
    "A copy of the shared offline PyTorch run: other settings are refused in one line; more epochs resume."
    out = tmp_path / "out"
    shutil.copytree(offline_run("pytorch"), out)

    def train(*change):
        "The shared run's settings (OFFLINE_RUN), with `change`'s option-value pairs replaced, into `out`."
        settings = dict(zip(OFFLINE_RUN[::2], OFFLINE_RUN[1::2])) | dict(zip(change[::2], change[1::2]))
        args = [x for pair in settings.items() for x in pair]
        return run_main(capsys, "train", "--data", sample_dir, *args, "--out", out, "--resume")

    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    code, _, err = train("--epochs", 4, "--img-size", 48, "--lr", 0.01)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err
    assert "--resume with settings that differ from the checkpoint's run" in lines[0], err
    assert "img_size was 32, now 48" in lines[0] and "lr was 0.001, now 0.01" in lines[0], lines[0]
    assert "epochs" not in lines[0], lines[0]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before, "nothing was touched"
    assert train("--epochs", 4)[0] == 0, "more epochs with the same settings resume"
    assert [r["epoch"] for r in json.loads((out / "metrics.json").read_text())["epochs"]] == [0, 1, 2, 3]


def test_troubleshooting_lists_every_bad_input():
    page = (REPO / "TROUBLESHOOTING.md").read_text()
    for what, *_ in CASES + ENV_CASES + [("--resume with settings that differ from the checkpoint's",)]:
        assert f"| {what} |" in page, f"TROUBLESHOOTING.md's bad-input table lacks: {what}"


@pytest.mark.parametrize(
    "convert, notice",
    [
        (
            lambda p: Image.open(p).convert("RGBA").save(p, format="PNG"),
            "are not RGB (grayscale or alpha); they are converted",
        ),
        (
            lambda p: Image.open(p).convert("L").save(p, format="JPEG"),
            "are not RGB (grayscale or alpha); they are converted",
        ),
    ],
)
def test_fixable_images_are_converted_with_a_notice(convert, notice, data_copy, capsys):
    d, df = data_copy
    convert(_first(d, df))
    validate_table(df, d)
    out = capsys.readouterr().out
    assert notice in out and len(out.strip().splitlines()) == 1, out


def test_width_and_height_are_never_compared_with_the_file(data_copy, capsys):
    "width and height are the original photograph's (chapter 01): an image of another size passes quietly."
    d, df = data_copy
    Image.open(_first(d, df)).resize((30, 20)).save(_first(d, df), format="JPEG")
    assert (df.width != 48).all(), "the sample records the cameras' sizes, as the real table does"
    assert validate_table(df.assign(width=6000, height=4000), d) is not None
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("setting, value", [("epochs", 0), ("accumulate", -1), ("epochs", 2.5)])
def test_every_engine_refuses_a_bad_setting_with_the_same_line(setting, value, sample_dir, tmp_path, capsys):
    """The command line, and chapters 03's fit, 04's fit_lightning and 08's train_xla share one check: the
    settings object TrainConfig (the command line and fit_lightning take it), and XLA's flags against the same
    table of limits."""
    from course_lib.pytorch_loop import TrainConfig
    from course_lib.pytorch_loop import fit
    from course_lib.support.errors import CourseLibError
    from course_lib.support.trainer import fit_lightning
    from course_lib.support.xla import train_xla

    engines = [
        lambda kw: fit(None, None, None, TrainConfig(**kw)),
        lambda kw: fit_lightning(None, None, TrainConfig(**kw)),
        lambda kw: train_xla(TrainConfig(**kw)),
    ]
    lines = set()
    if isinstance(value, int):  # argparse itself refuses a non-integer --epochs
        code, _, err = run_main(
            capsys, "train", "--data", sample_dir, f"--{setting}", value, "--out", tmp_path
        )
        assert code == 1
        lines.add(err.strip().removeprefix("course-lib: error: "))
    for engine in engines:
        with pytest.raises(CourseLibError) as e:
            engine({setting: value})
        lines.add(str(e.value))
    assert lines == {f"--{setting} must be at least 1, got {value}"}, lines


def test_train_xla_takes_the_shared_settings_from_its_two_settings_objects_only():
    "The shared settings come from TrainConfig and LoaderConfig, whole; what XLA would not honour is refused."
    from course_lib.dataset import LoaderConfig
    from course_lib.pytorch_loop import TrainConfig
    from course_lib.support.errors import CourseLibError
    from course_lib.support.xla import train_xla

    for call, line in (
        (
            lambda: train_xla(epochs=3),
            "epochs is a TrainConfig setting: train_xla(..., TrainConfig(epochs=...))",
        ),
        (
            lambda: train_xla(TrainConfig(resume=True, checkpoint_dir="runs")),
            "train_xla does not support TrainConfig(resume=True): leave it at False",
        ),
        (
            lambda: train_xla(batch_size=16),
            "batch_size is a LoaderConfig setting: train_xla(..., LoaderConfig(batch_size=...))",
        ),
        (
            lambda: train_xla(TrainConfig(seed=1), LoaderConfig(seed=2, normalize_on_device=False)),
            "train_xla (fashion) trains with TrainConfig's seed=1, not LoaderConfig(seed=2): "
            "make the two equal",
        ),
        (
            lambda: train_xla(
                TrainConfig(), LoaderConfig(augmentations="albumentations", normalize_on_device=False)
            ),
            "train_xla (fashion) does not support LoaderConfig(augmentations='albumentations'): "
            "leave it at 'torchvision'",
        ),
        (
            lambda: train_xla(TrainConfig(precision="16-mixed")),
            "--precision on XLA must be 32 or bf16-mixed, got '16-mixed'",
        ),
    ):
        with pytest.raises(CourseLibError) as e:
            call()
        assert str(e.value) == line


@pytest.mark.parametrize("engine", ["pytorch", "lightning", pytest.param("xla", marks=pytest.mark.xla)])
def test_a_non_finite_loss_stops_every_engine_in_one_line(engine, sample_dir, tmp_path, capsys):
    "--lr 1e30 makes the loss NaN in the first epoch: every engine stops, naming the epoch and the step."
    args = ["train", "--engine", engine, "--data", sample_dir, "--arch", "simple-cnn", "--img-size", 32]
    args += ["--epochs", 2, "--batch-size", 16, "--lr", 1e30, "--wandb", "disabled", "--out", tmp_path / "o"]
    if engine == "xla":  # torch_xla starts its own processes: a separate Python
        r = run_cli(*args, env={"PJRT_DEVICE": "CPU"}, timeout=600)
        code, err = r.returncode, r.stderr
    else:
        code, _, err = run_main(capsys, *args)
    assert code == 1, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert re.match(r"course-lib: error: the loss became (nan|inf) in epoch 0, by step \d+: lower", last), err
    assert "Traceback" not in err and not (tmp_path / "o" / "metrics.json").exists()
