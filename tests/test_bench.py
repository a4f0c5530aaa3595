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
        "--precision",  # what every CPU runs natively (bf16 is emulated on CPUs without AVX-512)
        "32",
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
        "decode_course_float32_images_per_second",
        "ceiling_images_per_second",
        "epoch_minimal_images_per_second",
        "epoch_course_images_per_second",
        "epoch_course_float32_images_per_second",
    ):
        assert res[k] > 0, k
    assert 0 < res["epoch_course_vs_ceiling"] and res["images"] == 23, "one image validates"
    from course_lib.support.sample import make_sample_dataset  # the parallel generator writes its images

    ref = make_sample_dataset(tmp_path / "ref", n=24, img_size=64, seed=0)
    gen = tmp_path / "data" / "n24_64px"
    assert (gen / "train.csv").read_text() == (ref / "train.csv").read_text()
    assert all((gen / "train" / p.name).read_bytes() == p.read_bytes() for p in (ref / "train").glob("*.jpg"))


def test_minimal_pipeline_does_the_course_augmentations_work(tmp_path):
    "Augmented: crops of the training size, uint8, each flip on its own, different draws per call."
    sys.path.insert(0, str(REPO / "bench"))
    import numpy as np
    import torch
    from epoch import Augmented
    from PIL import Image

    img = np.random.default_rng(0).integers(0, 255, (36, 36, 3), dtype=np.uint8)
    Image.fromarray(img).save(tmp_path / "a.png")  # lossless, so flips can be recognised
    ds = Augmented([tmp_path / "a.png"], [1], img_size=32)
    torch.manual_seed(0)
    kinds = {"none": img, "h": img[:, ::-1], "v": img[::-1], "h+v": img[::-1, ::-1]}
    seen = set()  # 36 px files resized to 9/8 x 32 = 36 px: only the crop and the flips change them
    for _ in range(40):
        x, y = ds[0]
        assert x.shape == (3, 32, 32) and x.dtype == torch.uint8 and y.tolist() == [1.0]
        h = x.permute(1, 2, 0).numpy()
        seen |= {
            (k, top, left)
            for k, v in kinds.items()
            for top in range(5)
            for left in range(5)
            if np.array_equal(h, v[top : top + 32, left : left + 32])
        }
    assert {k for k, _, _ in seen} == set(kinds), seen
    assert len({(top, left) for _, top, left in seen}) > 5, "the crop moves"


