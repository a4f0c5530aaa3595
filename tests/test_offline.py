"""Offline means offline: training with W&B offline opens no connection, even with a W&B key in ~/.netrc;
every proxy variable points at a local listener that counts what reaches it."""

import os
import socket
import subprocess
import sys
import threading
import pytest
from conftest import BIN, REPO

TRAIN = ["--arch", "resnet18", "--img-size", "32", "--epochs", "1", "--batch-size", "16"]


@pytest.fixture
def listener():
    "A TCP listener on localhost that accepts and counts connections; yields (proxy URL, accepted list)."
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    accepted, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn.recv(200))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    thread.join()
    server.close()


def _env(proxy, home, **extra):
    """This environment with every proxy variable pointing at `proxy`, HOME at `home`, and no W&B or
    albumentations opt-outs."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_ALBUMENTATIONS_UPDATE", "WANDB_MODE", "NO_PROXY", "no_proxy")
    }
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[k] = proxy
    return {**env, "HOME": str(home), "WANDB_API_KEY": "", **extra}


def _run(args, env, cwd):
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )


def test_the_listener_sees_albumentations_version_check(listener, tmp_path):
    "The control: with the opt-out turned off, importing albumentations asks PyPI, through the proxy."
    proxy, accepted = listener
    r = _run(
        [sys.executable, "-c", "import albumentations, time; time.sleep(3)"],
        _env(proxy, tmp_path, NO_ALBUMENTATIONS_UPDATE="0"),
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert accepted, "the listener saw nothing: it could not tell an offline run from an online one"


def test_training_with_wandb_offline_opens_no_connection(listener, sample_dir, tmp_path):
    """No connection, even with a W&B key in ~/.netrc; W&B's staging copies stay in the run's folder, not
    under the home folder; the recorded config holds no local path."""
    from course_lib.support.offline_runs import read_offline_run

    proxy, accepted = listener
    (tmp_path / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password " + "0" * 40 + "\n")
    (tmp_path / ".netrc").chmod(0o600)
    env = _env(proxy, tmp_path)
    env.pop("WANDB_DATA_DIR", None)  # the default: what a learner's shell has
    out = tmp_path / "out"
    cmd = [
        str(BIN / "course-lib"),
        "train",
        "--data",
        str(sample_dir),
        *TRAIN,
        "--wandb",
        "offline",
        "--out",
        str(out),
    ]
    r = _run(cmd, env, REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "metrics.json").exists()
    assert not accepted, f"{len(accepted)} connection(s) reached the proxy: {accepted[:3]}"
    staged = [p for p in tmp_path.rglob("staging") if not p.is_relative_to(out)]  # ~/.cache/wandb: its log
    assert not staged, f"W&B copied checkpoints under the home folder: {staged[:3]}"
    copies = [p for p in (out / "wandb-data" / "artifacts" / "staging").rglob("*") if p.is_file()]
    assert copies, "the staging copies are in the run's folder"
    (run,) = (out / "wandb").glob("offline-run-*")
    config = read_offline_run(run)["config"]
    assert config["data"] == sample_dir.name and config["out"] == "out", config
    assert not [k for k, v in config.items() if isinstance(v, str) and v.startswith("/")], config
