"""Real XLA:CPU checks, each in a fresh process (the XLA runtime cannot be restarted inside pytest's process).

python tests/xla_checks.py recompile OUT.json   # compilation counts for fixed and changing shapes
python tests/xla_checks.py lightning OUT.json   # chapter 04's module fitted by Lightning on XLA:CPU
python tests/xla_checks.py lightning_bf16 OUT.json  # the same module in Lightning's "bf16-true" on XLA:CPU
python tests/xla_checks.py replicas OUT.json    # the XLA engine's run_replica: 2 gloo-joined replicas vs 1
python tests/xla_checks.py train OUT.json       # train_xla on both tasks, fp32 and bf16 (for the warnings
test)
python tests/xla_checks.py old_api OUT.json     # the deprecated xm.xla_device and xm.mark_step (its control)
python tests/xla_checks.py train,recompile OUT.json  # several checks, in this order, in one process: a dict
"""

import json
import os
import socket
import sys
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")


def recompile(out):
    "Compilation counts: three steps with one shape (compiled once), then three steps with a new shape each."
    import torch
    import torch_xla
    from course_lib.tpu import compile_count

    dev = torch_xla.device()
    w = torch.randn(8, 1, device=dev)
    counts = []
    for bs in (4, 4, 4, 5, 6, 7):
        (torch.randn(bs, 8).to(dev) @ w).sum().item()
        counts.append(compile_count())
    return dict(counts=counts)


def _xla_cpu_accelerator():
    "Chapter 08's stand-in for a TPU: an XLAAccelerator on the XLA:CPU devices."
    from course_lib.support.xla import xla_accelerator

    return xla_accelerator()


def _fit_module(out, where, accelerator, precision="32"):
    "Fit chapter 04's MelanomaModule, seeded, for 2 epochs; what it saw and how its weights moved."
    import pandas as pd
    from course_lib.data import add_folds
    from course_lib.support.sample import make_sample_dataset
    from course_lib.pytorch_loop import TrainConfig
    from course_lib.support.seeding import seed_everything
    from course_lib.dataset import LoaderConfig
    from course_lib.lightning import MelanomaDataModule, MelanomaModule
    from course_lib.support.trainer import fit_lightning

    data = make_sample_dataset(Path(out).parent / "sample", n=96, img_size=40, seed=3)
    df = add_folds(pd.read_csv(data / "train.csv"), seed=42)
    seed_everything(42)
    module = MelanomaModule("simple-cnn", seed=42)  # chapter 08's choice: XLA:CPU compiles it in seconds
    seen, losses, env = (
        set(),
        [],
        set(),
    )  # devices of the batches and weights while training; each step's loss; XLA_USE_BF16

    def on_batch_start(batch, batch_idx, m=module):
        seen.update({str(batch[0].device), str(next(m.model.parameters()).device)})
        env.add(os.environ.get("XLA_USE_BF16"))

    module.on_train_batch_start = on_batch_start

    def on_batch_end(outputs, batch, batch_idx):
        losses.append(float(outputs["loss"]))

    module.on_train_batch_end = on_batch_end
    grad_norms = []  # the first step's gradient norm: same weights and batch on both devices

    def before_step(optimizer):
        import torch

        if not grad_norms:
            grads = [q.grad.detach().float().norm() for q in module.parameters() if q.grad is not None]
            grad_norms.append(torch.stack(grads).norm().item())

    module.on_before_optimizer_step = before_step
    start = {k: v.clone() for k, v in module.state_dict().items()}
    dm = MelanomaDataModule(df, data, LoaderConfig(img_size=32, batch_size=16))
    hist = fit_lightning(
        module,
        dm,
        TrainConfig(
            epochs=2, precision=precision, progress=False, checkpoint_dir=Path(out).parent / f"ckpt-{where}"
        ),
        accelerator=accelerator,
        devices=1,
    )
    moved = max(
        (v.cpu() - start[k]).abs().max().item()
        for k, v in module.state_dict().items()
        if v.is_floating_point()
    )
    trainer = module.trainer
    return dict(
        history=hist,
        devices_seen=sorted(seen),
        strategy=type(trainer.strategy).__name__,
        precision_plugin=type(trainer.precision_plugin).__name__,
        precision=trainer.precision_plugin.precision,
        step_losses=losses,
        first_grad_norm=grad_norms[0] if grad_norms else None,
        largest_weight_change=moved,
        xla_use_bf16_while_training=sorted(map(str, env)),
    )


def lightning(out):
    """Fit MelanomaModule for 2 epochs on XLA:CPU (through the stand-in accelerator) and on the CPU, seeded
    the same."""
    xla = _fit_module(out, "xla", _xla_cpu_accelerator())
    return dict(xla, cpu=_fit_module(out, "cpu", "cpu"))


def lightning_bf16(out):
    """The same fit on XLA:CPU with the course's bf16: Lightning's 'bf16-true' (a fresh process: torch_xla
    reads XLA_USE_BF16 once); the CPU fit to compare with is lightning()'s."""
    return _fit_module(out, "xla-bf16", _xla_cpu_accelerator(), precision="bf16-mixed")


