"Chapter 07 on XLA:CPU: xmp.spawn path, Lightning on XLA, recompilation check, two real replicas."
import json, math, subprocess, sys
import pytest
from conftest import REPO, run_cli
from course_lib.data import CourseLibError
from course_lib.xla import check_no_recompilation


def xla_check(name, tmp_path, timeout=900):
    "Run one of tests/xla_checks.py in a fresh process (PJRT_DEVICE=CPU); returns its JSON result."
    out = tmp_path / f"{name}.json"
    r = subprocess.run([sys.executable, str(REPO / "tests" / "xla_checks.py"), name, str(out)], capture_output=True, text=True,
                       timeout=timeout, env={**__import__("os").environ, "PJRT_DEVICE": "CPU"}, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and out.exists(), r.stderr[-3000:]
    return json.loads(out.read_text())


def rows(counts): return [dict(compiles=c) for c in counts]


def test_recompilation_check():
    check_no_recompilation(rows([8, 9, 9, 9]))  # the measured ResNet-18 pattern: one one-off graph in epoch 2
    check_no_recompilation(rows([8, 9]))        # too few epochs to judge
    with pytest.raises(CourseLibError, match="recompiled after warm-up"):
        check_no_recompilation(rows([8, 40, 72]))


def test_changing_shapes_recompile_on_xla_cpu(tmp_path):
    counts = xla_check("recompile", tmp_path)["counts"]
    assert counts[0] >= 1 and counts[0] == counts[1] == counts[2], counts          # one shape: compiled once
    assert counts[3] > counts[2] and counts[4] > counts[3] and counts[5] > counts[4], counts  # a new shape each step
    with pytest.raises(CourseLibError):
        check_no_recompilation(rows(counts[2:]), warmup_epochs=1)


@pytest.mark.slow
def test_lightning_fits_on_xla_cpu(tmp_path):
    "Chapter 04's module, seeded the same, fitted by Lightning on XLA:CPU and on the CPU: the first steps agree."
    r = xla_check("lightning", tmp_path)
    cpu = r["cpu"]
    assert r["strategy"] == "SingleDeviceXLAStrategy" and r["devices_seen"] == ["xla:0"], r
    assert cpu["strategy"] == "SingleDeviceStrategy" and cpu["devices_seen"] == ["cpu"], cpu
    assert all(len(h["history"]["epochs"]) == 2 for h in (r, cpu))
    assert all(math.isfinite(e[k]) for e in r["history"]["epochs"] for k in ("train_loss", "valid_loss"))
    assert r["largest_weight_change"] > 1e-4, "the optimizer stepped on the XLA device"
    x, c = r["step_losses"], cpu["step_losses"]
    assert len(x) == len(c) >= 8
    # step 0: same weights and batch (measured 3e-6 relative); step 1: after one Adam step on each device (6e-5).
    # Later steps drift apart: Adam's first steps scale each gradient to ~lr, so float-rounding differences grow.
    assert abs(x[0] - c[0]) / c[0] < 1e-4 and abs(x[1] - c[1]) / c[1] < 1e-3, (x[:2], c[:2])


@pytest.mark.slow
def test_two_xla_replicas_match_one_with_the_global_batch(tmp_path):
    "_run in 2 gloo-joined XLA:CPU processes (batch 16 each) vs 1 process (batch 32): same weights and metrics."
    r = xla_check("replicas", tmp_path)
    assert r["largest_weight"] > 0.01 and r["max_weight_diff"] < 1e-5, (r["max_weight_diff"], r["largest_weight"])
    h1, h2 = r["history_1"]["epochs"][0], r["history_2"]["epochs"][0]
    assert (h1["replicas"], h2["replicas"]) == (1, 2)
    for k in ("train_loss", "valid_loss", "valid_accuracy"):
        assert abs(h1[k] - h2[k]) < 1e-5, (k, h1, h2)


@pytest.mark.slow
def test_cli_xla_engine_writes_the_common_metrics(sample_dir, tmp_path):
    r = run_cli("train", "--engine", "xla", "--data", sample_dir, "--arch", "resnet18", "--img-size", 32, "--batch-size", 16,
                "--epochs", 3, "--out", tmp_path / "xla", env={"PJRT_DEVICE": "CPU"}, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "xla" / "metrics.json").read_text())
    assert m["engine"] == "xla" and len(m["epochs"]) == 3 and 0 <= m["best_valid_auc"] <= 1
    for row in m["epochs"]:
        assert {"epoch", "train_loss", "valid_loss", "valid_auc", "seconds"} <= set(row) and row["replicas"] == 1
    check_no_recompilation(m["epochs"])
    assert (tmp_path / "xla" / "checkpoints" / "last" / "model.pt").exists()


def test_cli_xla_refuses_fp16(tmp_path):
    r = run_cli("train", "--engine", "xla", "--precision", "16-mixed", "--out", tmp_path / "o", timeout=120)
    assert r.returncode == 1 and "--engine xla supports --precision 32 or bf16-mixed" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
