"Chapters 02-04: table checks, the engine, the Lightning port and their equivalence, course-lib train."

import json
import math
import shutil
import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from course_lib.support.errors import CourseLibError
from course_lib.dataset import LoaderConfig, load_image, make_dataloaders
from course_lib.dataset import validate_table
from course_lib.pytorch_loop import WeightedFocalLoss, train_one_epoch
from course_lib.pytorch_loop import load_checkpoint, save_checkpoint
from course_lib.pytorch_loop import create_model
from conftest import run_cli, run_main


@pytest.fixture
def data_copy(sample_dir, tmp_path):
    "A private copy of the sample set that a test may damage."
    shutil.copytree(sample_dir, tmp_path / "d")
    return tmp_path / "d", pd.read_csv(tmp_path / "d" / "train.csv")


def _first(d, df):
    return d / "train" / f"{df.image_name[0]}.jpg"


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d, df: (df.drop(columns="target"), d), r"lacks column\(s\) target"),
        (lambda d, df: (df.iloc[:0], d), "train.csv has no rows"),
        (
            lambda d, df: (df.assign(target=np.where(df.index == 3, 2, df.target)), d),
            "target must be 0 or 1; 1 rows are not",
        ),
        (
            lambda d, df: (df.assign(image_name=["../../outside"] + list(df.image_name[1:])), d),
            "points outside",
        ),
        (
            lambda d, df: (df.assign(image_name=["/etc/passwd"] + list(df.image_name[1:])), d),
            "points outside",
        ),
        (
            lambda d, df: (_first(d, df).unlink(), (df, d))[1],
            r"1 image\(s\) cannot be used: ISIC_\d+.jpg missing",
        ),
        (lambda d, df: (_first(d, df).write_bytes(b""), (df, d))[1], "empty file"),
        (
            lambda d, df: (_first(d, df).write_bytes(_first(d, df).read_bytes()[:200]), (df, d))[1],
            "unreadable",
        ),
        (lambda d, df: (_first(d, df).write_bytes(b"not a jpeg at all" * 10), (df, d))[1], "unreadable"),
    ],
)
def test_bad_tables_are_refused_up_front(data_copy, damage, message):
    d, df = data_copy
    bad_df, d = damage(d, df)
    with pytest.raises(CourseLibError, match=message):
        validate_table(bad_df, d)


def test_grayscale_and_rgba_are_converted_with_a_notice(data_copy, capsys):
    d, df = data_copy
    Image.open(_first(d, df)).convert("L").save(_first(d, df))
    rgba = d / "train" / f"{df.image_name[1]}.jpg"
    Image.new("RGBA", (48, 48), (255, 0, 0, 128)).save(
        rgba, format="PNG"
    )  # a PNG with alpha behind a .jpg name
    validate_table(df, d)
    assert "2 image(s) are not RGB" in capsys.readouterr().out
    assert load_image(_first(d, df)).shape == (48, 48, 3) and load_image(rgba).shape == (48, 48, 3)


def test_dataloaders_split_the_fold_and_give_uint8_batches(sample_dir):
    from course_lib.data import add_folds

    df = add_folds(pd.read_csv(sample_dir / "train.csv"))
    tl, vl = make_dataloaders(df, sample_dir, LoaderConfig(fold=1, img_size=32, batch_size=8))
    x, y = next(iter(tl))
    assert x.shape == (8, 3, 32, 32) and x.dtype == torch.uint8, "uint8 by default (chapter 02)"
    assert y.shape == (8, 1) and y.dtype == torch.float32
    assert len(tl.dataset) + len(vl.dataset) == len(df) and len(vl.dataset) == (df.fold == 1).sum()
    with pytest.raises(CourseLibError, match="--fold 7 does not exist"):
        make_dataloaders(df, sample_dir, LoaderConfig(fold=7))