class GlooReplicas:
    """The collective operations train_replica calls (torch_xla's world size, ordinal, optimizer step and
    all-gather) over torch.distributed's gloo backend: real replicas as processes on a CPU machine."""

    def optimizer_step(self, optimizer, *args, **kwargs):
        "Average every gradient over the processes (on the CPU, where gloo works), then step."
        import torch.distributed as dist

        world = dist.get_world_size()
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.detach().cpu()
                dist.all_reduce(g)
                p.grad.copy_((g / world).to(p.grad.device))
        optimizer.step()

    def all_gather(self, tensor, dim=0, **kwargs):
        import torch
        import torch.distributed as dist

        mine = tensor.detach().cpu()
        parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, mine)
        return torch.cat(parts, dim).to(tensor.device)

    def install(self):
        "Put these operations where train_replica looks them up: torch_xla's own modules."
        import torch.distributed as dist
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr

        xr.world_size, xr.global_ordinal = dist.get_world_size, dist.get_rank
        xm.optimizer_step, xm.all_gather = self.optimizer_step, self.all_gather


def _replica(rank, world, flags, port, out):
    "One gloo-joined process running chapter 08's per-replica function on its own XLA:CPU device."
    import torch.distributed as dist
    from course_lib.support.xla import run_replica

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        GlooReplicas().install()
        run_replica(rank, dict(flags, out=out))
    finally:
        dist.destroy_process_group()


def replicas(out):
    """Two replicas with batch 16 and one with batch 32 (same effective learning rate): final weights and
    metrics."""
    import torch.multiprocessing as mp
    import torch_xla  # noqa: F401  imported once, before the replicas fork
    from course_lib.pytorch_loop import load_checkpoint
    from course_lib.support.xla import XLA_DEFAULTS

    flags = dict(
        XLA_DEFAULTS, task="fashion", smoke=True, arch="simple-cnn", img_size=16, epochs=1, lr=1e-3, seed=0
    )
    runs = {}
    for world, batch, lr in (
        (2, 16, 1e-3),
        (1, 32, 2e-3),
    ):  # run_replica multiplies lr by the number of replicas
        d = Path(out).parent / f"replicas-{world}"
        (d / "checkpoints").mkdir(parents=True)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        args = (world, dict(flags, batch_size=batch, lr=lr), port, str(d))
        if world == 1:  # in this process, whose XLA device nothing has touched: one Python start fewer
            _replica(0, *args)
        else:
            # forked, as torch_xla.launch starts replicas: torch_xla is imported here, no device touched yet
            mp.start_processes(_replica, args=args, nprocs=world, start_method="fork")
        state = load_checkpoint(d / "checkpoints" / "last.pt")["model"]
        runs[world] = dict(history=json.loads((d / "xla_history.json").read_text()), state=state)
    s1, s2 = runs[1]["state"], runs[2]["state"]
    diff = max((s1[k].float() - s2[k].float()).abs().max().item() for k in s1)
    moved = max((s1[k].float()).abs().max().item() for k in s1)
    return dict(
        max_weight_diff=diff, largest_weight=moved, history_1=runs[1]["history"], history_2=runs[2]["history"]
    )


def train(out):
    "train_xla as the course runs it: FashionMNIST in fp32 and bf16, the melanoma task for 2 epochs."
    from course_lib.support.sample import make_sample_dataset
    from course_lib.dataset import LoaderConfig
    from course_lib.pytorch_loop import TrainConfig
    from course_lib.support.xla import train_xla

    d = Path(out).parent
    data = make_sample_dataset(d / "sample", n=60, img_size=40, seed=1)
    runs = {}
    for name, precision, kw, workers in (
        ("fashion-32", "32", dict(task="fashion", smoke=True, arch="simple-cnn"), 0),
        ("fashion-bf16", "bf16-mixed", dict(task="fashion", smoke=True, arch="simple-cnn"), 0),
        ("melanoma", "32", dict(task="melanoma", data_dir=str(data), arch="simple-cnn"), 2),
    ):
        cfg = TrainConfig(epochs=2, lr=1e-3, precision=precision)
        loader = LoaderConfig(img_size=16, batch_size=16, num_workers=workers, normalize_on_device=False)
        runs[name] = train_xla(cfg, loader, out=str(d / name), **kw)
    return runs


def _old_api(index):
    "The deprecated calls the course no longer makes, in a launched replica."
    import torch_xla.core.xla_model as xm

    xm.xla_device()
    xm.mark_step()


def old_api(out):
    """A control for the warnings test: the old names, launched the way train_xla launches run_replica, do
    print warnings."""
    import torch_xla

    torch_xla.launch(_old_api, start_method="fork")
    return {}


if __name__ == "__main__":
    names, out = sys.argv[1].split(","), sys.argv[2]
    checks = dict(
        recompile=recompile,
        lightning=lightning,
        lightning_bf16=lightning_bf16,
        replicas=replicas,
        train=train,
        old_api=old_api,
    )
    results = {name: checks[name](out) for name in names}
    result = results[names[0]] if len(names) == 1 else results
    Path(out).write_text(json.dumps(result, indent=2, default=str))
