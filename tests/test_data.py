"Chapters 01-02: the sample generator, folds, Kaggle files, FashionMNIST, and seeded augmentations."

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from course_lib import data
from course_lib.support import fashion, kaggle_data, results, sample
from course_lib.support.kaggle_data import KAGGLE_COLUMNS
from course_lib.support.errors import CourseLibError


def test_sample_has_exact_kaggle_layout(sample_dir):
    df = pd.read_csv(sample_dir / "train.csv")
    assert list(df.columns) == KAGGLE_COLUMNS
    assert len(df) == 120 and df.image_name.is_unique
    for name, w, h in zip(df.image_name, df.width, df.height):
        with Image.open(sample_dir / "train" / f"{name}.jpg") as im:
            assert im.format == "JPEG" and im.mode == "RGB" and im.size == (48, 48) != (w, h)
    assert set(df.target) == {0, 1}


def test_sample_has_the_real_tables_quirks(sample_dir):
    """Duplicate photos marked tfrecord -1 (a copy of the row before, same patient and pixels), the original
    photographs' width and height, and empty metadata cells, as on the real train.csv."""
    df = pd.read_csv(sample_dir / "train.csv")
    copies = df.index[df.tfrecord == kaggle_data.DUPLICATE]
    assert len(copies) == 120 // 75
    for i in copies:
        before = df.loc[i - 1]
        assert df.patient_id[i] == before.patient_id and df.target[i] == before.target
        copy, original = (sample_dir / "train" / f"{n}.jpg" for n in (df.image_name[i], before.image_name))
        assert copy.read_bytes() == original.read_bytes()
    assert set(zip(df.width, df.height)) <= set(sample._PHOTO_SIZES)
    big = sample.sample_table(2000, 0.2, np.random.default_rng(0))
    assert big[["sex", "age_approx", "anatom_site_general_challenge"]].isna().any().all()
    assert (big.tfrecord == -1).sum() == 2000 // 75
    kept = data.drop_duplicate_photos(big, verbose=False)
    data.check_no_leakage(kept.assign(fold=kept.tfrecord))
    with pytest.raises(CourseLibError, match="patients appear in several folds"):
        data.check_no_leakage(big.assign(fold=big.tfrecord))
    assert (df.benign_malignant == np.where(df.target == 1, "malignant", "benign")).all()
    assert df.groupby("patient_id").size().max() > 1, "several images per patient"


def test_sample_is_deterministic_by_seed(tmp_path):
    a = sample.make_sample_dataset(tmp_path / "a", n=15, img_size=32, seed=3)
    b = sample.make_sample_dataset(tmp_path / "b", n=15, img_size=32, seed=3)
    c = sample.make_sample_dataset(tmp_path / "c", n=15, img_size=32, seed=4)
    assert (a / "train.csv").read_text() == (b / "train.csv").read_text()
    first = pd.read_csv(a / "train.csv").image_name[0]
    assert (a / "train" / f"{first}.jpg").read_bytes() == (b / "train" / f"{first}.jpg").read_bytes()
    assert (a / "train.csv").read_text() != (c / "train.csv").read_text()


def test_positive_rate_is_configurable(tmp_path):
    df = pd.read_csv(
        sample.make_sample_dataset(tmp_path / "s", n=400, img_size=16, pos_rate=0.05, seed=0) / "train.csv"
    )
    assert 0.02 < df.target.mean() < 0.09


def test_malignant_images_differ_learnably():
    "Malignant lesions cover more dark area on average: a signal a model can learn."

    def dark_fraction(m, s):
        return (np.asarray(sample.make_lesion_image(m, 64, s)).mean(-1) < 110).mean()

    benign = np.mean([dark_fraction(False, s) for s in range(30)])
    malignant = np.mean([dark_fraction(True, s) for s in range(30)])
    assert malignant > 1.5 * benign


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(n=0), "--n must be at least 1"),
        (dict(img_size=8), "--img-size must be at least 16"),
        (dict(pos_rate=1.5), "--pos-rate must be between 0 and 1"),
    ],
)
def test_sample_rejects_bad_parameters(tmp_path, kw, msg):
    with pytest.raises(CourseLibError, match=msg):
        sample.make_sample_dataset(tmp_path / "x", **kw)
    assert not (tmp_path / "x").exists(), "nothing half-written"


