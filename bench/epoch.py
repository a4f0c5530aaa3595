"""One training epoch end to end from JPEG files in the Kaggle layout, against the synthetic-batch ceiling.

Measures, in one run:
- each input pipeline alone (images per second to a normalised batch on the device, no model):
  `minimal`, the course's augmentations written by hand (`Augmented`); `course`, chapter 02's
  `make_dataloaders` exactly as chapters 02-03 call it (its sampler, (epoch, index) keys and transforms;
  uint8, normalised on the device); `course_float32`, the same with `normalize_on_device=False`;
- the training ceiling: the minimal loop on one synthetic batch already on the device;
- one epoch through each: the minimal loop on `minimal`, chapter 03's `train_one_epoch` on the two
  course loaders.

The table gets one validation image (fold 0); the epoch is every other image.

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


class Augmented(RawJpegs):
    """The minimal pipeline doing the course's training augmentations, written by hand: PIL decode, OpenCV
    resize to 9/8 of the side (as A.Resize), a random crop, random horizontal and vertical flips; uint8 CHW,
    normalised later on the device. The same work as chapter 02's pipeline, without albumentations."""

    def __init__(self, paths, targets, img_size):
        super().__init__(paths, targets)
        self.img_size = img_size
        self.rng = None  # made in the process that loads (each worker has its own torch seed)

    def __getitem__(self, i):
        import cv2

        if self.rng is None:
            self.rng = np.random.default_rng(torch.initial_seed())
        with Image.open(self.paths[i]) as im:
            x = np.asarray(im.convert("RGB"))
        side, s = self.img_size * 9 // 8, self.img_size
        x = cv2.resize(x, (side, side), interpolation=cv2.INTER_LINEAR)
        top, left = self.rng.integers(0, side - s + 1, size=2)
        x = x[top : top + s, left : left + s]
        if self.rng.random() < 0.5:
            x = x[:, ::-1]
        if self.rng.random() < 0.5:
            x = x[::-1]
        x = torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1)
        return x, torch.tensor([self.targets[i]])


def _write_images(job):
    "Write one chunk of generated JPEGs (a worker of `generate`): the same files make_sample_dataset writes."
    from course_lib.support.sample import write_sample_image

    folder, size, seed, rows = job
    for i, name, target in rows:
        write_sample_image(folder, i, name, target, size, seed)


def generate(out: Path, n: int, size: int, workers: int, seed: int = 0) -> Path:
    """make_sample_dataset's images and table, written by `workers` processes (33,126 images take minutes
    on one core)."""
    import multiprocessing as mp
    from course_lib.support.kaggle_data import DUPLICATE
    from course_lib.support.sample import sample_table

    df = sample_table(n, 0.2, np.random.default_rng(seed))
    (out / "train").mkdir(parents=True, exist_ok=True)
    sources = [i - 1 if t == DUPLICATE else i for i, t in enumerate(df.tfrecord)]  # a copy: the pixels before
    rows = list(zip(sources, df.image_name, df.target))
    chunks = [(str(out / "train"), size, seed, rows[k :: max(1, workers)]) for k in range(max(1, workers))]
    with mp.get_context("fork").Pool(max(1, workers)) as pool:
        pool.map(_write_images, chunks)
    df.to_csv(out / "train.csv", index=False)  # written last: its presence marks a finished set
    return out


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def like_make_dataloaders(ds, batch_size, workers, seed=0, **kw):
    """A training DataLoader with make_dataloaders' settings, for a pipeline that is not the course's:
    shuffled, unless `kw` (more DataLoader arguments) gives a sampler."""
    return torch.utils.data.DataLoader(
        ds,
        batch_size=batch_size,
        shuffle="sampler" not in kw,
        num_workers=workers,
        generator=torch.Generator().manual_seed(seed),
        persistent_workers=workers > 0,
        pin_memory=torch.cuda.is_available(),
        **kw,
    )


def to_device(x, y, device):
    "A batch on `device`, images normalised there (uint8 CHW or NHWC, or float32 passed through)."
    from course_lib.dataset import normalize_batch

    if x.shape[1] != 3:  # NHWC as decoded
        x = x.permute(0, 3, 1, 2)
    return normalize_batch(x.to(device, non_blocking=True)), y.to(device, non_blocking=True)


