"""Chapter 11: your own images in (`course-lib data import` on a folder per class and on a table with its own
column names, one line for what it cannot use), a shared model out (safetensors, config and card, loaded by a
process without course_lib; publishing to the Hub against a local stand-in, and offline in one line)."""

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch
from conftest import run_main
from course_lib import own_images
from course_lib.support.sample import make_image_folders


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    "A generated folder of one's own photos with every usual problem: (photos/, photos.csv)."
    out = make_image_folders(tmp_path_factory.mktemp("own") / "mine", n_lesions=24, seed=1)
    return out / "photos", out / "photos.csv"


def _import(capsys, photos, out, *extra):
    "`course-lib data import PHOTOS --positive malignant --negative benign --out OUT EXTRA` in this process."
    args = ["data", "import", photos, "--positive", "malignant", "--negative", "benign", "--out", out]
    return run_main(capsys, *args, *extra)


def test_import_of_class_folders_writes_the_layout_and_lists_what_it_left_out(photos, tmp_path, capsys):
    folder, _ = photos
    code, out, err = _import(capsys, folder, tmp_path / "d")
    assert code == 0, err
    table = pd.read_csv(tmp_path / "d" / "train.csv")
    assert {"image_name", "patient_id", "target", "source", "label"} <= set(table.columns)
    assert (table.patient_id == table.image_name).all()  # no grouping column: every image its own group
    assert set(table.target) == {0, 1} and (tmp_path / "d" / "train" / f"{table.image_name[0]}.jpg").exists()
    for reason in ("not an image file", "does not decode", "the same photo as", "class unsure is neither"):
        assert reason in out, (reason, out)
    assert len(table) + out.count("\n  ") == sum(1 for p in folder.rglob("*") if p.is_file())  # nothing lost


def test_import_of_a_table_keeps_its_grouping_column(photos, tmp_path, capsys):
    folder, csv = photos
    args = [
        "data",
        "import",
        folder,
        "--table",
        csv,
        "--label-column",
        "diagnosis",
        "--group-column",
        "lesion",
    ]
    code, out, err = run_main(
        capsys, *args, "--positive", "malignant", "--negative", "benign", "--out", tmp_path / "d"
    )
    assert code == 0 and "grouped by lesion" in out, err
    table = pd.read_csv(tmp_path / "d" / "train.csv")
    lesions = dict(zip(pd.read_csv(csv).file, pd.read_csv(csv).lesion))
    assert (table.patient_id == table.source.map(lesions)).all()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--positive", "melanoma", "--negative", "benign"], "name one or more classes as positive"),
        (["--positive", "malignant", "--negative", "malignant"], "name one or more classes as positive"),
        (["--table", "{csv}", "--positive", "malignant", "--negative", "benign"], "has no column label"),
        (
            ["--positive", "malignant", "--negative", "benign", "--max-side", "8"],
            "--max-side must be at least 16",
        ),
    ],
)
def test_what_import_cannot_use_is_one_line_and_nothing_is_written(extra, message, photos, tmp_path, capsys):
    folder, csv = photos
    extra = [str(csv) if e == "{csv}" else e for e in extra]
    code, _, err = run_main(capsys, "data", "import", folder, *extra, "--out", tmp_path / "d")
    assert code == 1 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "d").exists()


def test_import_never_writes_into_a_folder_of_the_learners(photos, tmp_path, capsys):
    folder, _ = photos
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "my-notes.md").write_text("mine")
    code, _, err = _import(capsys, folder, tmp_path / "d")
    assert code == 1 and "--overwrite" in err and (tmp_path / "d" / "my-notes.md").read_text() == "mine"


def test_a_missing_folder_is_one_line(tmp_path, capsys):
    code, _, err = run_main(
        capsys,
        "data",
        "import",
        tmp_path / "none",
        "--positive",
        "a",
        "--negative",
        "b",
        "--out",
        tmp_path / "d",
    )
    assert code == 1 and "is not a folder" in err


@pytest.fixture
def shared(tmp_path):
    "A random ResNet-18 shared as chapter 11 shares one: (its folder, the model in eval mode)."
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=1).eval()
    config = own_images.share_config("resnet18", 64, ["malignant"], ["benign"])
    card = own_images.model_card(config, {"valid_auc": 0.5, "fold": 0}, "random weights")
    return own_images.save_for_sharing(model, tmp_path / "shared", config, card), model


