"""One training epoch end to end from JPEG files in the Kaggle layout, against the synthetic-batch ceiling.

Measures, in one run: JPEG decoding alone (a minimal PIL-to-uint8 pipeline, and the course's albumentations
pipeline), the training ceiling on a device-resident batch, and one full epoch through each input pipeline
(minimal: uint8 batches pinned and normalised on the device; course: chapter 02's dataset and chapter 03's
engine, with the images normalised in the workers as float32, and as uint8 normalised on the device:
`normalize_on_device=True`).

    python bench/epoch.py --n 512 --img-size 128 --batch-size 32            # CPU here
    python bench/epoch.py --n 33126 --workers 16 --batch-size 256 --device cuda  # ISIC 2020's size, GPU
"""

from __future__ import annotations
import argparse
import json
import os
import time
from pathlib import Path
import numpy as np
import torch
from PIL import Image

MEAN = torch.tensor([0.485, 0.456, 0.406]) * 255
STD = torch.tensor([0.229, 0.224, 0.225]) * 255


class RawJpegs(torch.utils.data.Dataset):
    """The minimal pipeline: decode with PIL, return HWC uint8 (4x fewer bytes than float32), normalise
    later on the device."""

    def __init__(self, paths, targets):
        self.paths, self.targets = paths, np.asarray(targets, dtype=np.float32)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with Image.open(self.paths[i]) as im:
            x = torch.from_numpy(np.asarray(im.convert("RGB")).copy())
        return x, torch.tensor([self.targets[i]])


def _write_images(job):
    "Write one chunk of generated JPEGs (a worker of `generate`): the same files make_sample_dataset writes."
    from course_lib.data import write_sample_image

    folder, size, seed, rows = job
    for i, name, target in rows:
        write_sample_image(folder, i, name, target, size, seed)


def generate(out: Path, n: int, size: int, workers: int, seed: int = 0) -> Path:
    """make_sample_dataset's images and table, written by `workers` processes (33,126 images take minutes
    on one core)."""
    import multiprocessing as mp
    from course_lib.data import sample_table

    df = sample_table(n, size, 0.2, np.random.default_rng(seed))
    (out / "train").mkdir(parents=True, exist_ok=True)
    rows = list(zip(range(n), df.image_name, df.target))
    chunks = [(str(out / "train"), size, seed, rows[k :: max(1, workers)]) for k in range(max(1, workers))]
    with mp.get_context("fork").Pool(max(1, workers)) as pool:
        pool.map(_write_images, chunks)
    df.to_csv(out / "train.csv", index=False)  # written last: its presence marks a finished set
    return out


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def loader(ds, batch_size, workers, device, shuffle=True):
    return torch.utils.data.DataLoader(
        ds,
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=workers,
        drop_last=True,
        pin_memory=device.type == "cuda",
        persistent_workers=False,
        prefetch_factor=4 if workers else None,
    )


def decode_rate(dl) -> float:
    "Images per second of iterating `dl` with no model (the input pipeline alone)."
    start, n = time.perf_counter(), 0
    for x, _ in dl:
        n += len(x)
    return n / (time.perf_counter() - start)


