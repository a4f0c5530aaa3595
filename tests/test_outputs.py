"""Nothing a learner made is deleted or overwritten: `data sample`, `site` and `train` write only into new,
empty or their own folders, or with --overwrite; a run folder has one writer; files are written whole."""

import json
import hashlib
import pytest
from conftest import run_main
from course_lib.support.outputs import MARKER, folder_lock

TRAIN = [
    "--arch",
    "resnet18",
    "--img-size",
    "32",
    "--epochs",
    "1",
    "--batch-size",
    "16",
    "--wandb",
    "disabled",
]


def _snapshot(folder):
    "Every file under `folder` with the hash of its bytes."
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def learners_folder(tmp_path):
    "A folder holding a learner's own files."
    d = tmp_path / "mine"
    (d / "train").mkdir(parents=True)
    (d / "train" / "a.jpg").write_bytes(b"a learner's photo")
    (d / "train.csv").write_text("image_name,target\na,1\n")
    (d / "keep.txt").write_text("notes")
    return d


def _refused(capsys, args, needle, book=False):
    code, _, err = run_main(capsys, *args, book=book)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and needle in lines[0], err
    return lines[0]


def test_data_sample_refuses_a_learners_folder_and_leaves_it_byte_for_byte(learners_folder, capsys):
    before = _snapshot(learners_folder)
    line = _refused(
        capsys, ["data", "sample", "--out", learners_folder, "--n", "10", "--img-size", "32"], "--overwrite"
    )
    assert "did not write there (keep.txt, train, train.csv)" in line
    assert _snapshot(learners_folder) == before
    assert [p.name for p in learners_folder.parent.iterdir()] == ["mine"], "no temporary folder left"


def test_data_sample_rewrites_its_own_folder_and_overwrite_touches_only_the_set(learners_folder, capsys):
    out = learners_folder.parent / "sample"
    assert run_main(capsys, "data", "sample", "--out", out, "--n", "10", "--img-size", "32")[0] == 0
    assert run_main(capsys, "data", "sample", "--out", out, "--n", "12", "--img-size", "32")[0] == 0
    assert len(list((out / "train").iterdir())) == 12 and (out / MARKER).read_text().strip() == "sample"
    code, _, _ = run_main(
        capsys, "data", "sample", "--out", learners_folder, "--n", "10", "--img-size", "32", "--overwrite"
    )
    assert code == 0 and (learners_folder / "keep.txt").read_text() == "notes"
    assert (
        not (learners_folder / "train" / "a.jpg").exists()
        and len(list((learners_folder / "train").iterdir())) == 10
    )


def test_a_failed_sample_leaves_no_temporary_folder(tmp_path, monkeypatch):
    from course_lib.support import sample

    calls = []

    def fail_on_the_third(*args):
        calls.append(args)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(*args)

    real = sample.write_sample_image
    monkeypatch.setattr(sample, "write_sample_image", fail_on_the_third)
    with pytest.raises(OSError):
        sample.make_sample_dataset(tmp_path / "s", n=5, img_size=32)
    assert list(tmp_path.iterdir()) == [], [p.name for p in tmp_path.iterdir()]


def test_site_refuses_a_learners_folder_the_current_folder_and_the_run(learners_folder, tmp_path, capsys):
    before = _snapshot(learners_folder)
    _refused(
        capsys, ["site", "--run", tmp_path / "run", "--out", learners_folder], "add --overwrite", book=True
    )
    assert _snapshot(learners_folder) == before
    args = ["site", "--run", tmp_path / "run", "--out", ".", "--overwrite"]
    _refused(capsys, args, "holds the current folder", book=True)
    run = tmp_path / "site" / "run"
    run.mkdir(parents=True)
    args = ["site", "--run", run, "--out", tmp_path / "site", "--overwrite"]
    _refused(capsys, args, "holds the course run", book=True)


def test_a_second_train_into_the_same_out_is_refused_and_overwrite_replaces_only_the_run(
    sample_dir, tmp_path, capsys
):
    out = tmp_path / "run"
    assert run_main(capsys, "train", "--data", sample_dir, *TRAIN, "--out", out)[0] == 0
    (out / "notes.txt").write_text("my notes")
    before = _snapshot(out)
    line = _refused(capsys, ["train", "--data", sample_dir, *TRAIN, "--lr", "10", "--out", out], "--resume")
    assert "holds an earlier run (metrics.json, checkpoints)" in line and "--overwrite" in line
    assert _snapshot(out) == before, "the first run's files are untouched"
    code, _, _ = run_main(
        capsys, "train", "--data", sample_dir, *TRAIN, "--lr", "1e-2", "--out", out, "--overwrite"
    )
    assert code == 0 and json.loads((out / "config.json").read_text())["lr"] == 1e-2
    assert (out / "notes.txt").read_text() == "my notes"