def test_a_shared_model_loads_in_a_process_without_course_lib(shared, tmp_path):
    folder, model = shared
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    torch.save(x, tmp_path / "x.pt")
    script = own_images.LOAD_CODE + (
        "\nimport sys\nx = torch.load(sys.argv[1])\n"
        "with torch.inference_mode():\n    print(json.dumps(model(x).flatten().tolist()))\n"
        "assert 'course_lib' not in sys.modules\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "x.pt")], cwd=folder, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    with torch.inference_mode():
        assert torch.allclose(torch.tensor(json.loads(r.stdout)), model(x).flatten(), atol=1e-6)
    card = (folder / "README.md").read_text()
    assert "Not a diagnostic device" in card and "valid_auc: 0.5" in card and own_images.LOAD_CODE in card


def test_sharing_never_writes_into_a_folder_of_the_learners(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.md").write_text("mine")
    with pytest.raises(own_images.CourseLibError, match="--overwrite"):
        own_images.save_for_sharing(torch.nn.Linear(1, 1), tmp_path / "mine", {}, "")


class FakeHub:
    "A local stand-in for huggingface_hub.HfApi: the repository is a folder, the token only compared."

    uploads = {}

    def __init__(self, token=None, **kw):
        self.token = token

    def create_repo(self, repo_id, exist_ok=False, private=False, **kw):
        assert self.token == "hf_" + "x" * 34 and exist_ok and private  # a learner's model: private at first

    def upload_folder(self, folder_path, repo_id, **kw):
        FakeHub.uploads[repo_id] = sorted(p.name for p in __import__("pathlib").Path(folder_path).iterdir())


def test_publish_uploads_with_a_token_and_says_so_in_one_line(shared, monkeypatch):
    import huggingface_hub

    folder, _ = shared
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub)
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    said = own_images.publish(folder, "learner/melanoma-demo")
    assert said == "published: https://huggingface.co/learner/melanoma-demo"
    assert {"model.safetensors", "config.json", "README.md"} <= set(FakeHub.uploads["learner/melanoma-demo"])


@pytest.mark.parametrize(
    "repo, env, said",
    [
        (None, {"HF_TOKEN": "hf_" + "x" * 34}, "not published: no repository named"),
        ("learner/m", {}, "not published: no Hugging Face token"),
        (
            "learner/m",
            {"HF_TOKEN": "hf_" + "x" * 34, "HF_HUB_OFFLINE": "1"},
            "not published: HF_HUB_OFFLINE is set",
        ),
    ],
)
def test_publish_without_a_repository_a_token_or_the_network_only_says_so(
    repo, env, said, shared, monkeypatch
):
    import socket

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(
        "huggingface_hub.utils._auth._get_token_from_file_refreshed", lambda: None
    )  # no login
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(socket.socket, "connect", lambda *a: pytest.fail("publish opened a connection"))
    line = own_images.publish(shared[0], repo)
    assert line.startswith(said) and "\n" not in line and "x" * 34 not in line


def test_a_failed_upload_is_one_line_without_the_token(shared, monkeypatch):
    import huggingface_hub

    class Refusing(FakeHub):
        def create_repo(self, repo_id, **kw):
            raise PermissionError("401 Client Error: Unauthorized for url\nmore detail")

    monkeypatch.setattr(huggingface_hub, "HfApi", Refusing)
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    line = own_images.publish(shared[0], "learner/m")
    assert line == "not published: PermissionError: 401 Client Error: Unauthorized for url"


def test_only_a_model_torchvision_rebuilds_is_shared():
    with pytest.raises(own_images.CourseLibError, match="share a torchvision model"):
        own_images.share_config("simple-cnn", 64, ["malignant"], ["benign"])


def test_a_photo_without_a_group_is_a_group_of_its_own(tmp_path):
    pd.DataFrame({"f": ["a.jpg", "b.jpg", "c.jpg"], "y": ["x", "x", "z"], "g": ["P1", None, None]}).to_csv(
        tmp_path / "t.csv", index=False
    )
    table = own_images.read_own_table(tmp_path / "t.csv", "f", "y", "g")
    assert list(table.group) == ["P1", "b.jpg", "c.jpg"]


def test_a_copy_with_another_label_is_named_as_a_conflict(tmp_path):
    from PIL import Image

    for label in ("benign", "malignant"):
        (tmp_path / label).mkdir()
        Image.new("RGB", (32, 32), (200, 120, 90)).save(tmp_path / label / "same.png")
    kept, left = own_images.sort_out(
        own_images.list_class_folders(tmp_path), tmp_path, ["malignant"], ["benign"]
    )
    assert len(kept) == 1 and "labelled benign: check which label is right" in left.reason[0], left


def test_a_phone_photo_is_imported_upright(tmp_path):
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: the phone was turned; the pixels are stored sideways
    (tmp_path / "a").mkdir()
    Image.new("RGB", (40, 20), (10, 20, 30)).save(tmp_path / "a" / "p.jpg", exif=exif)
    kept = pd.DataFrame({"file": ["a/p.jpg"], "label": ["a"], "target": [1]})
    out = own_images.write_course_folder(kept, tmp_path, tmp_path / "course")
    assert Image.open(out / "train" / "IMG_00000.jpg").size == (20, 40)
