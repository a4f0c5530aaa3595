"""How the input pipeline scales with DataLoader workers: images per second through each loader, no model.

Side by side in one run, for each worker count:
- `minimal`: PIL decode to uint8, nothing else (the floor any pipeline pays);
- `course`: chapter 02's `make_dataloaders` exactly as chapters 02-03 call it (float32, normalised in the
  workers);
- `course_uint8`: the same with `normalize_on_device=True` (uint8 batches);
- `course_uint8_unseeded`: the same pipeline fed plain indices, without the per-sample (seed, epoch, index)
  seeding;
- `course_uint8_cv0`: the same as `course_uint8` with `cv2.setNumThreads(0)` in every worker (OpenCV's own
  thread pool off; albumentations' resize and crops run in OpenCV).

    python bench/loader.py --n 512 --workers 1 2                    # CPU here
    python bench/loader.py --n 8192 --workers 1 4 8 16 --out $OUT   # a 16-core GPU machine
"""

from __future__ import annotations
import argparse
import json
import os
import sys
import time
from pathlib import Path
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from epoch import RawJpegs, generate  # noqa: E402


def _cv2_single_threaded(worker_id: int) -> None:
    "A worker_init_fn: OpenCV without its own thread pool in this worker."
    import cv2

    cv2.setNumThreads(0)


class Unseeded(torch.utils.data.Dataset):
    "A dataset fed plain indices: the course's pipeline without the per-sample seeding."

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        return self.ds[i]  # an int: MelanomaDataset skips set_random_seed


def loaders(df, data, img_size, batch_size, workers, seed=0):
    "Every pipeline of the comparison, as name -> DataLoader (training side)."
    from course_lib.dataset import make_dataloaders

    course = make_dataloaders(df, data, 0, img_size, batch_size, workers, seed, check_images=False)[0]
    uint8 = make_dataloaders(
        df, data, 0, img_size, batch_size, workers, seed, check_images=False, normalize_on_device=True
    )[0]
    same = dict(
        batch_size=batch_size,
        num_workers=workers,
        persistent_workers=workers > 0,
        pin_memory=torch.cuda.is_available(),
        generator=torch.Generator().manual_seed(seed),
    )
    unseeded = torch.utils.data.DataLoader(Unseeded(uint8.dataset), shuffle=True, **same)
    cv0 = torch.utils.data.DataLoader(
        uint8.dataset, sampler=uint8.sampler, worker_init_fn=_cv2_single_threaded if workers else None, **same
    )
    paths = uint8.dataset.image_paths
    minimal = torch.utils.data.DataLoader(RawJpegs(paths, uint8.dataset.targets), shuffle=True, **same)
    return dict(
        minimal=minimal,
        course=course,
        course_uint8=uint8,
        course_uint8_unseeded=unseeded,
        course_uint8_cv0=cv0,
    )


def images_per_second(dl, epoch: int = 0) -> tuple[float, float]:
    "(images per second over one pass, seconds to the first batch), with `set_epoch` as the engine calls it."
    if hasattr(dl.sampler, "set_epoch"):
        dl.sampler.set_epoch(epoch)
    start = time.perf_counter()
    first = None
    n = 0
    for x, _ in dl:
        first = first or time.perf_counter() - start
        n += len(x)
    return n / (time.perf_counter() - start), first


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=512, help="images to generate (default: 512)")
    p.add_argument("--file-size", type=int, default=256, help="side of the generated JPEGs (default: 256)")
    p.add_argument("--img-size", type=int, default=256, help="training resolution (default: 256)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to measure")
    p.add_argument("--rounds", type=int, default=2, help="passes per pipeline, interleaved; the best is kept")
    p.add_argument("--cache", type=Path, default=Path("bench/.data"))
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    a = p.parse_args(argv)
    import pandas as pd

    data = a.cache / f"n{a.n}_{a.file_size}px"
    if not (data / "train.csv").is_file():
        generate(data, a.n, a.file_size, os.cpu_count())
    df = pd.read_csv(data / "train.csv")
    df["fold"] = np.arange(len(df)) % 10  # fold 0 validates; the training side holds 90% of the images
    res = dict(images_per_pass=int((df.fold != 0).sum()), cpu_cores=os.cpu_count(), torch=torch.__version__)
    res.update(img_size=a.img_size, batch_size=a.batch_size, rows=[])
    for w in a.workers:
        dls = loaders(df, data, a.img_size, a.batch_size, w)
        best = {}
        for r in range(a.rounds):
            for name, dl in dls.items():
                rate, first = images_per_second(dl, epoch=r)
                if rate > best.get(name, (0,))[0]:
                    best[name] = (rate, first)
        row = dict(workers=w, **{f"{k}_img_s": round(v[0], 1) for k, v in best.items()})
        row.update({f"{k}_first_batch_s": round(v[1], 2) for k, v in best.items()})
        for k in best:
            row[f"{k}_vs_minimal"] = round(best[k][0] / best["minimal"][0], 3)
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
        del dls
    a.out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = a.out / f"loader_{device}_{a.img_size}px_b{a.batch_size}_n{a.n}.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
