"""Chapter 07: torch.compile in the engine, in Lightning and on the command line; the checkpoints of compiled
runs resume either way and predict."""

import json
import pytest
import torch
from conftest import run_cli, run_main
from course_lib.support.checkpoints import uncompiled_state_dict
from course_lib.pytorch_loop import load_checkpoint
from course_lib.pytorch_loop import create_model
from course_lib.predict import load_model

ARCH, SIZE = "resnet18", 32
TRAIN = ("--arch", ARCH, "--img-size", SIZE, "--batch-size", 16, "--lr", 1e-3, "--wandb", "disabled")


def train(data, out, *args):
    "course-lib train on a generated set of JPEGs in the Kaggle layout; its metrics.json."
    r = run_cli("train", "--data", data, *TRAIN, "--out", out, *args, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((out / "metrics.json").read_text())


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    "300 generated JPEGs in the Kaggle layout (the smoke course's size): about 12 positives per fold."
    from course_lib.support.sample import make_sample_dataset

    return make_sample_dataset(tmp_path_factory.mktemp("sample") / "melanoma", n=300, img_size=48, seed=7)


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory):
    """Three epochs from the same seed: the pytorch engine eager, and both engines with --compile (chapter 04
    shows the engines equal when eager); name -> (metrics, OUT)."""
    root = tmp_path_factory.mktemp("compile")
    found = {}
    for name, args in (
        ("pytorch", ("--engine", "pytorch")),
        ("pytorch-compiled", ("--engine", "pytorch", "--compile")),
        ("lightning-compiled", ("--engine", "lightning", "--compile")),
    ):
        found[name] = (train(data, root / name, "--epochs", 3, *args), root / name)
    return found


@pytest.mark.deep  # Inductor builds ResNet-18 three times: per push, chapter 07 and the tests below
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["pytorch", "lightning"])
def test_compile_reaches_the_eager_auc(runs, engine):
    (eager, _), (compiled, out) = runs["pytorch"], runs[f"{engine}-compiled"]
    assert json.loads((out / "config.json").read_text())["compile"] is True
    assert len(compiled["epochs"]) == len(eager["epochs"]) == 3
    # Not bit-equal, and not within rounding after 45 steps: for ResNet-18 on a CPU, Inductor's gradients of
    # one step differ from eager ones by up to 0.4% of the largest gradient (measured: 0.0019 of 0.46; its
    # BatchNorm backward computes in another order), and Adam's normalised steps carry that forward. Measured
    # here on 2026-12-02: best valid AUC 0.876 compiled, 0.832 eager (0.044 apart); epoch-0 training loss
    # 0.1745 and 0.1597. The bound is what that allows, not chapter 07's 0.0015 for its four-layer CNN.
    assert compiled["best_valid_auc"] > 0.7 and eager["best_valid_auc"] > 0.7, (eager, compiled)
    assert abs(compiled["best_valid_auc"] - eager["best_valid_auc"]) < 0.08, (eager, compiled)


@pytest.mark.deep  # Inductor builds ResNet-18 three times: per push, chapter 07 and the tests below
@pytest.mark.slow
def test_compiled_engines_agree(runs):
    "Chapter 04's equivalence, both engines compiled: the same losses per epoch, to compile's rounding."
    pt, pl = runs["pytorch-compiled"][0]["epochs"], runs["lightning-compiled"][0]["epochs"]
    assert len(pt) == len(pl) > 0, (len(pt), len(pl))
    for a, b in zip(pt, pl):
        assert abs(a["train_loss"] - b["train_loss"]) < 1e-3 and abs(a["valid_loss"] - b["valid_loss"]) < 1e-3


@pytest.mark.deep  # Inductor builds ResNet-18 three times: per push, chapter 07 and the tests below
@pytest.mark.slow
def test_checkpoints_of_compiled_runs_hold_the_modules_own_names(runs):
    for name in ("pytorch-compiled", "lightning-compiled"):
        out = runs[name][1] / "checkpoints"
        ckpt = load_checkpoint(next(out.glob("last.*")))
        weights = ckpt.get("model") or ckpt["state_dict"]
        assert weights and not any("_orig_mod" in k for k in weights), name
        model, info = load_model(next(out.glob("best.*")))  # chapter 10 reads either
        assert info["arch"] == ARCH and not model.training


