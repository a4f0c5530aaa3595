"""Kill a training run with SIGKILL mid-epoch, resume it, and end exactly where an uninterrupted run ends
(CPU, fp32)."""

import json
import signal
import subprocess
import time
import pytest
import torch
from conftest import BIN, OFFLINE_RUN, REPO, run_cli, run_main
from course_lib.pytorch_loop import load_checkpoint

ARGS = OFFLINE_RUN  # the shared offline run's settings: it is the uninterrupted run
LAST = {"pytorch": "last.pt", "lightning": "last.ckpt"}


def _weights(path, engine):
    ckpt = (
        load_checkpoint(path)
        if engine == "pytorch"
        else torch.load(path, map_location="cpu", weights_only=False)
    )
    state = (
        ckpt["model"]
        if engine == "pytorch"
        else {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items()}
    )
    return state, ckpt["epoch"]


def _kill_during_second_epoch(engine, data, out):
    "Start training; SIGKILL it once the first epoch's checkpoint exists and the second epoch is under way."
    cmd = [
        str(BIN / "course-lib"),
        "train",
        "--engine",
        engine,
        "--data",
        str(data),
        *map(str, ARGS),
        "--out",
        str(out),
    ]
    p = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=REPO
    )
    last, deadline = out / "checkpoints" / LAST[engine], time.time() + 600
    while not last.exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # into the second epoch
    p.send_signal(signal.SIGKILL)
    p.wait()
    return p.returncode


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["pytorch", "lightning"])
def test_sigkill_then_resume_matches_an_uninterrupted_run(engine, sample_dir, tmp_path, offline_run, capsys):
    """The uninterrupted run is the shared offline one (W&B logging changes nothing in the training); the
    killed run is a process of its own, the resumed one runs in this process."""
    full, cut = offline_run(engine), tmp_path / "cut"
    assert _kill_during_second_epoch(engine, sample_dir, cut) == -signal.SIGKILL
    _, epoch_at_kill = _weights(cut / "checkpoints" / LAST[engine], engine)
    assert not (cut / "metrics.json").exists() and epoch_at_kill < 2, "killed before the run finished"
    code, out, err = run_main(
        capsys, "train", "--engine", engine, "--data", sample_dir, *ARGS, "--out", cut, "--resume"
    )
    assert code == 0 and "resuming" in out + err, err[-2000:]
    a, b = (json.loads((d / "metrics.json").read_text())["epochs"] for d in (full, cut))
    assert [x["epoch"] for x in b] == [0, 1, 2]
    for x, y in zip(a, b):
        for k in ("train_loss", "valid_loss", "valid_auc"):
            assert x[k] == y[k], (engine, k, x, y)
    wa, ea = _weights(full / "checkpoints" / LAST[engine], engine)
    wb, eb = _weights(cut / "checkpoints" / LAST[engine], engine)
    # the last checkpoint is the last epoch's, also after epochs whose AUC was not the best
    assert ea == eb == 2, (engine, ea, eb)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa), "final weights identical"


def test_damaged_checkpoint_is_one_clear_line(sample_dir, tmp_path):
    (tmp_path / "o" / "checkpoints").mkdir(parents=True)
    (tmp_path / "o" / "checkpoints" / "last.pt").write_bytes(b"PK\x03\x04 truncated")
    r = run_cli(
        "train",
        "--data",
        sample_dir,
        "--epochs",
        1,
        "--img-size",
        32,
        "--out",
        tmp_path / "o",
        "--resume",
        timeout=300,
    )
    assert (
        r.returncode == 1
        and "is damaged or not a course_lib checkpoint" in r.stderr
        and len(r.stderr.strip().splitlines()) == 1
    ), r.stderr
