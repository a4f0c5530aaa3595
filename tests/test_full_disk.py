"""A full disk, a used-up quota or a file size limit is one line that names the file, the space it needed
and what to do, and the checkpoint that was there stays as it was. The limit is real: a file size limit
(RLIMIT_FSIZE) on the writing process, and a 64 KiB tmpfs mounted in a user namespace for the command line."""

import shutil
import subprocess
import sys

import pytest
from conftest import BIN

SAVE = """
import resource, signal, sys, torch
from course_lib.pytorch_loop import load_checkpoint, save_checkpoint
from course_lib.support.errors import CourseLibError

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
path = sys.argv[1]
save_checkpoint(path, model={"w": torch.zeros(10)}, epoch=0)
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))
try:
    save_checkpoint(path, model={"w": torch.zeros(1_000_000)}, epoch=1)
except CourseLibError as e:
    print(e)
print("epoch on disk:", load_checkpoint(path)["epoch"])
"""


def test_a_checkpoint_that_does_not_fit_is_one_line_and_the_old_one_stays(tmp_path):
    best = tmp_path / "checkpoints" / "best.pt"
    r = subprocess.run([sys.executable, "-c", SAVE, str(best)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    line, kept = r.stdout.strip().splitlines()
    assert line.startswith(f"no space left to write {best} (about 3.8 MB needed, "), line
    assert "best.pt is as it was): free some space, or choose a folder on another disk" in line, line
    assert kept == "epoch on disk: 0", "the previous checkpoint is untouched"
    assert sorted(p.name for p in best.parent.iterdir()) == ["best.pt"], "no temporary file is left"


def _small_disk_works() -> bool:
    "Whether this machine lets a user namespace mount a tmpfs (Linux with unprivileged user namespaces)."
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, timeout=30)
    return r.returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["pytorch", "lightning"])
def test_training_into_a_full_disk_is_one_line(engine, sample_dir, tmp_path):
    if not _small_disk_works():
        pytest.skip("this machine does not let a user namespace mount a small disk")
    disk = tmp_path / "small"
    disk.mkdir()
    train = [str(BIN / "course-lib"), "train", "--engine", engine, "--data", str(sample_dir), "--arch"]
    train += ["simple-cnn", "--no-pretrained", "--epochs", "1", "--img-size", "32", "--batch-size", "16"]
    train += ["--wandb", "disabled", "--out", str(disk / "run")]
    script = f"mount -t tmpfs -o size=64k tmpfs {disk} && exec {' '.join(train)}"
    r = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("course-lib: error: no space left to write "), r.stderr[-3000:]
    assert "free some space, or choose a folder on another disk" in last
    assert str(disk / "run" / "checkpoints") in last, "it names where the checkpoint was going"
