"""Training throughput and peak memory, side by side in one run: a minimal hand-written loop (the reference),
course_lib's engine (chapter 03) and its Lightning module (chapter 04), each in several precisions, eager and
compiled with torch.compile (chapter 07).

Every configuration runs in its own fresh Python process (so peak memory is that configuration's alone; on a
GPU, --in-process runs them all in one process instead) on the same synthetic, device-resident batches; the
script prints a table with images/s, peak memory and the ratios engine/reference and Lightning/reference, and
writes it as JSON and Markdown. The first optimizer step is timed on its own: for a compiled configuration it
holds the compilation, which the steady-state images/s leave out.

    python bench/bench.py                       # CPU here: EfficientNet-B0, 128 px, batch 32
    python bench/bench.py --device cuda --arch efficientnet-b0 --img-size 256 --batch-size 64
    python bench/bench.py --device cuda --arch resnet50 --img-size 128 --batch-size 128
"""

from __future__ import annotations
import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

LOOPS = ("reference", "engine", "lightning")


def configs(device: str) -> list[dict]:
    "Precision x channels_last x accumulation settings measured on `device`."
    cfg = [
        dict(precision="32"),
        dict(precision="bf16-mixed"),
        dict(precision="bf16-mixed", channels_last=True),
        dict(precision="32", accumulate=2),
        dict(precision="32", compile=True),
        dict(precision="bf16-mixed", channels_last=True, compile=True),
    ]
    if device == "cuda":
        cfg += [
            dict(precision="16-mixed"),
            dict(precision="16-mixed", channels_last=True),
            dict(precision="bf16-mixed", channels_last=True, accumulate=2),
        ]
    return [dict(dict(channels_last=False, accumulate=1, compile=False), **c) for c in cfg]


def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _batches(n, batch_size, img_size, device, channels_last):
    "`n` identical synthetic (images, targets) micro-batches already on `device`."
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch_size, 3, img_size, img_size, generator=g).to(device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = (torch.rand(batch_size, 1, generator=g) < 0.2).float().to(device)
    return [(x, y)] * n


class Marked:
    """The batches as a loader that notes the time (after a device sync) when the first micro-batch of each
    optimizer step is fetched: every loop is timed the same way, inside one uninterrupted pass."""

    def __init__(self, batches, accumulate, device, marks):
        self.batches, self.accumulate = batches, accumulate
        self.device, self.marks = device, marks

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for i, batch in enumerate(self.batches):
            if i % self.accumulate == 0:
                _sync(self.device)
                self.marks.append(time.perf_counter())
            yield batch


def reference_loop(model, batches, device, precision, accumulate):
    "The minimal loop over `batches` (any iterable): autocast, focal loss, scaled backward, a step every K."
    import torch
    from course_lib.pytorch_loop import WeightedFocalLoss

    loss_fn = WeightedFocalLoss().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "16-mixed")
    dtype = {"16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}.get(precision)
    model.train()
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            logits = model(x)
        scaler.scale(loss_fn(logits.float(), y) / accumulate).backward()
        if (i + 1) % accumulate == 0:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)


def run_reference(model, batches, device, precision, accumulate, channels_last, compile):
    "The minimal loop, timed step by step; the model compiled by hand with `compile`."
    import torch

    marks = []
    model = torch.compile(model) if compile else model
    reference_loop(model, Marked(batches, accumulate, device, marks), device, precision, accumulate)
    _sync(device)
    marks.append(time.perf_counter())
    return marks


def run_engine(model, batches, device, precision, accumulate, channels_last, compile):
    """course_lib.pytorch_loop.train_one_epoch, called once over all the batches, as a training run calls it;
    with `compile`, on the model compiled as fit(TrainConfig(compile=True)) compiles it."""
    import torch
    from course_lib.pytorch_loop import TrainConfig, WeightedFocalLoss, train_one_epoch

    loss_fn = WeightedFocalLoss().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "16-mixed")
    cfg = TrainConfig(precision=precision, accumulate=accumulate, channels_last=channels_last, progress=False)
    marks = []
    model = torch.compile(model) if compile else model
    train_one_epoch(
        model, Marked(batches, accumulate, device, marks), loss_fn, opt, device, cfg, scaler=scaler
    )
    _sync(device)
    marks.append(time.perf_counter())
    return marks


