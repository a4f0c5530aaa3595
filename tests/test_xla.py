"""Chapter 08 on XLA:CPU: the torch_xla.launch path, Lightning on XLA, the recompilation check, two real
replicas, the data, warnings."""

import json
import math
import os
import re
import subprocess
import sys
import pytest
import torch
from conftest import REPO, run_cli
from course_lib.data import add_folds, read_train_table
from course_lib.support.sample import make_sample_dataset
from course_lib.support.errors import CourseLibError
from course_lib.tpu import check_no_recompilation, shard_loaders
from course_lib.support.xla import XLA_DEFAULTS, melanoma_task

pytestmark = (
    pytest.mark.xla
)  # torch_xla 2.9 needs torch 2.9: these run in .venv-tpu, Colab's TPU runtime's versions


def xla_check(name, tmp_path, timeout=900, output=False):
    """Run one of tests/xla_checks.py in a fresh process (PJRT_DEVICE=CPU, every warning shown); its JSON
    result."""
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONWARNINGS": "always"}
    r = subprocess.run(
        [sys.executable, str(REPO / "tests" / "xla_checks.py"), name, str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0 and out.exists(), r.stderr[-3000:]
    result = json.loads(out.read_text())
    return (result, r.stdout + r.stderr) if output else result


def rows(counts):
    return [dict(compiles=c) for c in counts]


def test_recompilation_check():
    check_no_recompilation(rows([8, 9, 9, 9]))  # the measured ResNet-18 pattern: one one-off graph in epoch 2
    check_no_recompilation(rows([8, 9]))  # too few epochs to judge
    check_no_recompilation(rows([9, 10, 11, 11]))  # a rare one-off graph after warm-up
    with pytest.raises(CourseLibError, match="recompiled after warm-up"):
        check_no_recompilation(rows([8, 40, 72]))


@pytest.fixture(scope="module")
def train_then_recompile(tmp_path_factory):
    """train_xla on both tasks, then the recompilation counts, in one fresh process (the counts touch the XLA
    device in the parent, which train_xla's fork start leaves untouched): (results, output)."""
    return xla_check("train,recompile", tmp_path_factory.mktemp("xla-train"), output=True)


def test_changing_shapes_recompile_on_xla_cpu(train_then_recompile):
    counts = train_then_recompile[0]["recompile"]["counts"]
    assert counts[0] >= 1 and counts[0] == counts[1] == counts[2], counts  # one shape: compiled once
    assert counts[3] > counts[2] and counts[4] > counts[3] and counts[5] > counts[4], (
        counts
    )  # a new shape each step
    with pytest.raises(CourseLibError):
        check_no_recompilation(rows(counts[2:]), warmup_epochs=1, one_offs=0)  # one step per 'epoch'


@pytest.fixture(scope="module")
def lightning_fit(tmp_path_factory):
    "Chapter 04's module fitted by Lightning on XLA:CPU in fp32 and on the CPU (one process)."
    return xla_check("lightning", tmp_path_factory.mktemp("xla-32"))


@pytest.fixture(scope="module")
def lightning_fits(lightning_fit, tmp_path_factory):
    """lightning_fit, and the module fitted on XLA:CPU in bf16 (another process: torch_xla reads XLA_USE_BF16
    once); returns (fp32 result, bf16 result, bf16 output)."""
    bf16, output = xla_check("lightning_bf16", tmp_path_factory.mktemp("xla-bf16"), output=True)
    return lightning_fit, bf16, output


@pytest.mark.slow
def test_lightning_fits_on_xla_cpu(lightning_fit):
    """Chapter 04's module, seeded the same, fitted by Lightning on XLA:CPU and on the CPU: the first steps
    agree."""
    r = lightning_fit
    cpu = r["cpu"]
    assert r["strategy"] == "SingleDeviceXLAStrategy" and r["devices_seen"] == ["xla:0"], r
    assert (r["precision_plugin"], r["precision"]) == ("XLAPrecision", "32-true"), r
    assert cpu["strategy"] == "SingleDeviceStrategy" and cpu["devices_seen"] == ["cpu"], cpu
    assert all(len(h["history"]["epochs"]) == 2 for h in (r, cpu))
    assert all(math.isfinite(e[k]) for e in r["history"]["epochs"] for k in ("train_loss", "valid_loss"))
    assert r["largest_weight_change"] > 1e-4, "the optimizer stepped on the XLA device"
    x, c = r["step_losses"], cpu["step_losses"]
    assert len(x) == len(c) >= 8
    # Step 0 is the one step both devices compute from the same weights and the same batch, so its loss and
    # its gradient differ only by float32 rounding in another summation order: a dot product of n terms
    # rounds to about sqrt(n) * eps relative (eps = 1.2e-7; n <= 3 * 3 * 16 = 144 in simple-cnn), a few
    # layers add up to well under 1e-5. The bound is 1e-3. Measured with ATen, oneDNN and XLA capped at AVX2:
    # loss 1e-8 relative, gradient norm 7e-7. Later steps are not comparable this way: Adam's first update is
    # lr * g / (|g| + eps), about lr * sign(g), so a weight whose gradient is at rounding level moves by
    # +-lr on either device, in a direction rounding decides.
    assert abs(x[0] - c[0]) / c[0] < 1e-3, (x[0], c[0])
    gx, gc = r["first_grad_norm"], cpu["first_grad_norm"]
    assert gc > 0 and abs(gx - gc) / gc < 1e-3, (gx, gc)


@pytest.mark.slow
@pytest.mark.deep  # a second Lightning fit on XLA:CPU, in bf16: the deeper suite
def test_lightning_fits_on_xla_cpu_in_bf16_true(lightning_fits):
    """fit_lightning(TrainConfig(precision='bf16-mixed')) on an XLA accelerator asks for 'bf16-true', and the
    fit really runs in bf16."""
    _, r, output = lightning_fits
    # what chapter 08 says about it: torch_xla honours XLA_USE_BF16 with a warning; Lightning calls
    # xm.mark_step
    assert (
        "XLA_USE_BF16 will be deprecated" in output and "pytorch_lightning/plugins/precision/xla.py" in output
    )
    assert (r["precision_plugin"], r["precision"], r["strategy"]) == (
        "XLAPrecision",
        "bf16-true",
        "SingleDeviceXLAStrategy",
    )
    assert r["devices_seen"] == ["xla:0"] and r["xla_use_bf16_while_training"] == ["1"], r
    losses, cpu = r["step_losses"], lightning_fits[0]["cpu"]["step_losses"]
    assert len(losses) == len(cpu) >= 8 and all(math.isfinite(x) for x in losses)
    assert r["largest_weight_change"] > 1e-4

    # every loss is a bf16 number, which fp32 losses almost never are (the CPU's are not)
    def as_bf16(x):
        return torch.tensor(x).to(torch.bfloat16).float().item()

    assert all(as_bf16(x) == x for x in losses), losses[:4]
    assert sum(as_bf16(x) == x for x in cpu) <= 1, cpu[:4]
    # the first step, same weights and batch: bf16 rounding (measured 1.3e-2), not fp32's (3e-6 in the test
    # above)
    assert 1e-3 < abs(losses[0] - cpu[0]) / cpu[0] < 0.1, (losses[0], cpu[0])


# Deprecation warnings that every warning shown (PYTHONWARNINGS=always) brings up in Colab's TPU runtime's
# versions, from code neither the course nor torch_xla wrote: Python 3.12+ warns at every fork of a
# multi-threaded process (torch_xla.launch's start_method="fork", which torch_xla documents for
# notebooks), and Colab's matplotlib 3.10.0 calls pyparsing's camelCase names (`oneOf`, `parseString`),
# which pyparsing 3.3 warns about, from its own files and style sheets. Neither is shown with Python's
# default filters.
NOT_OURS = re.compile(r"multiprocessing/popen_fork\.py|site-packages/matplotlib/|PyparsingDeprecationWarning")


@pytest.mark.slow
def test_course_code_prints_no_deprecation_warnings(train_then_recompile, tmp_path):
    """train_xla on both tasks, fp32 and bf16, with every warning shown: none says deprecated; the old
    names do."""
    results, output = train_then_recompile
    runs = results["train"]
    assert set(runs) == {"fashion-32", "fashion-bf16", "melanoma"}
    assert all(len(h["epochs"]) == 2 for h in runs.values())
    said = [line for line in output.splitlines() if "deprecat" in line.lower() and not NOT_OURS.search(line)]
    assert not said, said[:5]
    control_dir = tmp_path / "control"
    control_dir.mkdir()
    _, control = xla_check("old_api", control_dir, output=True)
    assert "DeprecationWarning: Use torch_xla.device instead" in control, control[-2000:]
    assert "DeprecationWarning: Use torch_xla.sync instead" in control, control[-2000:]


def _epoch_images(task, world, rank, epoch, flags):
    "{index: augmented image} for one replica's shard of one epoch, read through the loader _run uses."
    sampler, loader, _ = shard_loaders(
        task, world, rank, flags["batch_size"], flags["num_workers"], flags["seed"]
    )
    sampler.set_epoch(epoch)
    keys = list(sampler)
    images = torch.cat([x for x, _ in loader])
    assert (
        all(e == epoch for e, _ in keys)
        and len(images) == len(keys) // flags["batch_size"] * flags["batch_size"]
    )
    return {i: img for (_, i), img in zip(keys, images)}


def test_melanoma_task_augments_each_epoch_anew_and_repeats_with_the_seed(tmp_path):
    """_run's melanoma loaders hand chapter 02's dataset (epoch, index) keys: new augmentations each epoch,
    the same on a rerun."""
    data = make_sample_dataset(tmp_path / "sample", n=60, img_size=40, seed=2)
    flags = dict(
        XLA_DEFAULTS,
        task="melanoma",
        data_dir=str(data),
        table=add_folds(read_train_table(data, verbose=False), seed=7),  # train_xla reads it once
        arch="simple-cnn",
        img_size=32,
        batch_size=4,
        num_workers=2,
        seed=7,
    )
    task = melanoma_task(flags)
    e0, e1 = (_epoch_images(task, 1, 0, epoch, flags) for epoch in (0, 1))
    both = sorted(set(e0) & set(e1))
    assert len(both) >= 20
    changed = sum(
        not torch.equal(e0[i], e1[i]) for i in both
    )  # a crop position and two flips: rarely all repeat
    assert changed >= 0.8 * len(both), f"only {changed} of {len(both)} images were augmented anew in epoch 1"
    for epoch, images in (
        (0, e0),
        (1, e1),
    ):  # each image depends on its key alone, not on the worker or its position
        assert all(torch.equal(img, task.train[(epoch, i)][0]) for i, img in images.items())
    again = _epoch_images(melanoma_task(flags), 1, 0, 0, flags)  # a new run with the same seed
    assert again.keys() == e0.keys() and all(torch.equal(again[i], e0[i]) for i in e0)
    halves = [_epoch_images(task, 2, rank, 0, flags) for rank in (0, 1)]  # two replicas: disjoint shards
    assert not set(halves[0]) & set(halves[1])
    assert all(torch.equal(img, e0[i]) for h in halves for i, img in h.items() if i in e0), (
        "replica-independent"
    )


def test_xla_device_type_lets_torch_xla_choose_the_device():
    """Without PJRT_DEVICE, the course leaves the choice to torch_xla, which finds no TPU here and picks the
    CPU; require_xla alone does not import torch_xla (so a command-line check fails in one line)."""
    env = {k: v for k, v in os.environ.items() if k != "PJRT_DEVICE"}
    code = (
        "import os, sys; from course_lib.support.xla import require_xla, xla_device_type; require_xla(); "
        "assert 'torch_xla' not in sys.modules; print(xla_device_type(), os.environ['PJRT_DEVICE'])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["CPU", "CPU"], r.stdout + r.stderr[-2000:]
    assert "Defaulting to PJRT_DEVICE=CPU" in r.stderr  # torch_xla's own choice, announced


@pytest.mark.slow
def test_two_xla_replicas_match_one_with_the_global_batch(tmp_path):
    """_run in 2 gloo-joined XLA:CPU processes (batch 16 each) vs 1 process (batch 32): same weights and
    metrics."""
    r = xla_check("replicas", tmp_path)
    assert r["largest_weight"] > 0.01 and r["max_weight_diff"] < 1e-5, (
        r["max_weight_diff"],
        r["largest_weight"],
    )
    h1, h2 = r["history_1"]["epochs"][0], r["history_2"]["epochs"][0]
    assert (h1["replicas"], h2["replicas"]) == (1, 2)
    for k in ("train_loss", "valid_loss", "valid_accuracy"):
        assert abs(h1[k] - h2[k]) < 1e-5, (k, h1, h2)


@pytest.mark.slow
def test_cli_xla_engine_writes_the_common_metrics(offline_run):
    xla_run = offline_run("xla")
    m = json.loads((xla_run / "metrics.json").read_text())
    assert m["engine"] == "xla" and len(m["epochs"]) == 3 and 0 <= m["best_valid_auc"] <= 1
    for row in m["epochs"]:
        assert {"epoch", "train_loss", "valid_loss", "valid_auc", "seconds"} <= set(row) and row[
            "replicas"
        ] == 1
    check_no_recompilation(m["epochs"])
    from course_lib.pytorch_loop import load_checkpoint
    from course_lib.pytorch_loop import create_model

    ckpt = load_checkpoint(xla_run / "checkpoints" / "last.pt")  # weights_only=True
    assert ckpt["epoch"] == 2 and ckpt["arch"] == "simple-cnn"
    create_model("simple-cnn", pretrained=False, num_classes=1).load_state_dict(ckpt["model"])
    from course_lib.predict import load_model

    _, info = load_model(xla_run / "checkpoints" / "last.pt")  # chapter 10 reads it too
    assert info["arch"] == "simple-cnn" and info["img_size"] is not None, info


def test_cli_xla_refuses_fp16(tmp_path):
    r = run_cli("train", "--engine", "xla", "--precision", "16-mixed", "--out", tmp_path / "o", timeout=120)
    assert r.returncode == 1 and "--engine xla supports --precision 32 or bf16-mixed" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