def train_step_fn(model, device, precision, channels_last):
    "One optimizer step on a device batch; the minimal loop of bench/bench.py."
    from course_lib.engine import WeightedFocalLoss, autocast

    loss_fn, opt = WeightedFocalLoss().to(device), torch.optim.Adam(model.parameters(), lr=5e-4)
    fmt = torch.channels_last if channels_last else torch.contiguous_format

    def step(x, y):
        with autocast(precision, device):
            logits = model(x.contiguous(memory_format=fmt))
        loss_fn(logits.float(), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def on_device_uint8(x, y, device, img_size):
    """uint8 NHWC batch -> normalised float NCHW on the device (centre crop to img_size if the files are
    larger)."""
    x = x.to(device, non_blocking=True).permute(0, 3, 1, 2).float()
    if x.shape[-1] != img_size:
        o = (x.shape[-1] - img_size) // 2
        x = x[..., o : o + img_size, o : o + img_size]
    return (x - MEAN.to(device)[:, None, None]) / STD.to(device)[:, None, None], y.to(
        device, non_blocking=True
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data", type=Path, help="a folder in the Kaggle layout; default: generate --n images into --cache"
    )
    p.add_argument(
        "--n", type=int, default=512, help="images to generate when --data is not given (default: 512)"
    )
    p.add_argument(
        "--file-size",
        type=int,
        default=256,
        help="side of the generated JPEGs (default: 256, as the Kaggle set)",
    )
    p.add_argument("--img-size", type=int, default=256, help="training resolution (default: 256)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument(
        "--workers", type=int, default=os.cpu_count(), help="DataLoader workers (default: all cores)"
    )
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", default="bf16-mixed")
    p.add_argument(
        "--channels-last", action=argparse.BooleanOptionalAction, default=None, help="default: on for cuda"
    )
    p.add_argument("--arch", default="efficientnet-b0")
    p.add_argument(
        "--cache",
        type=Path,
        default=Path("bench/.data"),
        help="where generated images go (default: bench/.data)",
    )
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    a = p.parse_args(argv)
    device = torch.device(
        "cuda"
        if a.device == "auto" and torch.cuda.is_available()
        else ("cpu" if a.device == "auto" else a.device)
    )
    cl = a.channels_last if a.channels_last is not None else device.type == "cuda"
    import pandas as pd
    from course_lib.dataset import MelanomaDataset, get_transforms, image_path
    from course_lib.engine import create_model, seed_everything, train_one_epoch, WeightedFocalLoss

    data = a.data or a.cache / f"n{a.n}_{a.file_size}px"
    if not (data / "train.csv").is_file():
        t = time.perf_counter()
        generate(data, a.n, a.file_size, a.workers)
        print(
            f"generated {a.n} JPEGs of {a.file_size} px with {a.workers} processes "
            f"in {time.perf_counter() - t:.1f} s",
            flush=True,
        )
    df = pd.read_csv(data / "train.csv")
    paths = [image_path(data, n) for n in df.image_name]
    res = dict(
        images=len(df),
        file_size=a.file_size,
        img_size=a.img_size,
        batch_size=a.batch_size,
        workers=a.workers,
        device=torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        precision=a.precision,
        channels_last=cl,
        torch=torch.__version__,
        cpu_cores=os.cpu_count(),
    )
    course = {
        "course_uint8": MelanomaDataset(
            paths, df.target, get_transforms(a.img_size, train=True, seed=0, normalize=False)
        ),
        "course": MelanomaDataset(paths, df.target, get_transforms(a.img_size, train=True, seed=0)),
    }
    raw_ds = RawJpegs(paths, df.target)
    res["decode_minimal_images_per_second"] = round(
        decode_rate(loader(raw_ds, a.batch_size, a.workers, device)), 1
    )
    for k, ds in course.items():
        res[f"decode_{k}_images_per_second"] = round(
            decode_rate(loader(ds, a.batch_size, a.workers, device)), 1
        )
    out = a.out / f"epoch_{device.type}_{a.arch}_{a.img_size}px_b{a.batch_size}_n{len(df)}.json"

    def save():
        a.out.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2) + "\n")

    save()
    print(json.dumps(res), flush=True)  # saved after every phase, so a run cut short keeps what it measured

    seed_everything(0)
    model = create_model(a.arch).to(device)
    if cl:
        model = model.to(memory_format=torch.channels_last)
    step = train_step_fn(model, device, a.precision, cl)
    x = torch.randn(a.batch_size, 3, a.img_size, a.img_size, device=device)
    y = (torch.rand(a.batch_size, 1, device=device) < 0.2).float()
    steps = max(3, min(20, len(df) // a.batch_size))
    for _ in range(2):
        step(x, y)
    _sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        step(x, y)
    _sync(device)
    res["ceiling_images_per_second"] = round(steps * a.batch_size / (time.perf_counter() - t), 1)
    save()

    t = time.perf_counter()
    n = 0
    for xb, yb in loader(raw_ds, a.batch_size, a.workers, device):
        step(*on_device_uint8(xb, yb, device, a.img_size))
        n += len(xb)
    _sync(device)
    sec = time.perf_counter() - t
    res.update(epoch_minimal_seconds=round(sec, 2), epoch_minimal_images_per_second=round(n / sec, 1))
    save()
    print(f"epoch, minimal pipeline: {sec:.1f} s", flush=True)

    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    for (
        k,
        ds,
    ) in course.items():  # the engine normalises uint8 batches on the device (chapter 02's normalize_batch)
        t = time.perf_counter()
        train_one_epoch(
            model,
            loader(ds, a.batch_size, a.workers, device),
            WeightedFocalLoss().to(device),
            opt,
            device,
            precision=a.precision,
            channels_last=cl,
        )
        _sync(device)
        sec = time.perf_counter() - t
        res.update({f"epoch_{k}_seconds": round(sec, 2), f"epoch_{k}_images_per_second": round(n / sec, 1)})
        save()
        print(f"epoch, {k} pipeline: {sec:.1f} s", flush=True)
    for k in ("minimal", *course):
        res[f"epoch_{k}_vs_ceiling"] = round(
            res[f"epoch_{k}_images_per_second"] / res["ceiling_images_per_second"], 3
        )
        res[f"isic_2020_epoch_seconds_{k}"] = round(33126 / res[f"epoch_{k}_images_per_second"], 1)
    save()
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
