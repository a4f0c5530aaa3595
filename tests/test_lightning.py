"Chapter 04 scale-out: Lightning DDP with 2 CPU processes (gloo) matches one process on the same global batch."
import subprocess, sys
import pytest
import torch
from conftest import REPO

TOLERANCE = 1e-4  # max |difference| of any weight after 8 steps; only the order of float reductions differs


@pytest.mark.slow
def test_ddp_two_processes_match_one(tmp_path):
    for mode in ("single", "ddp"):
        r = subprocess.run([sys.executable, str(REPO / "tests" / "ddp_check.py"), mode, str(tmp_path / f"{mode}.pt")],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr[-3000:]
    single, ddp = (torch.load(tmp_path / f"{m}.pt", weights_only=True) for m in ("single", "ddp"))
    assert (single["world_size"], ddp["world_size"]) == (1, 2)
    assert single["steps"] == ddp["steps"] == 8, "same number of optimizer steps: 64 images / global batch 16, 2 epochs"
    trained = [k for k, v in single["weights"].items() if v.is_floating_point()]
    moved = max((single["weights"][k] - ddp["weights"][k]).abs().max().item() for k in trained)
    assert moved < TOLERANCE, f"DDP and one process differ by {moved}"
    trained_by = max((single["weights"][k] - single["init"][k]).abs().max().item() for k in trained)
    assert trained_by > 10 * TOLERANCE, f"the weights moved by only {trained_by}: nothing was compared"