def run_lightning(model, batches, device, precision, accumulate, channels_last, compile):
    """course_lib.lightning.MelanomaModule under a Trainer; a callback marks the start of every optimizer
    step. With `compile`, the Trainer gets torch.compile(module), as `course-lib train --compile` hands it."""
    import pytorch_lightning as pl
    from course_lib.lightning import MelanomaModule
    from course_lib.support.precision import lightning_precision

    module = MelanomaModule("efficientnet-b0", channels_last=channels_last)
    module.model = model  # the same architecture instance as the other loops
    marks = []

    class Timer(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if batch_idx % accumulate == 0:
                _sync(device)
                marks.append(time.perf_counter())

        def on_train_end(self, trainer, pl_module):
            _sync(device)
            marks.append(time.perf_counter())

    trainer = pl.Trainer(
        accelerator=device.type,
        devices=1,
        max_epochs=1,
        precision=lightning_precision(precision),
        accumulate_grad_batches=accumulate,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        callbacks=[Timer()],
    )

    class Batches:  # a plain iterable: Lightning would read a bare list as a list of loaders
        def __len__(self):
            return len(batches)

        def __iter__(self):
            return iter(batches)

    if compile:  # as MelanomaModule(compile=True) does: the network in place, the steps stay eager
        module.model.compile()
    trainer.fit(module, train_dataloaders=Batches())
    return marks


def measure_one(
    loop, arch, img_size, batch_size, steps, warmup, device, precision, accumulate, channels_last, compile
) -> dict:
    """Images per second after `warmup` steps, the first step's seconds (with compile: the compilation), and
    peak memory of one loop/configuration, in this process."""
    import torch
    from course_lib.support.seeding import seed_everything
    from course_lib.pytorch_loop import create_model

    device = torch.device(device)
    seed_everything(0)
    model = create_model(arch).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    micro = batch_size // accumulate  # the same images per optimizer step in every configuration
    batches = _batches((warmup + steps) * accumulate, micro, img_size, device, channels_last)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    fn = dict(reference=run_reference, engine=run_engine, lightning=run_lightning)[loop]
    marks = fn(model, batches, device, precision, accumulate, channels_last, compile)
    step_seconds = sorted(b - a for a, b in zip(marks[warmup:], marks[warmup + 1 :]))
    median = step_seconds[
        len(step_seconds) // 2
    ]  # the median step: robust to a noisy neighbour on a shared machine
    peak = (
        torch.cuda.max_memory_allocated()
        if device.type == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )  # CPU: peak resident set of this process
    return dict(
        images_per_second=round(batch_size / median, 2),
        first_step_seconds=round(marks[1] - marks[0], 3),
        peak_memory_mb=round(peak / 2**20, 1),
        step_seconds=[round(t, 4) for t in step_seconds],
    )


def measure_in_new_process(job: dict, label: str) -> dict:
    "measure_one in a fresh Python process: its peak memory is this configuration's alone."
    out = subprocess.run([sys.executable, __file__, "--one", json.dumps(job)], capture_output=True, text=True)
    line = [text for text in out.stdout.splitlines() if text.startswith("RESULT ")]
    if not line:
        sys.exit(f"bench: {job['loop']} / {label} failed:\n{out.stderr[-3000:]}")
    return json.loads(line[0][7:])


def measure_here(job: dict) -> dict:
    "measure_one in this process, then free what it allocated on the GPU."
    import gc
    import torch

    result = measure_one(**job)
    gc.collect()
    torch.cuda.empty_cache()
    return result


def cpu_name() -> str:
    "The CPU model from /proc/cpuinfo (Linux), else the platform's word for it."
    try:
        lines = open("/proc/cpuinfo")
        return next(text.split(":", 1)[1].strip() for text in lines if text.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def versions() -> dict:
    "Library versions and the machine, recorded with every result."
    import torch
    import pytorch_lightning
    import os

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return dict(
        python=platform.python_version(),
        torch=torch.__version__,
        lightning=pytorch_lightning.__version__,
        cpu=cpu_name(),
        cpu_cores=os.cpu_count(),
        gpu=gpu,
    )


def name(c: dict) -> str:
    "A short label for a configuration, e.g. 'bf16-mixed + channels_last, accumulate 2'."
    s = (
        c["precision"]
        + (" + channels_last" if c["channels_last"] else "")
        + (" + compile" if c["compile"] else "")
    )
    return s + (f", accumulate {c['accumulate']}" if c["accumulate"] > 1 else "")


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default: auto)")
    p.add_argument("--arch", default="efficientnet-b0", help="model (default: efficientnet-b0)")
    p.add_argument("--img-size", type=int, default=128, help="image side in pixels (default: 128)")
    p.add_argument("--batch-size", type=int, default=32, help="images per optimizer step (default: 32)")
    p.add_argument("--steps", type=int, default=8, help="timed optimizer steps (default: 8)")
    p.add_argument("--warmup", type=int, default=2, help="untimed optimizer steps first (default: 2)")
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="repeat the three loops this many times, interleaved; report medians (default: 3)",
    )
    p.add_argument(
        "--loops",
        nargs="+",
        choices=LOOPS,
        default=list(LOOPS),
        help="the loops to run (default: all three; the reference always runs, the ratios need it)",
    )
    p.add_argument(
        "--only",
        nargs="+",
        metavar="LABEL",
        help="run only these configurations, by exact label (e.g. 32 'bf16-mixed + channels_last')",
    )
    p.add_argument(
        "--out", type=Path, default=Path("bench/results"), help="folder for the JSON and Markdown results"
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="GPU only: run every loop in this one process (peak memory per loop from CUDA's counters), "
        "so that "
        "process-to-process differences (clocks, launch overhead) do not enter the ratios",
    )
    p.add_argument(
        "--one", help=argparse.SUPPRESS
    )  # internal: measure one configuration (JSON) in this process
    a = p.parse_args(argv)
    if a.device == "auto":
        import torch

        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.one:
        job = json.loads(a.one)
        print("RESULT " + json.dumps(measure_one(**job)))
        return
    if a.batch_size % 2:
        p.error("--batch-size must be even (accumulation splits it in two)")
    if a.in_process and a.device != "cuda":
        p.error("--in-process needs --device cuda (CPU peak memory is per process)")
    a.loops = ["reference"] + [loop for loop in a.loops if loop != "reference"]
    labels = [name(c) for c in configs(a.device)]
    if a.only and set(a.only) - set(labels):
        p.error(f"--only: unknown label(s) {sorted(set(a.only) - set(labels))}; known: {labels}")
    rows = []
    for c in configs(a.device):
        if a.only and name(c) not in a.only:
            continue
        row, runs = dict(config=name(c), **c), {loop: [] for loop in a.loops}
        for _ in range(a.rounds):
            for (
                loop
            ) in a.loops:  # the three loops back to back, round after round, so drift hits all three alike
                job = dict(
                    loop=loop,
                    arch=a.arch,
                    img_size=a.img_size,
                    batch_size=a.batch_size,
                    steps=a.steps,
                    warmup=a.warmup,
                    device=a.device,
                    **c,
                )
                runs[loop].append(measure_here(job) if a.in_process else measure_in_new_process(job, name(c)))
        for loop, rs in runs.items():
            ips = sorted(r["images_per_second"] for r in rs)
            row[f"{loop}_images_per_second"] = ips[len(ips) // 2]  # median over rounds
            row[f"{loop}_images_per_second_rounds"] = [r["images_per_second"] for r in rs]
            row[f"{loop}_peak_memory_mb"] = max(r["peak_memory_mb"] for r in rs)
            # the first round's first step: later rounds may reuse the compiled code of the first
            row[f"{loop}_first_step_seconds"] = rs[0]["first_step_seconds"]
            row[f"{loop}_first_step_seconds_rounds"] = [r["first_step_seconds"] for r in rs]
        ref = row["reference_images_per_second"]
        for loop in ("engine", "lightning"):
            row[f"{loop}_ratio"] = round(row[f"{loop}_images_per_second"] / ref, 3) if loop in runs else None
        rows.append(row)
        print(
            f"{row['config']:<42} ref {ref:8.1f} img/s  engine x{row['engine_ratio']}  "
            f"lightning x{row['lightning_ratio']}",
            flush=True,
        )
        result = save(rows, a)  # after every row, so a run cut short keeps what it measured
    print(markdown(result))


def save(rows: list, a) -> dict:
    "Write the rows so far as JSON and Markdown (speed-ups against the fp32 reference when it was measured)."
    fp32 = next((r["reference_images_per_second"] for r in rows if r["config"] == "32"), None)
    for r in rows:
        r["speedup_vs_fp32"] = round(r["reference_images_per_second"] / fp32, 3) if fp32 else None
        eager = next((e for e in rows if e["config"] == r["config"].removesuffix(" + compile")), None)
        r["compiled_vs_eager"] = (  # the steady state, same loop and precision, measured in this run
            round(r["reference_images_per_second"] / eager["reference_images_per_second"], 3)
            if r["compile"] and eager and not eager["compile"]
            else None
        )
    result = dict(
        settings={k: v for k, v in vars(a).items() if k not in ("one", "out")}, machine=versions(), rows=rows
    )
    a.out.mkdir(parents=True, exist_ok=True)
    stem = f"{a.device}_{a.arch}_{a.img_size}px_b{a.batch_size}" + ("_in-process" if a.in_process else "")
    (a.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (a.out / f"{stem}.md").write_text(markdown(result))
    return result


def _loop_keys() -> list[str]:
    "Every per-loop key of a row."
    kinds = ("images_per_second", "first_step_seconds", "peak_memory_mb")
    return [f"{loop}_{kind}" for loop in LOOPS for kind in kinds]


def markdown(result: dict) -> str:
    "The result as a Markdown table."
    s, m = result["settings"], result["machine"]
    hw = m["gpu"] or f"{m['cpu']} ({m['cpu_cores']} cores)"
    head = (
        f"{s['arch']}, {s['img_size']} px, batch {s['batch_size']}, "
        f"median step of {s['steps']} after {s['warmup']} warm-up, "
        f"median of {s['rounds']} interleaved rounds; "
        f"{hw}; torch {m['torch']}, Lightning {m['lightning']}\n\n"
    )
    t = (
        "| configuration | reference img/s | engine img/s | Lightning img/s | engine / ref | Lightning / ref "
        "| ref vs fp32 | compiled vs eager (ref) | first step s (ref / engine / Lightning) "
        "| peak MB (ref / engine / Lightning) |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    for r in result["rows"]:
        r = {k: "-" if v is None else v for k, v in r.items()}
        r.update({k: "-" for k in _loop_keys() if k not in r})  # loops left out with --loops
        t += (
            f"| {r['config']} | {r['reference_images_per_second']} | {r['engine_images_per_second']} "
            f"| {r['lightning_images_per_second']} "
            f"| {r['engine_ratio']} | {r['lightning_ratio']} | {r['speedup_vs_fp32']} "
            f"| {r['compiled_vs_eager']} | {r['reference_first_step_seconds']} / "
            f"{r['engine_first_step_seconds']} / {r['lightning_first_step_seconds']} "
            f"| {r['reference_peak_memory_mb']} / {r['engine_peak_memory_mb']} "
            f"/ {r['lightning_peak_memory_mb']} |\n"
        )
    return head + t


if __name__ == "__main__":
    main()
