"Chapter 09: W&B tracking never prompts, falls back offline, and loses nothing (read back from run-*.wandb)."

import json
import math
import os
from pathlib import Path
import pytest
from course_lib.support.errors import CourseLibError
from course_lib.support import offline_runs, wandb_mode
from course_lib.support.offline_runs import read_offline_run
from course_lib.experiment_tracking import Tracker, run_folder
from course_lib.support.wandb_mode import resolve_mode


@pytest.fixture
def no_key(monkeypatch, tmp_path):
    "No W&B key anywhere: no env var, an empty home (no ~/.netrc), not in Colab."
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(tmp_path / ".netrc"))


def test_modes_without_a_key_or_network(no_key, monkeypatch):
    assert resolve_mode("disabled") == ("disabled", None)
    assert resolve_mode("offline") == ("offline", None)
    assert resolve_mode() == ("offline", "no W&B key found (WANDB_API_KEY, Colab secret or `wandb login`)")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setattr(wandb_mode, "_reachable", lambda *a, **k: False)
    assert resolve_mode("online") == ("offline", "the W&B server cannot be reached")
    with pytest.raises(CourseLibError, match="--wandb must be one of"):
        resolve_mode("sometimes")


def test_offline_run_reads_back_every_step_across_blocks(no_key, tmp_path, capsys):
    "2,000 logged steps (a log far larger than one 32 KiB block), config and an artifact, all read back."
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(b"weights" * 1000)
    with Tracker(
        "course-lib-tests", {"lr": 0.001, "arch": "resnet18"}, save_dir=tmp_path, name="blocks"
    ) as t:
        for step in range(2000):
            t.on_step(step, {"train_loss_running": 1.0 / (step + 1), "epoch": step // 1000})
        t.on_epoch_end({"epoch": 1, "valid_auc": 0.75, "train_loss": 0.5}, ckpt, step=2000)
        folder = run_folder(t)
    assert "recording offline" in capsys.readouterr().out, "one line says where the run is"
    assert sum(p.stat().st_size for p in folder.glob("run-*.wandb")) > 64 * 1024
    run = read_offline_run(folder)
    assert (
        run["config"]["lr"] == 0.001
        and run["config"]["arch"] == "resnet18"
        and run["run"]["name"] == "blocks"
    )
    steps = {h["_step"]: h for h in run["history"]}
    assert all(abs(steps[s]["train_loss_running"] - 1.0 / (s + 1)) < 1e-12 for s in range(2000))
    assert steps[2000]["valid_auc"] == 0.75
    (art,) = run["artifacts"]
    assert (
        art["type"] == "model"
        and {"epoch-1", "best", "latest"} <= set(art["aliases"])
        and "model.pt" in art["files"]
    )


def test_tracker_finishes_the_run_when_training_raises(no_key, tmp_path):
    with pytest.raises(RuntimeError):
        with Tracker("course-lib-tests", {"lr": 1}, save_dir=tmp_path, name="crash") as t:
            folder = run_folder(t)
            t.on_step(1, {"loss": 1.0})
            raise RuntimeError("boom")
    assert t.run is None
    records = offline_runs.finished_records(next(folder.glob("run-*.wandb")))
    exits = [r.exit for r in records if r.WhichOneof("record_type") == "exit"]
    assert exits and exits[-1].exit_code == 1


def test_a_damaged_or_unfinished_log_is_an_error_not_missing_steps(no_key, tmp_path):
    "A flipped byte fails the CRC check; a log without its exit record is refused after the timeout."
    with Tracker("course-lib-tests", {"lr": 1}, save_dir=tmp_path, name="damaged") as t:
        for step in range(50):
            t.on_step(step, {"loss": float(step)})
        folder = run_folder(t)
    log = next(folder.glob("run-*.wandb"))
    records = offline_runs.finished_records(log)
    assert sorted(h["_step"] for h in read_offline_run(folder)["history"]) == list(range(50))
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / log.name).write_bytes(bytes(data))
    with pytest.raises(CourseLibError, match="bad CRC in the chunk at byte"):
        read_offline_run(tmp_path / "bad")
    exit_at = max(i for i, r in enumerate(records) if r.WhichOneof("record_type") == "exit")
    cut = log.read_bytes()[
        : len(log.read_bytes()) - records[exit_at].ByteSize() - 7
    ]  # drop the last chunk (the exit record)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / log.name).write_bytes(cut)
    with pytest.raises(CourseLibError, match="has no exit record after 0.5 s"):
        read_offline_run(tmp_path / "cut", timeout=0.5)


def test_disabled_writes_nothing(tmp_path):
    with Tracker("course-lib-tests", {}, mode="disabled", save_dir=tmp_path) as t:
        t.on_step(1, {"x": 1.0})
        t.on_epoch_end({"epoch": 0, "valid_auc": 0.5})
    assert run_folder(t) is None and not (tmp_path / "wandb").exists()


def _read_back(out):
    folders = [p.parent for p in (out / "wandb").glob("*run-*/run-*.wandb")]
    assert len(folders) == 1, folders
    return read_offline_run(folders[0])


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["pytorch", "lightning", pytest.param("xla", marks=pytest.mark.xla)])
def test_every_engine_logs_offline_and_nothing_is_lost(engine, offline_run):
    """course-lib train --wandb offline (no key, no stdin): config, every epoch's metrics and the model
    artifacts are in the log. The runs are shared (conftest.offline_run)."""
    arch = "simple-cnn" if engine == "xla" else "resnet18"  # the logging is the subject, not the network
    out = offline_run(engine)
    metrics = json.loads((out / "metrics.json").read_text())
    run = _read_back(out)
    assert (
        run["config"]["lr"] == 0.001 and run["config"]["engine"] == engine and run["config"]["arch"] == arch
    )
    by_epoch = {}  # Lightning logs train and validation metrics in separate rows of the same epoch
    for h in run["history"]:
        if "epoch" in h and ("valid_auc" in h or "train_loss" in h):
            by_epoch.setdefault(int(h["epoch"]), {}).update(h)
    assert sorted(by_epoch) == [r["epoch"] for r in metrics["epochs"]] == [0, 1, 2], by_epoch
    for row in metrics["epochs"]:
        h = by_epoch[row["epoch"]]
        for k in ("valid_auc", "valid_loss", "train_loss"):
            assert math.isclose(row[k], h[k], rel_tol=1e-6, abs_tol=1e-9), (engine, k, row[k], h[k])
    models = [a for a in run["artifacts"] if a["type"] == "model"]
    assert len(models) >= 2 and all(a["files"] for a in models), run["artifacts"]
    staged = Path(os.environ["WANDB_DATA_DIR"]) / "artifacts" / "staging"
    assert any(staged.iterdir()), "the artifacts are staged in WANDB_DATA_DIR, not under the home folder"
    if engine == "pytorch":  # step metrics every 25 steps (32 steps per epoch at batch 3, 3 epochs)
        running = [h for h in run["history"] if "train_loss_running" in h]
        assert len(running) == 3 and all(h["train_loss_running"] > 0 for h in running)
        assert {a2 for a in models for a2 in a["aliases"]} >= {"epoch-0", "epoch-2", "best", "latest"}


