"bench/ scripts run end to end on a tiny setting and write the results they promise (no timing is asserted)."

import json
import subprocess
import sys
import pytest
from conftest import REPO


def bench(script, *args, timeout=600):
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_bench_refuses_unknown_labels_and_in_process_on_cpu(tmp_path):
    r = bench("bench.py", "--device", "cpu", "--only", "fp8", "--out", tmp_path)
    assert r.returncode == 2 and "--only: unknown label(s) ['fp8']" in r.stderr
    r = bench("bench.py", "--device", "cpu", "--in-process", "--out", tmp_path)
    assert r.returncode == 2 and "--in-process needs --device cuda" in r.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_bench_writes_every_loop_and_the_ratios(tmp_path):
    r = bench(
        "bench.py",
        "--device",
        "cpu",
        "--arch",
        "resnet18",
        "--img-size",
        32,
        "--batch-size",
        4,
        "--steps",
        2,
        "--warmup",
        1,
        "--rounds",
        1,
        "--only",
        "32",
        "32, accumulate 2",
        "--out",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "cpu_resnet18_32px_b4.json").read_text())
    assert [row["config"] for row in res["rows"]] == ["32", "32, accumulate 2"]
    for row in res["rows"]:
        for loop in ("reference", "engine", "lightning"):
            assert row[f"{loop}_images_per_second"] > 0 and row[f"{loop}_peak_memory_mb"] > 0
        assert row["engine_ratio"] == round(
            row["engine_images_per_second"] / row["reference_images_per_second"], 3
        )
    assert res["rows"][0]["speedup_vs_fp32"] == 1.0 and res["machine"]["torch"]
    assert "| 32, accumulate 2 |" in (tmp_path / "cpu_resnet18_32px_b4.md").read_text()


@pytest.mark.slow
def test_epoch_bench_generates_the_sample_set_and_times_both_pipelines(tmp_path):
    r = bench(
        "epoch.py",
        "--device",
        "cpu",
        "--n",
        24,
        "--file-size",
        64,
        "--img-size",
        32,
        "--batch-size",
        8,
        "--workers",
        2,
        "--arch",
        "resnet18",
        "--cache",
        tmp_path / "data",
        "--out",
        tmp_path / "res",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "res" / "epoch_cpu_resnet18_32px_b8_n24.json").read_text())
    for k in (
        "decode_minimal_images_per_second",
        "decode_course_images_per_second",
        "decode_course_uint8_images_per_second",
        "ceiling_images_per_second",
        "epoch_minimal_images_per_second",
        "epoch_course_images_per_second",
        "epoch_course_uint8_images_per_second",
    ):
        assert res[k] > 0, k
    assert 0 < res["epoch_course_vs_ceiling"] and res["images"] == 24
    from course_lib.data import (
        make_sample_dataset,
    )  # the parallel generator writes make_sample_dataset's images

    ref = make_sample_dataset(tmp_path / "ref", n=24, img_size=64, seed=0)
    gen = tmp_path / "data" / "n24_64px"
    assert (gen / "train.csv").read_text() == (ref / "train.csv").read_text()
    assert all((gen / "train" / p.name).read_bytes() == p.read_bytes() for p in (ref / "train").glob("*.jpg"))