def test_uint8_loaders_normalised_on_the_device_train_like_float_loaders(sample_dir):
    """normalize_on_device=True, the default: uint8 batches (a quarter of the bytes); the engine and the
    Lightning module normalise them."""
    from course_lib.data import add_folds
    from course_lib.dataset import normalize_batch
    from course_lib.pytorch_loop import evaluate
    from course_lib.support.seeding import seed_everything
    from course_lib.lightning import MelanomaModule

    df = add_folds(pd.read_csv(sample_dir / "train.csv"))
    runs = {}
    for on_device in (False, True):
        loader = LoaderConfig(fold=0, img_size=32, batch_size=8, normalize_on_device=on_device)
        tl, vl = make_dataloaders(df, sample_dir, loader)
        x, _ = next(iter(tl))
        assert x.dtype == (torch.uint8 if on_device else torch.float32) and x.shape == (8, 3, 32, 32)
        seed_everything(0)
        model = create_model("resnet18")
        loss_fn = WeightedFocalLoss()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        train_loss = train_one_epoch(model, tl, loss_fn, opt, torch.device("cpu"))
        runs[on_device] = dict(
            train_loss=train_loss, valid=evaluate(model, vl, loss_fn, torch.device("cpu")), x=x
        )
    f, u = runs[False], runs[True]
    assert torch.equal(normalize_batch(u["x"]), f["x"]), (
        "the same crops, normalised bit for bit alike in either place"
    )
    assert normalize_batch(f["x"]) is f["x"], "float batches pass through"
    assert f["train_loss"] == u["train_loss"] and f["valid"]["valid_loss"] == u["valid"]["valid_loss"]
    assert f["valid"]["valid_auc"] == u["valid"]["valid_auc"] or (
        math.isnan(f["valid"]["valid_auc"]) and math.isnan(u["valid"]["valid_auc"])
    )
    module = MelanomaModule("resnet18").eval()
    with torch.no_grad():
        assert torch.equal(module(u["x"]), module(f["x"]))


def test_focal_loss_matches_the_formula():
    logits, y = torch.tensor([[2.0], [-1.0], [0.5]]), torch.tensor([[1.0], [0.0], [0.0]])
    p = torch.sigmoid(logits)
    pt = torch.where(y == 1, p, 1 - p)
    at = torch.where(y == 1, torch.tensor(0.75), torch.tensor(0.25))
    expected = (-at * (1 - pt) ** 2 * torch.log(pt)).mean()
    assert torch.allclose(WeightedFocalLoss(alpha=0.25, gamma=2)(logits, y), expected, atol=1e-6)


def test_create_model_heads_and_unknown_arch():
    assert create_model("efficientnet-b0")(torch.randn(2, 3, 32, 32)).shape == (2, 1)
    assert create_model("resnet18")(torch.randn(2, 3, 32, 32)).shape == (2, 1)
    old = create_model("efficientnet-b0")
    new = create_model("efficientnet_b0")  # torchvision's
    assert new(torch.randn(2, 3, 32, 32)).shape == (2, 1)
    assert new.classifier[-1].out_features == 1
    count = [sum(p.numel() for p in m.parameters()) for m in (old, new)]
    assert count[0] == count[1], count
    with pytest.raises(CourseLibError, match="unknown --arch 'vgg99'"):
        create_model("vgg99")


def test_nan_loss_stops_training_with_a_clear_message():
    model = torch.nn.Linear(4, 1)
    loader = [(torch.randn(2, 4), torch.ones(2, 1))] * 3

    def nan_loss(logits, y):
        return (logits * float("nan")).mean()

    with pytest.raises(CourseLibError, match="the loss became nan in epoch 0, by step 3"):
        train_one_epoch(
            model, loader, nan_loss, torch.optim.SGD(model.parameters(), lr=0.1), torch.device("cpu")
        )


def test_checkpoints_are_atomic_and_loaded_safely(tmp_path):
    p = save_checkpoint(tmp_path / "c" / "best.pt", model={"w": torch.ones(3)}, epoch=2)
    assert load_checkpoint(p)["epoch"] == 2 and not list((tmp_path / "c").glob(".*tmp"))
    p.write_bytes(p.read_bytes()[:50])
    with pytest.raises(CourseLibError, match="is damaged"):
        load_checkpoint(p)
    with pytest.raises(CourseLibError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "none.pt")


@pytest.mark.slow
def test_pytorch_and_lightning_agree_per_epoch(sample_dir, offline_run):
    """Same seed, data order and initial weights: both engines give the same numbers (CPU, fp32). The runs
    are the shared offline ones (conftest.OFFLINE_RUN: 3 epochs of 32 steps)."""
    runs, dirs = {}, {}
    for engine in ("pytorch", "lightning"):
        dirs[engine] = offline_run(engine)
        runs[engine] = json.loads((dirs[engine] / "metrics.json").read_text())
        assert runs[engine]["engine"] == engine and (dirs[engine] / "checkpoints").is_dir()
    pt, pl = runs["pytorch"]["epochs"], runs["lightning"]["epochs"]
    assert len(pt) == len(pl) == 3
    for a, b in zip(pt, pl):
        for k in ("train_loss", "valid_loss", "valid_auc"):
            assert abs(a[k] - b[k]) < 1e-5, (k, a, b)
    # chapter 10 predicts from either engine's best checkpoint, and both give the same probabilities
    from course_lib.predict import load_model, predict

    images = sorted((sample_dir / "test").glob("*.jpg"))[:8]
    probs = {}
    for engine, name in (("pytorch", "best.pt"), ("lightning", "best.ckpt")):
        model, info = load_model(dirs[engine] / "checkpoints" / name)
        assert (info["arch"], info["img_size"]) == ("resnet18", 32), info
        probs[engine] = predict(model, images, info["img_size"]).target
    assert (probs["pytorch"] - probs["lightning"]).abs().max() < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["pytorch", "lightning"])
