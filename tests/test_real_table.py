"""The real train.csv's quirks, on a folder built here without the course's sample generator: duplicate photos
marked tfrecord -1 (each an extra row, of a patient with images in a real fold), width and height of the
original photographs, and empty sex, age and site cells. Chapter 01 runs on it outside smoke mode, and
`course-lib train` leaves the duplicates out and says how many images it trained and validated on."""

import json
import os
import shutil
import pandas as pd
import numpy as np
import pytest
from conftest import REPO, run_cli

N_PATIENTS, N_DUPLICATES = 36, 5


@pytest.fixture(scope="module")
def real_layout(tmp_path_factory):
    "A Kaggle-layout folder as the real table is: returns (folder, rows in train.csv, duplicate rows)."
    from course_lib.support.sample import make_lesion_image

    root, rng = tmp_path_factory.mktemp("real") / "jpeg-melanoma-64x64", np.random.default_rng(5)
    (root / "train").mkdir(parents=True)
    rows = []
    for p in range(N_PATIENTS):
        sex, age = ("", "") if p % 9 == 0 else (["male", "female"][p % 2], 35.0 + 5 * (p % 8))
        for _ in range(int(rng.integers(2, 6))):
            target = int(rng.random() < 0.3)
            name = f"ISIC_{len(rows):07d}"
            make_lesion_image(bool(target), 64, seed=len(rows)).save(root / "train" / f"{name}.jpg")
            rows.append(
                dict(
                    image_name=name,
                    patient_id=f"IP_{p:07d}",
                    sex=sex,
                    age_approx=age,
                    anatom_site_general_challenge="" if len(rows) % 7 == 0 else "torso",
                    diagnosis="melanoma" if target else "unknown",
                    benign_malignant="malignant" if target else "benign",
                    target=target,
                    tfrecord=p % 15,
                    width=6000 if p % 2 else 1872,
                    height=4000 if p % 2 else 1053,
                )
            )
    for i in range(N_DUPLICATES):  # a second copy of a photo: its own name, its patient's label, fold -1
        original = rows[7 * i + 1]
        name = f"ISIC_9{i:06d}"
        shutil.copy(root / "train" / f"{original['image_name']}.jpg", root / "train" / f"{name}.jpg")
        rows.append({**original, "image_name": name, "tfrecord": -1})
    pd.DataFrame(rows).to_csv(root / "train.csv", index=False)
    return root, len(rows), N_DUPLICATES


def test_the_folder_has_the_quirks(real_layout):
    root, n_rows, n_dup = real_layout
    df = pd.read_csv(root / "train.csv")
    assert len(df) == n_rows and (df.tfrecord == -1).sum() == n_dup
    assert df[["sex", "age_approx", "anatom_site_general_challenge"]].isna().any().all()
    from PIL import Image

    with Image.open(root / "train" / f"{df.image_name[0]}.jpg") as im:
        assert im.size == (64, 64) and (df.width[0], df.height[0]) != im.size


def test_chapter_01_runs_on_the_real_layout_outside_smoke_mode(real_layout, tmp_path):
    from course_lib.book.runner import run_notebook

    root, n_rows, n_dup = real_layout
    env = {**os.environ, "KAGGLE_CONFIG_DIR": str(tmp_path / "no-kaggle"), "COURSE_LIB_CACHE": str(tmp_path)}
    for k in ("KAGGLE_API_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY"):
        env.pop(k, None)
    row = run_notebook(
        REPO / "nbs" / "01_data.ipynb",
        tmp_path / "run",
        # the whole game's model: nothing to download here, and seconds on a CPU
        {"SMOKE": False, "DATA_DIR": str(root), "ARCH": "simple-cnn", "PRETRAINED": False, "LR": 1e-3},
        900,
        env,
    )
    assert row["status"] == "ok", row["error"]
    assert row["results"]["n_duplicates"] == n_dup and row["results"]["n_images"] == n_rows - n_dup
    cells = json.loads((tmp_path / "run" / "01_data.ipynb").read_text())["cells"]
    shown = "".join(
        "".join(o.get("text", "")) for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
    )
    assert f"left out {n_dup} duplicate photos (tfrecord = -1) of {n_rows} rows" in shown
    assert "the author's folds" not in shown or "but not with the duplicate photos" in shown


def test_train_leaves_the_duplicates_out_and_says_what_it_trained_on(real_layout, tmp_path):
    root, n_rows, n_dup = real_layout
    out = tmp_path / "run"
    args = ["--arch", "simple-cnn", "--img-size", 32, "--batch-size", 16, "--epochs", 1]
    args += ["--wandb", "disabled"]
    r = run_cli("train", "--data", root, *args, "--out", out)
    assert r.returncode == 0, r.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert config["n_train"] + config["n_valid"] == n_rows - n_dup and config["n_valid"] > 0
    assert config["left_out"] == {"duplicate photos (tfrecord = -1)": n_dup}
    line = (
        f"images: {config['n_train']} to train, {config['n_valid']} to validate; "
        f"left out {n_dup} duplicate photos (tfrecord = -1)"
    )
    assert line in r.stdout.splitlines(), r.stdout
    assert "width" not in r.stdout and "differ" not in r.stdout, "width and height are never compared"


def test_train_with_the_posts_augmentations(real_layout, tmp_path):
    "--augmentations albumentations: the post's pipeline, still supported, trains on the same folder."
    root, n_rows, n_dup = real_layout
    args = ["--arch", "simple-cnn", "--img-size", 32, "--batch-size", 16, "--epochs", 1]
    args += ["--wandb", "disabled", "--augmentations", "albumentations"]
    r = run_cli("train", "--data", root, *args, "--out", tmp_path / "a")
    assert r.returncode == 0, r.stderr[-3000:]
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["augmentations"] == "albumentations"
    assert config["n_train"] + config["n_valid"] == n_rows - n_dup