def tiny_gpu_sh(out, *args, timeout=900):
    "bash bench/gpu.sh ARGS with its tiny CPU settings, results in `out` (no wheels to install)."
    import os

    env = dict(
        os.environ, GPU_SH_TINY="1", OUT=str(out), PYTHON=sys.executable, WHEELS=str(out / "no-wheels")
    )
    return subprocess.run(
        ["bash", str(REPO / "bench" / "gpu.sh"), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def tiny_gpu_run(tmp_path_factory):
    """bench/gpu.sh with its tiny CPU settings, once for the module: its five steps are bench.py (eager, then
    compiled), epoch.py, profile_engine.py and loader.py, whose results the tests below read. Returns (exit
    status, log, OUT)."""
    out = tmp_path_factory.mktemp("gpu-sh") / "out"
    r = tiny_gpu_sh(out)
    return r.returncode, (out / "gpu.log").read_text(), out


@pytest.mark.slow
@pytest.mark.deep  # the GPU script's tiny CPU run: the deeper suite
def test_gpu_script_runs_every_step_and_writes_under_out(tiny_gpu_run):
    "bench/gpu.sh with its tiny CPU settings: the five steps finish and leave their results in $OUT."
    code, log, out = tiny_gpu_run
    assert code == 0, log[-3000:]
    exits = [line.split("exit ")[1] for line in log.splitlines() if "] exit " in line]
    assert len(exits) == 5 and all(e.startswith("0:") for e in exits), exits
    for name in (
        "cpu_resnet18_32px_b4.json",
        "compiled/cpu_resnet18_32px_b4.json",
        "epoch_cpu_resnet18_32px_b8_n24.json",
        "profile_cpu_resnet18_32px_b4_32.json",
        "loader_cpu_32px_b8_n40.json",
    ):
        assert json.loads((out / name).read_text()), name
    assert not (out / ".data").exists(), "the generated images are removed"


@pytest.mark.slow
@pytest.mark.deep  # the GPU script's tiny CPU run: the deeper suite
def test_bench_writes_every_loop_and_the_ratios(tiny_gpu_run):
    _, log, out = tiny_gpu_run
    res = json.loads((out / "cpu_resnet18_32px_b4.json").read_text())
    assert [row["config"] for row in res["rows"]] == ["32", "32, accumulate 2"], log[-3000:]
    for row in res["rows"]:
        for loop in ("reference", "engine", "lightning"):
            assert row[f"{loop}_images_per_second"] > 0 and row[f"{loop}_peak_memory_mb"] > 0
        assert row["engine_ratio"] == round(
            row["engine_images_per_second"] / row["reference_images_per_second"], 3
        )
    assert res["rows"][0]["speedup_vs_fp32"] == 1.0 and res["machine"]["torch"]
    assert "| 32, accumulate 2 |" in (out / "cpu_resnet18_32px_b4.md").read_text()


@pytest.mark.slow
@pytest.mark.deep  # the GPU script's tiny CPU run: the deeper suite
def test_bench_times_compiled_rows_beside_eager_with_the_first_step_apart(tiny_gpu_run):
    _, log, out = tiny_gpu_run
    res = json.loads((out / "compiled" / "cpu_resnet18_32px_b4.json").read_text())
    eager, compiled = res["rows"]
    assert (eager["config"], compiled["config"]) == ("32", "32 + compile") and compiled["compile"]
    assert compiled["compiled_vs_eager"] == round(
        compiled["reference_images_per_second"] / eager["reference_images_per_second"], 3
    )
    assert (
        compiled["engine_ratio"] is None and "engine_images_per_second" not in compiled
    )  # --loops reference
    for loop in ("reference",):
        # the first step holds Dynamo's capture and Inductor's compilation: longer than a steady step
        steady = res["settings"]["batch_size"] / compiled[f"{loop}_images_per_second"]
        assert compiled[f"{loop}_first_step_seconds"] > steady, loop
    assert "| 32 + compile |" in (out / "compiled" / "cpu_resnet18_32px_b4.md").read_text()


@pytest.mark.slow
@pytest.mark.deep  # the GPU script's tiny CPU run: the deeper suite
def test_gpu_script_course_mode_runs_the_chapters_and_keeps_them(tmp_path):
    "bench/gpu.sh course, tiny: the runner executes chapter 00 into $OUT/course with its summary.json."
    r = tiny_gpu_sh(tmp_path, "course", timeout=600)
    assert r.returncode == 0, r.stdout[-3000:]
    summary = json.loads((tmp_path / "course" / "summary.json").read_text())  # one row per notebook
    assert [(n["notebook"], n["status"]) for n in summary] == [("00_index.ipynb", "ok")], summary
    assert (tmp_path / "course" / "00_index.ipynb").exists()


@pytest.mark.slow
@pytest.mark.deep  # the GPU script's tiny CPU run: the deeper suite
def test_profile_engine_lists_the_same_operators_for_every_loop(tiny_gpu_run):
    _, log, out = tiny_gpu_run
    res = json.loads((out / "profile_cpu_resnet18_32px_b4_32.json").read_text())
    loops = ("reference", "engine", "engine_per_step")
    assert set(res["timed"]) == set(loops) and all(res["timed"][k]["median"] > 0 for k in loops)
    conv = next(row for row in res["operators"] if row["op"] == "aten::convolution_backward")
    assert all(conv[k]["calls"] == conv["reference"]["calls"] > 0 for k in loops), conv
    assert "| wall time per step, ms |" in (out / "profile_cpu_resnet18_32px_b4_32.md").read_text()


@pytest.mark.slow
@pytest.mark.deep  # the GPU script's tiny CPU run: the deeper suite
def test_loader_bench_measures_every_pipeline_per_worker_count(tiny_gpu_run):
    _, log, out = tiny_gpu_run
    res = json.loads((out / "loader_cpu_32px_b8_n40.json").read_text())
    assert [row["workers"] for row in res["rows"]] == [0, 1] and res["images_per_pass"] == 36
    names = ("minimal", "decode_only", "course", "course_float32", "course_set_random_seed")
    names += ("course_unseeded", "course_cv2_single_thread")
    for row in res["rows"]:
        assert row["minimal_vs_minimal"] == 1.0
        for k in names:
            assert row[f"{k}_img_s"] > 0 and row[f"{k}_vs_minimal"] > 0, k


def test_compiled_module_probe_reports_both_ways():
    """bench/compiled_module.py fits a whole compiled LightningModule and the course's compiled network, and
    says for each: ok or the error (bench/RUNTIMES.md records it per runtime). On CI's torch both train."""
    r = bench("compiled_module.py", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [line for line in r.stdout.splitlines() if "compile" in line]
    assert [line.rsplit(": ", 1)[1] for line in lines] == ["ok", "ok"], r.stdout
