"""Where the engine's time goes, against the minimal loop: torch.profiler on the same batches, in one process.

Three loops train the same model on the same device-resident synthetic batches, in one process:
- `reference`: bench.py's minimal hand-written loop;
- `engine`: chapter 03's `train_one_epoch`, one call over all the steps (as a training run calls it);
- `engine_per_step`: `train_one_epoch` called once per optimizer step, which is how bench.py timed the
  engine before 2026-11-30 (each call pays the epoch's set-up and its final reads).

Each loop first runs `--rounds` times, interleaved, without the profiler (seconds per step, median round);
then once more under `torch.profiler`. The result lists, per optimizer step, the operators with the most
self time in any loop (CPU, and the GPU's kernel time when there is one) and what the profiler could not
attribute to an operator (Python, the optimizer's bookkeeping, waiting).

    python bench/profile_engine.py                                   # CPU here
    python bench/profile_engine.py --device cuda --img-size 256 --batch-size 64 --steps 50
"""

from __future__ import annotations
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import _batches, _sync, reference_loop, versions  # noqa: E402

LOOPS = ("reference", "engine", "engine_per_step")


def run_engine(model, batches, device, precision):
    "One train_one_epoch over all the batches."
    import torch
    from course_lib.pytorch_loop import TrainConfig, WeightedFocalLoss, train_one_epoch

    loss_fn = WeightedFocalLoss().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    train_one_epoch(model, batches, loss_fn, opt, device, TrainConfig(precision=precision, progress=False))


def run_engine_per_step(model, batches, device, precision):
    "train_one_epoch once per batch: each call sets up an epoch and reads its loss back."
    import torch
    from course_lib.pytorch_loop import TrainConfig, WeightedFocalLoss, train_one_epoch

    loss_fn = WeightedFocalLoss().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    for i in range(len(batches)):
        train_one_epoch(
            model, batches[i : i + 1], loss_fn, opt, device, TrainConfig(precision=precision, progress=False)
        )


def _reference(model, batches, device, precision):
    "bench.py's minimal loop, one pass, no timing marks."
    reference_loop(model, batches, device, precision, 1)


RUNNERS = dict(reference=_reference, engine=run_engine, engine_per_step=run_engine_per_step)


def seconds_per_step(loop, model, batches, device, precision) -> float:
    "Wall seconds per optimizer step of one uninterrupted pass of `loop` over `batches`."
    _sync(device)
    start = time.perf_counter()
    RUNNERS[loop](model, batches, device, precision)
    _sync(device)
    return (time.perf_counter() - start) / len(batches)


def profile(loop, model, batches, device, precision) -> dict:
    "Per-step self time of every operator (microseconds), and the step's wall time, under torch.profiler."
    import torch
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    _sync(device)
    start = time.perf_counter()
    with torch.profiler.profile(activities=activities) as prof:
        RUNNERS[loop](model, batches, device, precision)
        _sync(device)
    wall = (time.perf_counter() - start) / len(batches)
    ops = {}
    for e in prof.key_averages():
        cpu = e.self_cpu_time_total / len(batches)
        gpu = getattr(e, "self_device_time_total", 0) / len(batches)
        ops[e.key] = dict(cpu_us=round(cpu, 1), gpu_us=round(gpu, 1), calls=e.count / len(batches))
    return dict(wall_us=round(wall * 1e6, 1), ops=ops)


def compare(profiles: dict, top: int) -> list[dict]:
    "The `top` operators by self time in any loop, with each loop's per-step time and call count."
    key = "gpu_us" if any(o["gpu_us"] for p in profiles.values() for o in p["ops"].values()) else "cpu_us"
    names = set()
    for p in profiles.values():
        ranked = sorted(p["ops"], key=lambda k: -p["ops"][k][key])
        names.update(ranked[:top])
    # operators only one loop calls, however small: that is where two loops differ
    for p in profiles.values():
        names.update(k for k in p["ops"] if not all(k in q["ops"] for q in profiles.values()))
    rows = []
    for n in sorted(names, key=lambda k: -max(p["ops"].get(k, {}).get(key, 0) for p in profiles.values())):
        row = dict(op=n)
        for loop, p in profiles.items():
            o = p["ops"].get(n, dict(cpu_us=0.0, gpu_us=0.0, calls=0))
            row[loop] = dict(o)
        rows.append(row)
    return rows


def unattributed(p: dict) -> float:
    "Wall time per step not inside any operator's self CPU time (Python, bookkeeping, waiting)."
    return round(p["wall_us"] - sum(o["cpu_us"] for o in p["ops"].values()), 1)