def test_normalize_on_device_trains_identically(engine, sample_dir, tmp_path, capsys):
    """uint8 batches normalised by the engine (the default) give the same numbers to the last bit as
    --no-normalize-on-device's float batches."""
    runs = {}
    for flag in (["--no-normalize-on-device"], []):
        out = tmp_path / ("float" if flag else "uint8")
        code, _, err = run_main(
            capsys,
            "train",
            "--data",
            sample_dir,
            "--epochs",
            2,
            "--img-size",
            32,
            "--batch-size",
            16,
            "--arch",
            "resnet18",
            "--engine",
            engine,
            *flag,
            "--out",
            out,
        )
        assert code == 0, err[-2000:]
        runs[out.name] = json.loads((out / "metrics.json").read_text())["epochs"]
    for a, b in zip(runs["float"], runs["uint8"], strict=True):
        for k in ("train_loss", "valid_loss", "valid_auc"):
            assert a[k] == b[k], (engine, k, a, b)


# Bad arguments are tried in-process in tests/test_bad_input.py; this one goes through the installed program.
def test_train_refuses_non_utf8_csv(data_copy, tmp_path):
    d, df = data_copy
    (d / "train.csv").write_bytes(
        (d / "train.csv").read_bytes().replace(b"benign", "b\xe9nin".encode("latin-1"))
    )
    r = run_cli("train", "--data", d, "--out", tmp_path / "o", timeout=120)
    assert r.returncode == 1 and "is not UTF-8 text" in r.stderr and "Traceback" not in r.stderr


def test_roc_auc_is_the_metric_of_every_engine_and_nan_for_one_class():
    "engine.evaluate and the Lightning module score a fold as roc_auc does: sklearn's AUC, NaN for one class."
    from sklearn.metrics import roc_auc_score
    from torch.utils.data import DataLoader, TensorDataset
    from course_lib.pytorch_loop import evaluate, roc_auc
    from course_lib.lightning import MelanomaModule

    p = torch.tensor([0.1, 0.4, 0.35, 0.8])
    assert roc_auc(p, torch.tensor([0, 0, 1, 1])) == 0.75  # sklearn's roc_auc_score on the same numbers
    assert roc_auc(p[:, None], torch.tensor([[0.0], [0.0], [1.0], [1.0]])) == 0.75  # (n, 1) floats, as y is
    assert math.isnan(roc_auc(p, torch.zeros(4))) and math.isnan(roc_auc(p, torch.ones(4)))

    torch.manual_seed(0)
    x = torch.rand(8, 3, 32, 32)
    module = MelanomaModule("simple-cnn", False).eval()
    with torch.no_grad():
        probs = torch.sigmoid(module(x)).flatten()
    for y in (torch.tensor([0.0, 1.0] * 4)[:, None], torch.zeros(8, 1)):
        want = roc_auc_score(y.flatten(), probs) if y.unique().numel() == 2 else math.nan
        loader = DataLoader(TensorDataset(x, y), batch_size=3)
        got = evaluate(module.model, loader, module.loss_fn, torch.device("cpu"))["valid_auc"]
        logged = {}
        module.log = lambda name, value, **kw: logged.update({name: value})  # outside a Trainer
        with torch.no_grad():
            for batch_idx, batch in enumerate(loader):
                module.validation_step(batch, batch_idx)
        module.on_validation_epoch_end()
        for engine_auc in (got, logged["valid_auc"]):
            assert (math.isnan(want) and math.isnan(engine_auc)) or abs(engine_auc - want) < 1e-6, (want, got)


def test_simple_cnn_is_an_arch_without_pretrained_weights(capsys, tmp_path):
    model = create_model("simple-cnn")
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 1)
    with pytest.raises(CourseLibError, match="--arch simple-cnn has no pretrained weights"):
        create_model("simple-cnn", pretrained=True)
    assert create_model("simple-cnn", pretrained=True, allow_random_init=True)(
        torch.zeros(1, 3, 16, 16)
    ).shape == (1, 1)
    code, _, err = run_main(capsys, "train", "--arch", "simple-cnn", "--pretrained", "--out", tmp_path / "o")
    assert code == 1 and err.strip().splitlines() == [
        "course-lib: error: --arch simple-cnn has no pretrained weights: train it without --pretrained"
    ], err
    assert not (tmp_path / "o").exists()