def test_train_refuses_a_folder_of_other_files(learners_folder, sample_dir, capsys):
    before = _snapshot(learners_folder)
    _refused(capsys, ["train", "--data", sample_dir, *TRAIN, "--out", learners_folder], "add --overwrite")
    assert _snapshot(learners_folder) == before


def test_resume_and_overwrite_exclude_each_other(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run_main(capsys, "train", "--resume", "--overwrite", "--out", tmp_path)
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_a_running_run_holds_its_folder(sample_dir, tmp_path, capsys):
    out = tmp_path / "busy"
    with folder_lock(out):  # as another course-lib train would
        line = _refused(capsys, ["train", "--data", sample_dir, *TRAIN, "--out", out], "is in use by another")
    assert "course-lib train (process " in line and not (out / "config.json").exists()


def test_a_damaged_config_json_on_resume_is_one_line(sample_dir, tmp_path, capsys):
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "config.json").write_text('{"lr": 0.0')
    _refused(
        capsys, ["train", "--data", sample_dir, *TRAIN, "--out", out, "--resume"], "is damaged (not JSON)"
    )


def test_resume_without_config_json_checks_the_checkpoints_settings(sample_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert run_main(capsys, "train", "--data", sample_dir, *TRAIN, "--out", out)[0] == 0
    (out / "config.json").unlink()
    line = _refused(
        capsys,
        [
            "train",
            "--data",
            sample_dir,
            *TRAIN,
            "--img-size",
            "48",
            "--out",
            out,
            "--resume",
            "--epochs",
            "2",
        ],
        "--resume with settings that differ",
    )
    assert "img_size was 32, now 48" in line
    assert not (out / "config.json").exists(), "a refused --resume writes nothing"


def test_resume_accepts_the_same_data_folder_written_another_way(sample_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(sample_dir.parent)
    out = tmp_path / "run"
    assert run_main(capsys, "train", "--data", sample_dir.name, *TRAIN, "--out", out)[0] == 0
    code, _, err = run_main(
        capsys, "train", "--data", f"./{sample_dir.name}/", *TRAIN, "--epochs", "2", "--out", out, "--resume"
    )
    assert code == 0, err


def test_metrics_json_is_strict_json(tmp_path):
    from course_lib.support.outputs import write_json

    data = {"best_valid_auc": float("nan"), "epochs": [{"valid_auc": float("inf"), "valid_loss": 0.5}]}
    write_json(tmp_path / "metrics.json", data)
    text = (tmp_path / "metrics.json").read_text()
    assert "NaN" not in text and "Infinity" not in text, text
    assert json.loads(text) == {"best_valid_auc": None, "epochs": [{"valid_auc": None, "valid_loss": 0.5}]}


def test_truncated_lightning_checkpoint_on_resume_is_one_line(sample_dir, tmp_path, capsys):
    out = tmp_path / "run"
    lightning = ["--engine", "lightning", *TRAIN]
    assert run_main(capsys, "train", "--data", sample_dir, *lightning, "--out", out)[0] == 0
    last = out / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    _refused(
        capsys,
        ["train", "--data", sample_dir, *lightning, "--epochs", "2", "--out", out, "--resume"],
        "is damaged or not a course_lib checkpoint",
    )


def test_symlinked_images_from_a_cache_are_images(sample_dir, tmp_path, capsys):
    import shutil
    import pandas as pd
    from course_lib.dataset import validate_table

    cache, d = tmp_path / "cache", tmp_path / "d"
    shutil.copytree(sample_dir / "train", cache)
    (d / "train").mkdir(parents=True)
    for p in cache.iterdir():
        (d / "train" / p.name).symlink_to(p)
    shutil.copy(sample_dir / "train.csv", d / "train.csv")
    df = pd.read_csv(d / "train.csv")
    assert validate_table(df, d) is df
    code, _, err = run_main(capsys, "train", "--data", d, *TRAIN, "--out", tmp_path / "out")
    assert code == 0, err
