"""Chapter 10's course_lib.predict and `course-lib predict`: checkpoints of every engine load, predictions
agree with evaluation, the submission has Kaggle's format, and bad input stops in one line."""

import shutil
import pandas as pd
import pytest
import torch
from conftest import REPO, run_main
from course_lib.pytorch_loop import TrainConfig, evaluate
from course_lib.pytorch_loop import fit
from course_lib.support.seeding import seed_everything
from course_lib.pytorch_loop import save_checkpoint
from course_lib.pytorch_loop import create_model
from course_lib.support.errors import CourseLibError
from course_lib.predict import FLIPS, ensemble, load_model, predict, write_submission

ARCH, SIZE = "resnet18", 32


@pytest.fixture(scope="module")
def trained(sample_dir, tmp_path_factory):
    "One epoch of chapter 03's fit on the sample set, with its checkpoint, loaders and history."
    from course_lib.data import add_folds
    from course_lib.dataset import LoaderConfig, make_dataloaders

    df = add_folds(pd.read_csv(sample_dir / "train.csv"), seed=42)
    loaders = make_dataloaders(df, sample_dir, LoaderConfig(0, SIZE, 16, 0, 42))
    out = tmp_path_factory.mktemp("ckpt")
    seed_everything(42)
    cfg = TrainConfig(epochs=1, lr=1e-3, checkpoint_dir=out, progress=False)
    history = fit(create_model(ARCH), *loaders, cfg, config=dict(arch=ARCH, img_size=SIZE))
    return dict(ckpt=out / "best.pt", df=df, loaders=loaders, history=history)


def test_a_checkpoint_predicts_what_evaluation_measured(trained, sample_dir):
    from course_lib.dataset import image_path

    model, info = load_model(trained["ckpt"])
    assert info["arch"] == ARCH and info["img_size"] == SIZE and not model.training
    valid = trained["df"][trained["df"].fold == 0]
    preds = predict(model, [image_path(sample_dir, n) for n in valid.image_name], SIZE)
    ev = evaluate(model, trained["loaders"][1], torch.nn.BCEWithLogitsLoss(), torch.device("cpu"))
    assert list(preds.image_name) == list(valid.image_name)
    assert torch.allclose(torch.tensor(preds.target.values), ev["probs"].double(), atol=1e-6)


def test_tta_averages_the_four_flips(trained, sample_dir):
    model, _ = load_model(trained["ckpt"])
    paths = sorted((sample_dir / "test").glob("*.jpg"))[:4]
    plain, tta = predict(model, paths, SIZE), predict(model, paths, SIZE, tta=True)
    flipped = [predict(_Flipped(model, d), paths, SIZE).target.values for d in FLIPS]
    assert len(FLIPS) == 4 and torch.allclose(torch.tensor(tta.target.values), torch.tensor(sum(flipped) / 4))
    assert not torch.allclose(torch.tensor(tta.target.values), torch.tensor(plain.target.values))


class _Flipped(torch.nn.Module):
    "The model seeing every image flipped along `dims`."

    def __init__(self, model, dims):
        super().__init__()
        self.model, self.dims = model, dims

    def forward(self, x):
        return self.model(x.flip(self.dims) if self.dims else x)


def test_lightning_and_xla_checkpoints_load(trained, tmp_path):
    weights = load_checkpoint_weights(trained["ckpt"])
    lightning = {  # a Lightning checkpoint's layout: the module's weights, the loss's buffer, hparams
        "state_dict": {**{f"model.{k}": v for k, v in weights.items()}, "loss_fn.alpha": torch.ones(2)},
        "hyper_parameters": {"arch": ARCH},
    }
    torch.save(lightning, tmp_path / "last.ckpt")
    save_checkpoint(tmp_path / "xla.pt", model=weights, epoch=0, arch=ARCH)
    for path in (tmp_path / "last.ckpt", tmp_path / "xla.pt"):
        model, info = load_model(path)
        assert info["arch"] == ARCH
        assert all(torch.equal(model.state_dict()[k], v) for k, v in weights.items())


def load_checkpoint_weights(path):
    from course_lib.pytorch_loop import load_checkpoint

    return load_checkpoint(path)["model"]


def test_foreign_checkpoints_are_refused_in_one_line(trained, tmp_path):
    save_checkpoint(tmp_path / "other.pt", model=load_checkpoint_weights(trained["ckpt"]), arch="resnet34")
    torch.save({"weights": torch.ones(2)}, tmp_path / "foreign.pt")
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    for name, match in (
        ("other.pt", "weights of another network than resnet34"),
        ("foreign.pt", "not a course_lib checkpoint"),
        ("junk.pt", "damaged or not a course_lib checkpoint"),
    ):
        with pytest.raises(CourseLibError, match=match) as e:
            load_model(tmp_path / name)
        assert "\n" not in str(e.value)


