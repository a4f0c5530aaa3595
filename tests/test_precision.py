"Chapter 05: precision is a parameter of one engine, equal across engines (with accumulation, chapter 06)."

import json
import math
import pandas as pd
import pytest
import torch
from conftest import run_main
from course_lib.data import add_folds
from course_lib.pytorch_loop import TrainConfig, WeightedFocalLoss, train_one_epoch
from course_lib.pytorch_loop import create_model
from tiny_nets import batches, small_cnn

CPU = torch.device("cpu")


def test_channels_last_changes_layout_not_results():
    data = batches(2, 4)
    losses = {}
    for cl in (False, True):
        torch.manual_seed(0)
        model = create_model("resnet18")
        if cl:
            model = model.to(memory_format=torch.channels_last)
        losses[cl] = train_one_epoch(
            model,
            data,
            WeightedFocalLoss(),
            torch.optim.SGD(model.parameters(), lr=0.01),
            CPU,
            TrainConfig(channels_last=cl),
        )
        assert model.conv1.weight.is_contiguous(memory_format=torch.channels_last) == cl
    assert abs(losses[True] - losses[False]) < 1e-3 * abs(losses[False]), (
        losses
    )  # other kernels, other rounding


def test_bf16_autocast_trains_and_keeps_fp32_weights():
    data = batches(2, 4)
    torch.manual_seed(0)
    net = small_cnn()
    loss = train_one_epoch(
        net,
        data,
        WeightedFocalLoss(),
        torch.optim.Adam(net.parameters()),
        CPU,
        TrainConfig(precision="bf16-mixed"),
    )
    assert math.isfinite(loss) and all(p.dtype == torch.float32 for p in net.parameters())


def _odd_batch_size(data_dir):
    "A batch size giving an odd number of training batches, so accumulate=2 ends on a partial group."
    n = int((add_folds(pd.read_csv(data_dir / "train.csv"), seed=42).fold != 0).sum())
    return next(b for b in range(10, 30) if math.ceil(n / b) % 2 == 1)


@pytest.mark.slow
@pytest.mark.parametrize(
    "precision, tolerance",
    [("32", 1e-5), pytest.param("bf16-mixed", 1e-3, marks=pytest.mark.deep), ("16-mixed", 1e-3)],
)  # 16-mixed: bf16 on a CPU with bf16 instructions, fp32 without; bf16-mixed (emulated there): deep suite
def test_engines_agree_with_accumulation(sample_dir, tmp_path, capsys, precision, tolerance):
    "course-lib train --precision P --accumulate 2 works for both engines, and they agree per epoch."
    bs = _odd_batch_size(sample_dir)
    runs = {}
    for engine in ("pytorch", "lightning"):
        code, _, err = run_main(
            capsys,
            "train",
            "--data",
            sample_dir,
            "--engine",
            engine,
            "--precision",
            precision,
            "--accumulate",
            2,
            "--epochs",
            2,
            "--arch",
            "resnet18",
            "--img-size",
            32,
            "--batch-size",
            bs,
            "--seed",
            42,
            "--out",
            tmp_path / engine,
        )
        assert code == 0, err[-2000:]
        runs[engine] = json.loads((tmp_path / engine / "metrics.json").read_text())["epochs"]
    assert len(runs["pytorch"]) == len(runs["lightning"]) == 2
    for a, b in zip(runs["pytorch"], runs["lightning"]):
        for k in ("train_loss", "valid_loss", "valid_auc"):
            assert math.isfinite(a[k]) and abs(a[k] - b[k]) < tolerance, (precision, k, a, b)


@pytest.mark.parametrize(
    "capability, expected",
    [((6, 0), "16-mixed"), ((7, 5), "16-mixed"), ((8, 0), "bf16-mixed"), ((9, 0), "bf16-mixed")],
)
def test_gpu_precision_follows_the_compute_capability(monkeypatch, capability, expected):
    """A T4 (7.5) gets fp16 even though PyTorch reports bf16 as supported there (emulated); Ampere (8.0)
    and newer bf16."""
    from course_lib.support.precision import recommended_precision

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert recommended_precision("cuda") == expected


CPU_CHOICE = """
import torch
from course_lib.pytorch_loop import TrainConfig
from course_lib.support.precision import cpu_has_bf16, recommended_precision, resolve_precision
from course_lib.support.trainer import trainer_settings
print(torch.backends.cpu.get_cpu_capability(), cpu_has_bf16(), recommended_precision("cpu"),
      resolve_precision("16-mixed", "cpu"),
      trainer_settings(TrainConfig(precision="16-mixed"), accelerator="cpu")["precision"])
"""


def test_cpu_without_bf16_instructions_trains_in_fp32():
    """ATEN_CPU_CAPABILITY=avx2 makes PyTorch use its AVX2 kernels, as on a CPU without AVX-512 (and so
    without bf16)."""
    import os
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", CPU_CHOICE],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "AVX2 False 32 32 32-true", r.stdout
    assert "notice: 16-mixed is not supported on CPU; using 32" in r.stdout


def test_explicit_bf16_on_a_cpu_without_it_is_kept_with_a_notice(monkeypatch, capsys):
    from course_lib.support import precision

    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    assert precision.resolve_precision("bf16-mixed", "cpu") == "bf16-mixed"
    assert "no bf16 instructions: bf16-mixed is emulated" in capsys.readouterr().out


def test_bf16_compiled_is_refused_in_one_line_on_a_gpu_without_bf16_tensor_cores(monkeypatch):
    """A T4 (compute capability 7.5) runs bf16 eagerly, emulated, but Triton cannot build bf16 kernels for it:
    `--compile --precision bf16-mixed` stops before any work, in one line; an Ampere GPU (8.0) takes it."""
    from torch import nn
    from course_lib.pytorch_loop import fit
    from course_lib.support.errors import CourseLibError
    from course_lib.support.precision import resolve_precision

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    with pytest.raises(CourseLibError, match=r"this Tesla T4 has 7\.5: use --precision 16-mixed") as e:
        resolve_precision("bf16-mixed", "cuda", compile=True)
    assert "\n" not in str(e.value)
    cfg = TrainConfig(precision="bf16-mixed", compile=True, progress=False)
    with pytest.raises(CourseLibError, match="needs bf16 tensor cores"):
        fit(nn.Linear(2, 1), [], [], cfg, device="cuda")  # refused before the model moves
    assert resolve_precision("bf16-mixed", "cuda") == "bf16-mixed", "eager bf16 runs"
    assert resolve_precision("16-mixed", "cuda", compile=True) == "16-mixed"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert resolve_precision("bf16-mixed", "cuda", compile=True) == "bf16-mixed"
