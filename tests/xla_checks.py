"""Real XLA:CPU checks, each in a fresh process (the XLA runtime cannot be restarted inside pytest's process).

    python tests/xla_checks.py recompile OUT.json   # compilation counts for fixed and changing shapes
    python tests/xla_checks.py lightning OUT.json   # chapter 04's module fitted by Lightning on XLA:CPU
    python tests/xla_checks.py replicas OUT.json    # chapter 07's _run: 2 gloo-joined XLA:CPU replicas vs 1
"""
import json, os, socket, sys
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")


def recompile(out):
    "Compilation counts: three steps with one shape (compiled once), then three steps with a new shape each."
    import torch, torch_xla
    from course_lib.xla import compile_count
    dev = torch_xla.device()
    w = torch.randn(8, 1, device=dev)
    counts = []
    for bs in (4, 4, 4, 5, 6, 7):
        (torch.randn(bs, 8).to(dev) @ w).sum().item()
        counts.append(compile_count())
    return dict(counts=counts)


def lightning(out):
    "Fit MelanomaModule for 2 epochs on XLA:CPU through a stand-in for Lightning's TPU accelerator."
    import pandas as pd, pytorch_lightning as pl, torch_xla.runtime as xr
    from pytorch_lightning.accelerators import XLAAccelerator
    from course_lib.data import add_folds, make_sample_dataset
    from course_lib.engine import seed_everything
    from course_lib.lightning import MelanomaDataModule, MelanomaModule, fit_lightning

    class XLACPUAccelerator(XLAAccelerator):
        "Stands in for a TPU in tests: Lightning's XLAAccelerator counts TPU chips; this counts XLA:CPU devices."
        @staticmethod
        def auto_device_count() -> int: return xr.global_runtime_device_count()
        @staticmethod
        def is_available() -> bool: return xr.global_runtime_device_count() > 0
        @staticmethod
        def parse_devices(devices) -> int:  # the parent's version checks against the TPU chip count
            n = xr.global_runtime_device_count()
            return n if devices in ("auto", -1) else int(devices)
        @staticmethod
        def get_parallel_devices(devices) -> list:
            import torch
            return [torch.device("xla", i) for i in range(devices)]

    data = make_sample_dataset(Path(out).parent / "sample", n=96, img_size=40, seed=3)
    df = add_folds(pd.read_csv(data / "train.csv"), seed=42)
    fitted = {}
    for where, accelerator in (("xla", XLACPUAccelerator()), ("cpu", "cpu")):  # the same seeded run on both
        seed_everything(42); module = MelanomaModule("resnet18", seed=42)
        seen, losses = set(), []  # devices of the batches and weights while training; each step's loss
        module.on_train_batch_start = lambda batch, batch_idx, m=module, s=seen: s.update({str(batch[0].device), str(m.model.fc.weight.device)})
        module.on_train_batch_end = lambda outputs, batch, batch_idx, l=losses: l.append(float(outputs["loss"]))
        start = {k: v.clone() for k, v in module.state_dict().items()}
        dm = MelanomaDataModule(df, data, 0, img_size=32, batch_size=16)
        hist = fit_lightning(module, dm, epochs=2, progress=False, accelerator=accelerator, devices=1,
                             checkpoint_dir=Path(out).parent / f"ckpt-{where}")
        moved = max((v.cpu() - start[k]).abs().max().item() for k, v in module.state_dict().items() if v.is_floating_point())
        fitted[where] = dict(history=hist, devices_seen=sorted(seen), strategy=type(module.trainer.strategy).__name__,
                             step_losses=losses, largest_weight_change=moved)
    return dict(fitted["xla"], cpu=fitted["cpu"])


def _replica(rank, world, flags, port, out):
    "One gloo-joined process running chapter 07's per-core function on its own XLA:CPU device."
    import torch.distributed as dist
    from course_lib.xla import _run
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try: _run(rank, dict(flags, out=out))
    finally: dist.destroy_process_group()


def replicas(out):
    "Two replicas with batch 16 and one with batch 32 (same effective learning rate): final weights and metrics."
    import torch, torch.multiprocessing as mp
    import torch_xla.utils.serialization as xser
    from course_lib.xla import XLA_DEFAULTS
    flags = dict(XLA_DEFAULTS, task="fashion", smoke=True, arch="simple-cnn", img_size=16, epochs=1, lr=1e-3, seed=0)
    runs = {}
    for world, batch, lr in ((2, 16, 1e-3), (1, 32, 2e-3)):  # _run multiplies lr by the number of replicas
        d = Path(out).parent / f"replicas-{world}"; (d / "checkpoints").mkdir(parents=True)
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        mp.spawn(_replica, args=(world, dict(flags, batch_size=batch, lr=lr), port, str(d)), nprocs=world)
        state = xser.load(str(d / "checkpoints" / "last" / "model.pt"))
        runs[world] = dict(history=json.loads((d / "xla_history.json").read_text()), state=state)
    s1, s2 = runs[1]["state"], runs[2]["state"]
    diff = max((s1[k].float() - s2[k].float()).abs().max().item() for k in s1)
    moved = max((s1[k].float()).abs().max().item() for k in s1)
    return dict(max_weight_diff=diff, largest_weight=moved, history_1=runs[1]["history"], history_2=runs[2]["history"])


if __name__ == "__main__":
    check, out = sys.argv[1], sys.argv[2]
    result = dict(recompile=recompile, lightning=lightning, replicas=replicas)[check](out)
    Path(out).write_text(json.dumps(result, indent=2, default=str))