def test_the_submission_has_kaggles_format(trained, sample_dir, tmp_path):
    model, _ = load_model(trained["ckpt"])
    test = pd.read_csv(sample_dir / "test.csv")
    paths = [sample_dir / "test" / f"{n}.jpg" for n in test.image_name]
    torch.manual_seed(1)
    other = create_model(ARCH).eval()  # a second, different model: the ensemble is the two models' mean
    preds = ensemble([model, other], paths, SIZE)
    one, two = (torch.tensor(predict(m, paths, SIZE).target.values) for m in (model, other))
    assert torch.allclose(torch.tensor(preds.target.values), (one + two) / 2) and not torch.allclose(one, two)
    out = write_submission(
        preds.sample(frac=1, random_state=0), sample_dir / "test.csv", tmp_path / "sub.csv"
    )
    sub = pd.read_csv(out)
    assert list(sub.columns) == ["image_name", "target"] and list(sub.image_name) == list(test.image_name)
    assert sub.target.between(0, 1).all()
    with pytest.raises(CourseLibError, match="exists"):
        write_submission(preds, sample_dir / "test.csv", out)
    with pytest.raises(CourseLibError, match="no prediction for 1 test.csv image"):
        write_submission(preds.iloc[1:], sample_dir / "test.csv", tmp_path / "short.csv")


def test_the_command_writes_a_submission_and_scores_images(trained, sample_dir, tmp_path, capsys):
    out = tmp_path / "submission.csv"
    code, stdout, err = run_main(
        capsys,
        "predict",
        "--checkpoint",
        trained["ckpt"],
        "--checkpoint",
        trained["ckpt"],
        "--data",
        sample_dir,
        "--tta",
        "--out",
        out,
    )
    assert code == 0 and "from 2 checkpoint(s)" in stdout, err
    assert len(pd.read_csv(out)) == len(pd.read_csv(sample_dir / "test.csv"))
    images = sorted((sample_dir / "test").glob("*.jpg"))[:3]
    code, stdout, err = run_main(capsys, "predict", "--checkpoint", trained["ckpt"], *images)
    lines = stdout.splitlines()
    assert code == 0 and len(lines) == 3 and all(0 <= float(x.split("\t")[1]) <= 1 for x in lines), err


# (bad input, arguments after --checkpoint, what the user sees): TROUBLESHOOTING.md lists them
PREDICT_CASES = [
    (
        "`--data` folder without test.csv",
        lambda t, d: ("--data", t / "no-test", "--out", t / "s.csv"),
        "has no test.csv",
    ),
    ("an image that is not an image", lambda t, d: (t / "broken.jpg",), "broken.jpg is unreadable"),
    ("an image file that does not exist", lambda t, d: (t / "missing.jpg",), "missing.jpg is missing"),
    (
        "image files and `--data` together",
        lambda t, d: (t / "broken.jpg", "--data", d, "--out", t / "s.csv"),
        "not both",
    ),
    ("`--data` without `--out`", lambda t, d: ("--data", d), "--data and --out go together"),
    (
        "a test image that cannot be read",
        lambda t, d: ("--data", t / "bad-test", "--out", t / "s.csv"),
        "1 image(s) cannot be used: ISIC_",
    ),
]


def test_the_command_refuses_bad_input_in_one_line(trained, sample_dir, tmp_path, capsys):
    (tmp_path / "broken.jpg").write_bytes(b"not a jpeg")
    (tmp_path / "no-test").mkdir()
    shutil.copytree(sample_dir / "test", tmp_path / "bad-test" / "test")
    shutil.copy(sample_dir / "test.csv", tmp_path / "bad-test")
    next((tmp_path / "bad-test" / "test").glob("*.jpg")).write_bytes(b"not a jpeg")
    page = (REPO / "TROUBLESHOOTING.md").read_text()
    for what, args, message in PREDICT_CASES:
        code, _, err = run_main(
            capsys, "predict", "--checkpoint", trained["ckpt"], *args(tmp_path, sample_dir)
        )
        assert code == 1 and message in err and len(err.strip().splitlines()) == 1, (what, err)
        assert f"| {what} | `course-lib: error: " in page, f"TROUBLESHOOTING.md lacks a row for: {what}"
    images = sorted((sample_dir / "test").glob("*.jpg"))[:1]
    code, _, err = run_main(capsys, "predict", "--checkpoint", tmp_path / "none.pt", *images)
    assert code == 1 and "no checkpoint at" in err and "| a checkpoint that does not load |" in page


def test_submitting_without_a_kaggle_token_says_so_in_one_line(no_kaggle_env, tmp_path):
    from course_lib.predict import submit_to_kaggle

    (tmp_path / "submission.csv").write_text("image_name,target\nISIC_1,0.5\n")
    with pytest.raises(
        CourseLibError, match="nothing was submitted: no Kaggle data and no Kaggle token"
    ) as e:
        submit_to_kaggle(tmp_path / "submission.csv", "a test")
    assert "\n" not in str(e.value)
