"""Every field of chapter 03's TrainConfig and of chapter 02's LoaderConfig, set to a value other than its
default, either changes what an engine hands its framework (the Lightning Trainer and its fit call, the
loaders, the XLA replicas' settings) or is refused in one line that names the field. Chapter 03's own `fit`
reads all twelve TrainConfig fields; its tests cover each."""

import dataclasses
import json
from unittest import mock

import pytest
import pytorch_lightning as pl
from course_lib.pytorch_loop import TrainConfig
from course_lib.support.errors import CourseLibError
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint


def _other_values(tmp_path) -> dict:
    "A value unlike the default for every field (resume needs a checkpoint folder, as TrainConfig says)."
    folder = tmp_path / "checkpoints"
    return dict(
        epochs=3,
        lr=1e-2,
        precision="bf16-mixed",
        accumulate=2,
        channels_last=True,
        patience=1,
        seed=7,
        checkpoint_dir=folder,
        resume=dict(resume=True, checkpoint_dir=folder),
        progress=False,
        check_every=5,
        compile=True,
    )


def _configs(tmp_path):
    "(field, the baseline config, the config with that field changed) for every field of TrainConfig."
    values = _other_values(tmp_path)
    assert set(values) == {f.name for f in dataclasses.fields(TrainConfig)}, "a field without a test value"
    for name, value in values.items():
        changed = value if isinstance(value, dict) else {name: value}
        base = {k: v for k, v in changed.items() if k != name}  # resume's baseline keeps the folder
        yield name, TrainConfig(**base), TrainConfig(**changed)


def _lightning_run(cfg, capsys) -> tuple:
    "What fit_lightning hands Lightning for `cfg`: the Trainer's settings, the fit's checkpoint, its words."
    from course_lib.lightning import MelanomaModule
    from course_lib.support.trainer import fit_lightning

    seen = {}

    def fit(trainer, module, datamodule=None, ckpt_path=None):
        seen.update(trainer=trainer, ckpt_path=ckpt_path)

    with mock.patch.object(pl.Trainer, "fit", fit):
        fit_lightning(MelanomaModule("simple-cnn", False), None, cfg)
    t = seen["trainer"]
    return (
        t.max_epochs,
        t.accumulate_grad_batches,
        t.precision,
        [cb.patience for cb in t.callbacks if isinstance(cb, EarlyStopping)],
        [str(cb.dirpath) for cb in t.callbacks if isinstance(cb, ModelCheckpoint)],
        t.progress_bar_callback is not None,
        seen["ckpt_path"],
        capsys.readouterr().out,
    )


def _xla_run(cfg, out, loader=None, **flags) -> dict:
    "The settings train_xla hands every replica for `cfg` and `loader` (the launch is recorded, not run)."
    import course_lib.support.xla as xla

    seen = {}

    def launch(fn, args=(), start_method=None):
        seen.update(args[0])
        (out / "xla_history.json").write_text(json.dumps({}))

    with mock.patch("torch_xla.launch", launch), mock.patch.object(xla, "xla_device_type", lambda: "CPU"):
        xla.train_xla(cfg, loader, out=str(out), **flags)
    return {k: str(v) for k, v in seen.items() if k != "tracker"}


def _changed_or_refused(run, name, base, changed):
    "Whether the changed field was refused in one line naming it; otherwise assert it changed the run."
    kind = type(changed).__name__
    try:
        got = run(changed)
    except CourseLibError as e:
        assert f"{kind}({name}=" in str(e) and "\n" not in str(e), str(e)
        return "refused"
    assert got != run(base), f"{kind}({name}=...) changed nothing the engine hands its framework"
    return "used"


def test_lightning_uses_or_refuses_every_field(tmp_path, capsys):
    outcome = {
        name: _changed_or_refused(lambda cfg: _lightning_run(cfg, capsys), name, base, changed)
        for name, base, changed in _configs(tmp_path)
    }
    # the module holds these, so a TrainConfig that asks for other values is refused; the Trainer has no
    # use for check_every
    refused = {"lr", "seed", "channels_last", "compile", "check_every"}
    assert {n for n, o in outcome.items() if o == "refused"} == refused, outcome


@pytest.mark.xla
def test_xla_uses_or_refuses_every_field(tmp_path):
    outcome = {
        name: _changed_or_refused(lambda cfg: _xla_run(cfg, tmp_path), name, base, changed)
        for name, base, changed in _configs(tmp_path)
    }
    refused = {"channels_last", "patience", "resume", "progress", "check_every", "compile"}
    assert {n for n, o in outcome.items() if o == "refused"} == refused, outcome


LOADER_VALUES = dict(  # a value unlike the default for every field of LoaderConfig
    fold=1,
    img_size=64,
    batch_size=8,
    num_workers=1,
    seed=7,
    check_images=False,
    normalize_on_device=False,
    augmentations="albumentations",
)


def _loader_configs(base: dict):
    "(field, the baseline LoaderConfig, the one with that field changed) for every field of LoaderConfig."
    from course_lib.dataset import LoaderConfig

    assert set(LOADER_VALUES) == {f.name for f in dataclasses.fields(LoaderConfig)}, "a field without a value"
    for name, value in LOADER_VALUES.items():
        other = (
            {**base, name: value}
            if base.get(name) != value
            else {**base, name: LoaderConfig.__dataclass_fields__[name].default}
        )
        yield name, LoaderConfig(**base), LoaderConfig(**other)


def _loaders_run(loader, engine, df, data) -> tuple:
    """What the plain loaders (chapter 02) or the Lightning DataModule (chapter 04) hand the model for
    `loader`: the split, the batching, the first training batch, and how many images were opened to check."""
    from course_lib import dataset
    from course_lib.lightning import MelanomaDataModule

    opened = []
    real = dataset.check_image
    with mock.patch.object(dataset, "check_image", lambda p: opened.append(p) or real(p)):
        if engine == "pytorch":
            train, valid = dataset.make_dataloaders(df, data, loader)
        else:
            dm = MelanomaDataModule(df, data, loader)
            dm.setup("fit")
            train, valid = dm.train_dataloader(), dm.val_dataloader()
    x, _ = next(iter(train))
    shape = (len(train.dataset), len(valid.dataset), train.batch_size, train.num_workers, x.dtype, x.shape)
    return (*shape, round(x.double().sum().item(), 3), len(opened))


@pytest.mark.parametrize("engine", ["pytorch", "lightning"])
def test_the_loaders_use_every_loader_field(engine, sample_dir):
    from course_lib.data import add_folds, read_train_table

    df = add_folds(read_train_table(sample_dir, verbose=False))
    outcome = {
        name: _changed_or_refused(lambda c: _loaders_run(c, engine, df, sample_dir), name, base, changed)
        for name, base, changed in _loader_configs({})
    }
    assert set(outcome.values()) == {"used"}, outcome


@pytest.mark.xla
def test_xla_uses_or_refuses_every_loader_field(sample_dir, tmp_path):
    "On the melanoma task; the replicas normalise in the loader's workers, and take TrainConfig's seed."
    from course_lib.data import add_folds, read_train_table

    df = add_folds(read_train_table(sample_dir, verbose=False))
    flags = dict(task="melanoma", data_dir=str(sample_dir), table=df)
    outcome = {
        name: _changed_or_refused(
            lambda c: _xla_run(TrainConfig(), tmp_path, c, **flags), name, base, changed
        )
        for name, base, changed in _loader_configs(dict(normalize_on_device=False))
    }
    assert {n for n, o in outcome.items() if o == "refused"} == {"seed", "normalize_on_device"}, outcome