def test_folds_are_patient_disjoint_and_stratified(sample_dir):
    df = data.add_folds(pd.read_csv(sample_dir / "train.csv"), n_folds=5, seed=0)
    data.check_no_leakage(df)
    assert sorted(df.fold.unique()) == [0, 1, 2, 3, 4]
    assert (df.groupby("patient_id").fold.nunique() == 1).all()
    assert (df.groupby("fold").target.sum() > 0).all(), "every fold holds positives"
    assert df.groupby("fold").target.mean().std() < 0.1


def test_leakage_check_catches_row_wise_split(sample_dir):
    df = pd.read_csv(sample_dir / "train.csv")
    df["fold"] = np.arange(len(df)) % 5
    with pytest.raises(CourseLibError, match="patients appear in several folds"):
        data.check_no_leakage(df)


def test_too_few_patients_for_folds():
    df = pd.DataFrame({"patient_id": ["a", "a", "b"], "target": [0, 1, 0]})
    with pytest.raises(CourseLibError, match="5 folds need at least 5 patients"):
        data.add_folds(df, 5)


def test_kaggle_rejects_unknown_size(tmp_path):
    with pytest.raises(CourseLibError, match="--size must be one of"):
        kaggle_data.download_kaggle(tmp_path, size=300)


def test_fashion_mnist_sample_loads_with_torchvision(tmp_path):
    from torchvision.datasets import FashionMNIST

    root = fashion.make_fashion_mnist_sample(tmp_path, n_train=50, n_test=10, seed=1)
    train, test = (
        FashionMNIST(str(root), train=True, download=False),
        FashionMNIST(str(root), train=False, download=False),
    )
    assert len(train) == 50 and len(test) == 10
    assert train.data.shape == (50, 28, 28) and train.data.dtype.is_floating_point is False
    assert set(train.targets.tolist()) <= set(range(10))
    img, label = train[0]
    assert img.size == (28, 28) and isinstance(label, int)


def test_fashion_mnist_classes_are_learnable(tmp_path):
    "A nearest-class-mean classifier on the generated images beats chance (10%) by far."
    from torchvision.datasets import FashionMNIST

    root = fashion.make_fashion_mnist_sample(tmp_path, n_train=500, n_test=200, seed=2)
    tr, te = FashionMNIST(str(root), train=True), FashionMNIST(str(root), train=False)
    x, y = tr.data.float().flatten(1), tr.targets
    means = np.stack([x[y == c].mean(0).numpy() for c in range(10)])
    pred = ((te.data.float().flatten(1).numpy()[:, None] - means[None]) ** 2).sum(-1).argmin(1)
    assert (pred == te.targets.numpy()).mean() > 0.8


def test_record_results_writes_json(tmp_path):
    import json

    out = results.record_results({"auc": 0.5}, tmp_path / "deep" / "r.json")
    assert out == {"auc": 0.5} and json.loads((tmp_path / "deep" / "r.json").read_text()) == {"auc": 0.5}


def test_sample_is_built_beside_its_destination_when_tmp_is_another_file_system(tmp_path, monkeypatch):
    """Colab's Drive or a tmpfs /tmp: the set is assembled next to where it goes, so moving it into place
    cannot cross devices."""
    import os
    import tempfile
    from course_lib.support.sample import make_sample_dataset

    other = "/dev/shm"
    if not os.path.isdir(other) or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.fail("this test needs /dev/shm on a file system other than the tests' tmp folder")
    monkeypatch.setattr(tempfile, "tempdir", other)
    out = make_sample_dataset(tmp_path / "not" / "yet" / "there", n=12, img_size=32, seed=1)
    assert len(list((out / "train").glob("*.jpg"))) == 12 and (out / "train.csv").exists()
    assert [p.name for p in out.parent.iterdir()] == ["there"], "no half-built folder left beside it"


def _flip_counts(seed_fn, keys=range(400)):
    "How often each flip combination comes out of HorizontalFlip + VerticalFlip, seeded per key by `seed_fn`."
    import collections
    import albumentations as A

    flips = A.Compose([A.HorizontalFlip(), A.VerticalFlip()])
    tiny = np.arange(4 * 4 * 3, dtype=np.uint8).reshape(4, 4, 3)
    kinds = {"none": tiny, "h": tiny[:, ::-1], "v": tiny[::-1], "h+v": tiny[::-1, ::-1]}
    counts = collections.Counter()
    for key in keys:
        seed_fn(flips, key)
        out = flips(image=tiny)["image"]
        counts[next(k for k, v in kinds.items() if np.array_equal(out, v))] += 1
    return counts


