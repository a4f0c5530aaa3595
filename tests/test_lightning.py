"Chapter 04 scale-out: Lightning DDP with 2 CPU processes (gloo) matches one process on one global batch."

import subprocess
import sys
import pytest
import torch
from conftest import REPO

TOLERANCE = 1e-4  # max |difference| of any weight after 8 steps; only the order of float reductions differs


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory):
    """tests/ddp_check.py run once in this process (one device) and once in two (DDP, started as a script, as
    Lightning's launcher re-runs it for the second process); the two results, loaded."""
    import ddp_check

    tmp = tmp_path_factory.mktemp("ddp")
    ddp_check.main("single", str(tmp / "single.pt"))
    r = subprocess.run(
        [sys.executable, str(REPO / "tests" / "ddp_check.py"), "ddp", str(tmp / "ddp.pt")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return tuple(torch.load(tmp / f"{m}.pt", weights_only=True) for m in ("single", "ddp"))


@pytest.mark.slow
def test_ddp_two_processes_match_one(ddp_runs):
    single, ddp = ddp_runs
    assert (single["world_size"], ddp["world_size"]) == (1, 2)
    assert single["steps"] == ddp["steps"] == 8, (
        "same number of optimizer steps: 64 images / global batch 16, 2 epochs"
    )
    trained = [k for k, v in single["weights"].items() if v.is_floating_point()]
    moved = max((single["weights"][k] - ddp["weights"][k]).abs().max().item() for k in trained)
    assert moved < TOLERANCE, f"DDP and one process differ by {moved}"
    trained_by = max((single["weights"][k] - single["init"][k]).abs().max().item() for k in trained)
    assert trained_by > 10 * TOLERANCE, f"the weights moved by only {trained_by}: nothing was compared"


@pytest.mark.slow
def test_ddp_auc_is_gathered_from_every_process(ddp_runs):
    "With 2 processes the logged AUC is the AUC of the whole validation set, not of one process's half."
    ddp = ddp_runs[1]
    assert abs(ddp["rank0_half_auc"] - ddp["whole_auc"]) > 1e-3, "the data must tell a half from the whole"
    assert abs(ddp["logged_auc"] - ddp["whole_auc"]) < 1e-6, ddp


def test_fit_lightning_uses_one_device_unless_asked(tmp_path):
    "Kaggle's 'GPU T4 x2': devices='auto' would start DDP from a script; the course asks for one device."
    from course_lib.pytorch_loop import TrainConfig
    from course_lib.support.trainer import trainer_settings

    settings = trainer_settings(TrainConfig(epochs=2, checkpoint_dir=tmp_path))
    assert settings["devices"] == 1 and settings["accelerator"] == "auto"
    assert trainer_settings(devices=2)["devices"] == 2


@pytest.mark.slow
def test_cli_ddp_writes_metrics_once(sample_dir, tmp_path):
    """course-lib train --engine lightning --devices 2: two processes train, the first one alone writes and
    reports."""
    from conftest import run_cli
    import json

    r = run_cli(
        "train",
        "--data",
        sample_dir,
        "--engine",
        "lightning",
        "--devices",
        "2",
        "--arch",
        "resnet18",
        "--epochs",
        "1",
        "--img-size",
        "32",
        "--batch-size",
        "8",
        "--out",
        tmp_path / "out",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("best valid AUC") == 1, r.stdout[-2000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["engine"] == "lightning" and len(metrics["epochs"]) == 1


def test_ddp_passes_the_epoch_to_chapter_02s_sampler():
    """Under DDP Lightning wraps the course's sampler; the floor (pytorch-lightning 2.6.1) forwards
    set_epoch to it."""
    from lightning_fabric.utilities.distributed import DistributedSamplerWrapper
    from course_lib.dataset import EpochShuffleSampler

    inner = EpochShuffleSampler(40, seed=3)
    wrapped = DistributedSamplerWrapper(inner, num_replicas=2, rank=0, shuffle=False)
    first = list(wrapped)
    wrapped.set_epoch(1)
    assert inner.epoch == 1, "the wrapped sampler saw the new epoch"
    second = list(wrapped)
    assert {e for e, _ in second} == {1} and [i for _, i in first] != [i for _, i in second], (
        "a new order each epoch"
    )


def test_bf16_mixed_on_tpu_becomes_bf16_true_with_one_line(capsys):
    "Lightning's XLA plugin has no bf16-mixed: the switch to bf16 weights is said, not silent."
    from course_lib.support.precision import lightning_precision

    assert lightning_precision("bf16-mixed", accelerator="tpu") == "bf16-true"
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("notice: on TPU Lightning has no bf16-mixed; using bf16-true")
    assert lightning_precision("32", accelerator="tpu") == "32-true" and not capsys.readouterr().out