def pipeline_rate(dl, device, epoch: int = 0) -> tuple[float, float]:
    """(images per second over one pass of `dl`, seconds to the first batch), no model; every batch is
    normalised on `device`, and the sampler's `set_epoch` is called as the engine calls it."""
    if hasattr(dl.sampler, "set_epoch"):
        dl.sampler.set_epoch(epoch)
    start = time.perf_counter()
    first = None
    n = 0
    for x, y in dl:
        to_device(x, y, device)
        first = first or time.perf_counter() - start
        n += len(x)
    _sync(device)
    return n / (time.perf_counter() - start), first


def train_step_fn(model, device, precision, channels_last):
    "One optimizer step on a device batch; the minimal loop of bench/bench.py."
    from course_lib.pytorch_loop import WeightedFocalLoss
    from course_lib.support.precision import autocast

    loss_fn, opt = WeightedFocalLoss().to(device), torch.optim.Adam(model.parameters(), lr=5e-4)
    fmt = torch.channels_last if channels_last else torch.contiguous_format

    def step(x, y):
        with autocast(precision, device):
            logits = model(x.contiguous(memory_format=fmt))
        loss_fn(logits.float(), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


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
    from course_lib.dataset import LoaderConfig, make_dataloaders
    from course_lib.pytorch_loop import TrainConfig, train_one_epoch, WeightedFocalLoss
    from course_lib.support.seeding import seed_everything
    from course_lib.pytorch_loop import create_model

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
    df["fold"] = 1
    df.loc[df.index[0], "fold"] = 0  # one validation image: the epoch is every other image
    kw = dict(
        fold=0,
        img_size=a.img_size,
        batch_size=a.batch_size,
        num_workers=a.workers,
        seed=0,
        check_images=False,
    )
    loaders = {  # chapter 02's loaders exactly as chapters 02-03 build them: sampler, keys, transforms
        "course": make_dataloaders(df, data, LoaderConfig(**kw))[0],
        "course_float32": make_dataloaders(df, data, LoaderConfig(normalize_on_device=False, **kw))[0],
    }
    train = loaders["course"].dataset
    minimal = Augmented(train.image_paths, train.targets, a.img_size)
    loaders = {"minimal": like_make_dataloaders(minimal, a.batch_size, a.workers), **loaders}
    res = dict(
        images=len(train),
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
    out = a.out / f"epoch_{device.type}_{a.arch}_{a.img_size}px_b{a.batch_size}_n{len(df)}.json"

    def save():
        a.out.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2) + "\n")

    for k, dl in loaders.items():  # the pipelines alone, no model
        res[f"decode_{k}_images_per_second"] = round(pipeline_rate(dl, device)[0], 1)
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
    for xb, yb in loaders["minimal"]:  # the minimal loop on the minimal pipeline
        step(*to_device(xb, yb, device))
    _sync(device)
    sec = time.perf_counter() - t
    res.update(
        epoch_minimal_seconds=round(sec, 2), epoch_minimal_images_per_second=round(len(train) / sec, 1)
    )
    save()
    print(f"epoch, minimal pipeline: {sec:.1f} s", flush=True)

    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    for k in ("course", "course_float32"):  # chapter 03's engine on chapter 02's loaders
        t = time.perf_counter()
        train_one_epoch(
            model,
            loaders[k],
            WeightedFocalLoss().to(device),
            opt,
            device,
            TrainConfig(precision=a.precision, channels_last=cl),
        )
        _sync(device)
        sec = time.perf_counter() - t
        res[f"epoch_{k}_seconds"] = round(sec, 2)
        res[f"epoch_{k}_images_per_second"] = round(len(train) / sec, 1)
        save()
        print(f"epoch, {k} pipeline: {sec:.1f} s", flush=True)
    for k in loaders:
        res[f"epoch_{k}_vs_ceiling"] = round(
            res[f"epoch_{k}_images_per_second"] / res["ceiling_images_per_second"], 3
        )
        res[f"isic_2020_epoch_seconds_{k}"] = round(33126 / res[f"epoch_{k}_images_per_second"], 1)
    save()
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