def test_seeded_flips_are_independent_and_repeat():
    """Compose.set_random_seed gives both flips one seed, so they always agree; seed_augmentations
    shares one generator pair, so all four combinations occur, about equally, the same for the same key."""
    from course_lib.dataset import seed_augmentations

    same_seed = _flip_counts(lambda c, k: c.set_random_seed(k))
    assert set(same_seed) == {"none", "h+v"}, same_seed  # the albumentations behaviour we work around
    shared = _flip_counts(seed_augmentations)
    assert set(shared) == {"none", "h", "v", "h+v"} and min(shared.values()) > 60, shared
    assert _flip_counts(seed_augmentations) == shared, "the same keys give the same flips"


@pytest.mark.parametrize("library", ["torchvision", "albumentations"])
def test_dataset_keys_seed_each_image_and_plain_indices_still_work(sample_dir, library):
    from course_lib.dataset import MelanomaDataset, get_transforms
    from course_lib.dataset import image_path

    df = pd.read_csv(sample_dir / "train.csv")
    paths = [image_path(sample_dir, n) for n in df.image_name[:4]]
    tfms = get_transforms(24, train=True, normalize=False, library=library)
    ds = MelanomaDataset(paths, df.target[:4], tfms, seed=3)
    state = torch.get_rng_state()
    assert torch.equal(ds[(2, 1)][0], ds[(2, 1)][0]), "the same (epoch, index): the same crop and flips"
    crops = [ds[(e, 1)][0] for e in range(8)]
    assert any(not torch.equal(crops[0], c) for c in crops[1:]), "another epoch: other augmentations"
    x, y = ds[1]
    assert x.dtype == torch.uint8 and x.shape == (3, 24, 24) and y.tolist() == [float(df.target[1])]
    if library == "torchvision":
        torch.set_rng_state(state)  # the plain index above drew from torch's generator; the keys did not
        assert torch.equal(ds[(2, 1)][0], crops[2]) and torch.equal(torch.get_rng_state(), state)


def test_torchvision_flips_are_independent_and_normalise_as_albumentations(sample_dir):
    """The default pipeline (torchvision.transforms.v2), seeded per key by augment: all four flip pairs,
    the same for the same key; normalised in the pipeline, bit for bit what normalize_batch gives on the
    device; and the albumentations pipeline's shape and dtype."""
    import collections
    from course_lib.dataset import get_transforms, load_image
    from course_lib.dataset import normalize_batch
    from course_lib.dataset import augment
    from course_lib.dataset import image_path

    tiny = np.arange(4 * 4 * 3, dtype=np.uint8).reshape(4, 4, 3)
    kinds = {"none": tiny, "h": tiny[:, ::-1], "v": tiny[::-1], "h+v": tiny[::-1, ::-1]}
    from torchvision.transforms import v2

    flips = v2.Compose([v2.ToImage(), v2.RandomHorizontalFlip(), v2.RandomVerticalFlip(), v2.ToPureTensor()])

    def counts():
        c = collections.Counter()
        for key in range(400):
            out = augment(flips, tiny, key).permute(1, 2, 0).numpy()
            c[next(k for k, v in kinds.items() if np.array_equal(out, v))] += 1
        return c

    first = counts()
    assert set(first) == set(kinds) and min(first.values()) > 60 and counts() == first, first
    image = load_image(image_path(sample_dir, pd.read_csv(sample_dir / "train.csv").image_name[0]))
    raw, normed = (augment(get_transforms(32, True, normalize=n), image, 5) for n in (False, True))
    assert raw.dtype == torch.uint8 and torch.equal(normed, normalize_batch(raw[None])[0])
    album = augment(get_transforms(32, True, normalize=False, library="albumentations"), image, 5)
    assert type(album) is type(raw) is torch.Tensor and album.shape == raw.shape and album.dtype == raw.dtype
    from course_lib.support.errors import CourseLibError

    with pytest.raises(CourseLibError, match="--augmentations must be one of torchvision, albumentations"):
        get_transforms(32, library="kornia")