def markdown(result: dict, top: int = 12) -> str:
    "The timings and the operator table as Markdown."
    s, m = result["settings"], result["machine"]
    hw = m["gpu"] or f"{m['cpu']} ({m['cpu_cores']} cores)"
    out = (
        f"{s['arch']}, {s['img_size']} px, batch {s['batch_size']}, {s['precision']}, {s['steps']} steps "
        f"per pass, {s['rounds']} interleaved rounds; {hw}; torch {m['torch']}\n\n"
        "| loop | seconds per step (median round) | vs reference | rounds |\n|---|---|---|---|\n"
    )
    ref = result["timed"]["reference"]["median"]
    for loop, t in result["timed"].items():
        rounds = ", ".join(f"{x:.4f}" for x in t["rounds"])
        out += f"| {loop} | {t['median']:.4f} | {ref / t['median']:.3f} | {rounds} |\n"
    key = "gpu_us" if m["gpu"] else "cpu_us"
    what = "GPU kernel" if m["gpu"] else "CPU self"
    out += f"\nUnder the profiler, per optimizer step ({what} time, µs; calls per step):\n\n"
    out += "| operator | " + " | ".join(LOOPS) + " |\n|---|" + "---|" * len(LOOPS) + "\n"
    rows = result["operators"]
    differ = [r for r in rows[top:] if len({r[loop]["calls"] for loop in LOOPS}) > 1]
    for row in rows[:top] + differ:
        cells = [f"{row[loop][key]:.1f} ({row[loop]['calls']:g})" for loop in LOOPS]
        out += f"| `{row['op']}` | " + " | ".join(cells) + " |\n"
    walls = [f"{result['profiled'][loop]['wall_us'] / 1e3:.1f}" for loop in LOOPS]
    out += "| wall time per step, ms | " + " | ".join(walls) + " |\n"
    rest = [f"{result['unattributed_us'][loop] / 1e3:.1f}" for loop in LOOPS]
    out += "| not in any operator (Python, waiting), ms | " + " | ".join(rest) + " |\n"
    return out


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default: auto)")
    p.add_argument("--arch", default="efficientnet-b0")
    p.add_argument("--img-size", type=int, default=128, help="image side in pixels (default: 128)")
    p.add_argument("--batch-size", type=int, default=32, help="images per step (default: 32)")
    p.add_argument("--precision", default="32", help="32, 16-mixed or bf16-mixed (default: 32)")
    p.add_argument("--steps", type=int, default=6, help="optimizer steps per pass (default: 6)")
    p.add_argument("--rounds", type=int, default=3, help="timed passes per loop, interleaved (default: 3)")
    p.add_argument("--top", type=int, default=12, help="operators to list (default: 12)")
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    a = p.parse_args(argv)
    import torch
    from course_lib.support.seeding import seed_everything
    from course_lib.pytorch_loop import create_model

    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(a.device)
    seed_everything(0)
    model = create_model(a.arch).to(device)
    batches = _batches(a.steps, a.batch_size, a.img_size, device, False)
    for loop in LOOPS:  # warm-up: the first passes allocate memory and pick kernels
        seconds_per_step(loop, model, batches[:2], device, a.precision)
    timed = {loop: [] for loop in LOOPS}
    for _ in range(a.rounds):
        for loop in LOOPS:
            timed[loop].append(seconds_per_step(loop, model, batches, device, a.precision))
        print(json.dumps({k: round(v[-1], 4) for k, v in timed.items()}), flush=True)
    profiles = {loop: profile(loop, model, batches, device, a.precision) for loop in LOOPS}
    settings = {k: v for k, v in vars(a).items() if k != "out"}
    result = dict(settings=settings, machine=versions())
    result["timed"] = {k: dict(median=sorted(v)[len(v) // 2], rounds=v) for k, v in timed.items()}
    result["profiled"] = profiles
    result["unattributed_us"] = {loop: unattributed(profiles[loop]) for loop in LOOPS}
    result["operators"] = compare(profiles, a.top)
    a.out.mkdir(parents=True, exist_ok=True)
    stem = f"profile_{a.device}_{a.arch}_{a.img_size}px_b{a.batch_size}_{a.precision}"
    (a.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (a.out / f"{stem}.md").write_text(markdown(result, a.top))
    print(markdown(result, a.top))
    print(f"wrote {a.out / stem}.json and .md")


if __name__ == "__main__":
    main()