@pytest.mark.deep  # Inductor builds ResNet-18 three times: per push, chapter 07 and the tests below
@pytest.mark.slow
@pytest.mark.parametrize(
    "name, flag",
    [("pytorch-compiled", ()), ("lightning-compiled", ())],
    ids=["pytorch-compiled-then-eager", "lightning-compiled-then-eager"],
)
def test_compiled_runs_resume_eagerly(runs, data, tmp_path, name, flag):
    """A compiled run continues eagerly (--compile may change on --resume); the other way round, which
    compiles again, is test_fit_takes_a_model_compiled_by_hand's."""
    import shutil

    out = tmp_path / name
    shutil.copytree(runs[name][1], out)
    before = json.loads((out / "metrics.json").read_text())["epochs"]
    after = train(data, out, "--engine", name.split("-")[0], "--epochs", 4, "--resume", *flag)["epochs"]
    assert [r["epoch"] for r in after] == [0, 1, 2, 3], (name, after)
    assert after[:3] == before, "the resumed run keeps the epochs it had"


def test_a_model_compiled_by_hand_saves_prefixed_names_that_load(tmp_path):
    "torch.compile's wrapper names every weight _orig_mod.*; uncompiled_state_dict and load_model read them."
    model = create_model(ARCH)
    compiled = torch.compile(model)  # nothing compiles until the first call: this test calls none
    weights = compiled.state_dict()
    assert all(k.startswith("_orig_mod.") for k in weights)
    with pytest.raises(RuntimeError):
        create_model(ARCH).load_state_dict(weights)
    assert uncompiled_state_dict(weights).keys() == model.state_dict().keys()
    torch.save({"model": weights, "arch": ARCH}, tmp_path / "by-hand.pt")
    loaded, info = load_model(tmp_path / "by-hand.pt")
    assert info["arch"] == ARCH
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))


def test_fit_takes_a_model_compiled_by_hand(sample_dir, tmp_path):
    "fit on an OptimizedModule: it trains the module underneath and saves that module's names."
    import pandas as pd
    from course_lib.data import add_folds
    from course_lib.dataset import LoaderConfig, make_dataloaders
    from course_lib.pytorch_loop import TrainConfig
    from course_lib.pytorch_loop import fit
    from course_lib.support.seeding import seed_everything

    df = add_folds(pd.read_csv(sample_dir / "train.csv"), seed=42)
    train_loader, valid_loader = make_dataloaders(df, sample_dir, LoaderConfig(0, 16, 32, 0, 42))
    seed_everything(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    net.append(torch.nn.Linear(4, 1))
    start = [p.detach().clone() for p in net.parameters()]
    compiled = torch.compile(net, backend="eager")  # Dynamo without Inductor: the wrapping is what is tested
    cfg = TrainConfig(epochs=1, progress=False, checkpoint_dir=tmp_path)
    fit(compiled, train_loader, valid_loader, cfg)
    assert any(not torch.equal(a, b) for a, b in zip(start, net.parameters())), (
        "the module underneath trained"
    )
    assert set(load_checkpoint(tmp_path / "last.pt")["model"]) == set(net.state_dict())
    # and an eager checkpoint resumes compiled: TrainConfig(compile=True), Dynamo and Inductor this time
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    fresh = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    fresh.append(torch.nn.Linear(4, 1))
    cfg = TrainConfig(epochs=2, progress=False, checkpoint_dir=tmp_path, resume=True, compile=True)
    history = fit(fresh, train_loader, valid_loader, cfg)
    assert [r["epoch"] for r in history["epochs"]] == [0, 1]
    assert counters["stats"]["unique_graphs"] >= 1, dict(counters)
    assert set(load_checkpoint(tmp_path / "last.pt")["model"]) == set(net.state_dict())


def test_xla_refuses_compile_in_one_line(capsys, tmp_path):
    code, out, err = run_main(capsys, "train", "--engine", "xla", "--compile", "--out", tmp_path / "o")
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "--compile is for the pytorch and lightning engines; torch_xla already compiles" in err
    assert not (tmp_path / "o").exists()
