"""How fast each input pipeline delivers normalised training batches, by DataLoader worker count; no model.

Side by side in one run, for each worker count; every pipeline's batches are moved to the device and
normalised there (chapter 02's `normalize_batch`, which passes float32 batches through), so every row
delivers the same thing: a normalised float batch where the model is.
- `minimal`: the course's augmentations written by hand (PIL decode, OpenCV resize, random crop, random
  flips; uint8): the same work as the course's pipeline, without albumentations. The reference.
- `decode_only`: PIL decode to uint8, no augmentation (the floor any pipeline pays).
- `course`: chapter 02's `make_dataloaders` as chapters 02-03 call it (uint8, per-image seeding with
  `seed_augmentations`): what a learner gets.
- `course_float32`: the same with `normalize_on_device=False` (A.Normalize in the workers, float32).
- `course_set_random_seed`: `course` seeded with albumentations' `Compose.set_random_seed`, as before
  2026-11-30.
- `course_unseeded`: `course`'s pipeline fed plain indices: no per-image seeding.
- `course_cv2_single_thread`: `course` with `cv2.setNumThreads(0)` in every worker.

    python bench/loader.py --n 2048 --workers 1 2                   # CPU here
    python bench/loader.py --n 8192 --workers 1 4 8 16 --out $OUT   # a 16-core GPU machine
"""

from __future__ import annotations
import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from epoch import Augmented, RawJpegs, generate, like_make_dataloaders, pipeline_rate  # noqa: E402


def _cv2_single_threaded(worker_id: int) -> None:
    "A worker_init_fn: OpenCV without its own thread pool in this worker."
    import cv2

    cv2.setNumThreads(0)


class Unseeded(torch.utils.data.Dataset):
    "A dataset fed plain indices: the course's pipeline without the per-image seeding."

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        return self.ds[i]  # an int: MelanomaDataset does not seed


class SetRandomSeed(Unseeded):
    "The course's pipeline seeded per (epoch, index) key with Compose.set_random_seed, as before."

    def __getitem__(self, key):
        epoch, i = key
        self.ds.augmentations.set_random_seed((self.ds.seed * 1_000_003 + epoch) * 10_000_019 + i)
        return self.ds[i]


def loaders(df, data, img_size, batch_size, workers, seed=0):
    "Every pipeline of the comparison, as name -> DataLoader (training side)."
    from course_lib.dataset import LoaderConfig, make_dataloaders

    settings = LoaderConfig(0, img_size, batch_size, workers, seed, check_images=False)
    course = make_dataloaders(df, data, settings)[0]
    float32 = make_dataloaders(df, data, dataclasses.replace(settings, normalize_on_device=False))[0]
    ds, paths, targets = course.dataset, course.dataset.image_paths, course.dataset.targets

    def like(dataset, **kw):  # make_dataloaders' loader settings
        return like_make_dataloaders(dataset, batch_size, workers, seed, **kw)

    return dict(
        minimal=like(Augmented(paths, targets, img_size)),
        decode_only=like(RawJpegs(paths, targets)),
        course=course,
        course_float32=float32,
        course_set_random_seed=like(SetRandomSeed(ds), sampler=course.sampler),
        course_unseeded=like(Unseeded(ds)),
        course_cv2_single_thread=like(
            ds, sampler=course.sampler, worker_init_fn=_cv2_single_threaded if workers else None
        ),
    )


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n", type=int, default=2048, help="images to generate (default: 2048)")
    p.add_argument("--file-size", type=int, default=256, help="side of the generated JPEGs (default: 256)")
    p.add_argument("--img-size", type=int, default=256, help="training resolution (default: 256)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to measure")
    p.add_argument("--rounds", type=int, default=3, help="passes per pipeline, interleaved; the best is kept")
    p.add_argument("--cache", type=Path, default=Path("bench/.data"))
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    a = p.parse_args(argv)
    import pandas as pd

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = a.cache / f"n{a.n}_{a.file_size}px"
    if not (data / "train.csv").is_file():
        generate(data, a.n, a.file_size, os.cpu_count())
    df = pd.read_csv(data / "train.csv")
    df["fold"] = np.arange(len(df)) % 10  # fold 0 validates; the training side holds 90% of the images
    res = dict(images_per_pass=int((df.fold != 0).sum()), cpu_cores=os.cpu_count(), torch=torch.__version__)
    res.update(device=str(device), img_size=a.img_size, batch_size=a.batch_size, rounds=a.rounds, rows=[])
    out = a.out / f"loader_{device.type}_{a.img_size}px_b{a.batch_size}_n{a.n}.json"
    for w in a.workers:
        dls = loaders(df, data, a.img_size, a.batch_size, w)
        best = {}
        for r in range(a.rounds):
            for name, dl in dls.items():
                rate, first = pipeline_rate(dl, device, epoch=r)
                if rate > best.get(name, (0,))[0]:
                    best[name] = (rate, first)
        row = dict(workers=w, **{f"{k}_img_s": round(v[0], 1) for k, v in best.items()})
        row.update({f"{k}_first_batch_s": round(v[1], 2) for k, v in best.items()})
        for k in best:
            row[f"{k}_vs_minimal"] = round(best[k][0] / best["minimal"][0], 3)
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
        a.out.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2) + "\n")  # after every row: a run cut short keeps it
        del dls
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