@pytest.fixture
def colab_secret(monkeypatch):
    "Colab's `google.colab.userdata` with a secret WANDB_API_KEY (the module only exists inside Colab)."
    import sys
    import types
    import google  # the namespace package that protobuf lives in; Colab adds `google.colab` to it

    secret = "c0lab" * 8
    colab = types.ModuleType("google.colab")
    colab.userdata = types.SimpleNamespace(get=lambda name: secret if name == "WANDB_API_KEY" else None)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(google, "colab", colab, raising=False)
    return secret


@pytest.fixture
def rejecting_server(monkeypatch):
    "A W&B server on 127.0.0.1 that answers 401 to every key, as api.wandb.ai does to a revoked one."
    from wandb_fake_server import RejectingServer

    server = RejectingServer()
    monkeypatch.setenv("WANDB_BASE_URL", server.url)
    yield server
    server.close()


def test_colab_secret_reaches_wandb_and_a_rejected_key_falls_back_offline(
    no_key, colab_secret, rejecting_server, tmp_path, capsys
):
    mode, why = resolve_mode("online")
    assert rejecting_server.keys == [colab_secret], "the server saw the Colab secret: it was handed to wandb"
    assert mode == "offline" and why.startswith("W&B did not accept the key (AuthenticationError"), why
    with Tracker("course-lib-tests", {"lr": 0.1}, mode="online", save_dir=tmp_path, name="rejected") as t:
        t.on_epoch_end({"epoch": 0, "valid_auc": 0.5, "train_loss": 1.0}, step=1)
        folder = run_folder(t)
    line = capsys.readouterr().out
    assert "wandb: W&B did not accept the key" in line and "recording offline" in line, line
    assert read_offline_run(folder)["config"]["lr"] == 0.1, "training went on and was recorded offline"


def test_wandb_mode_from_the_environment(no_key, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "")
    assert wandb_mode.env_mode() is None and "WANDB_MODE" not in os.environ, "empty counts as unset"
    monkeypatch.setenv("WANDB_MODE", "dryrun")
    assert wandb_mode.env_mode() == "offline" and resolve_mode() == ("offline", None)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert resolve_mode() == ("disabled", None)
    monkeypatch.setenv("WANDB_MODE", "sometimes")
    with pytest.raises(CourseLibError, match="WANDB_MODE='sometimes' is not a W&B mode"):
        resolve_mode()


WITHOUT_WANDB = """
import sys
sys.modules["wandb"] = None  # as where the optional extra is not installed: `import wandb` raises ImportError
from course_lib.support.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("engine", ["pytorch", "lightning", pytest.param("xla", marks=pytest.mark.xla)])
def test_every_engine_trains_with_wandb_disabled_where_wandb_is_not_installed(engine, sample_dir, tmp_path):
    "W&B is an optional extra: with --wandb disabled no engine imports it."
    import subprocess
    import sys

    args = ["train", "--engine", engine, "--data", sample_dir, "--arch", "simple-cnn", "--img-size", 32]
    args += ["--epochs", 1, "--batch-size", 16, "--wandb", "disabled", "--out", tmp_path / "run"]
    r = subprocess.run(
        [sys.executable, "-c", WITHOUT_WANDB, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    epochs = json.loads((tmp_path / "run" / "metrics.json").read_text())["epochs"]
    assert len(epochs) == 1 and math.isfinite(epochs[0]["train_loss"]), epochs
