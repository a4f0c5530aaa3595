"""Train chapter 04's module with Lightning on 1 process or 2 DDP processes (gloo, CPU); rank 0 saves the weights.

python tests/ddp_check.py single|ddp OUT.pt   (run by tests/test_lightning.py)
Both see the same global batches: DDP's DistributedSampler (seed 0) splits the permutation a 1-replica
DistributedSampler gives the single process. The module's network is swapped for a small CNN without dropout
or BatchNorm (SyncBatchNorm needs GPUs; per-process BatchNorm statistics would differ by design), so the two
runs differ only by the order of floating-point reductions.
"""
import sys
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from course_lib.engine import seed_everything
from course_lib.lightning import MelanomaModule

GLOBAL_BATCH, N = 16, 64

if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    seed_everything(0)
    x = torch.randn(N, 3, 32, 32)
    ds = TensorDataset(x, (x.mean((1, 2, 3)) > 0).float()[:, None])
    module = MelanomaModule("resnet18", lr=1e-3, seed=0)
    module.model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3), torch.nn.ReLU(),
                                       torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 1))
    if mode == "single":
        loader = DataLoader(ds, batch_size=GLOBAL_BATCH, sampler=DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=0))
        kw = dict(devices=1)
    else:  # Lightning swaps in DistributedSampler(num_replicas=2, seed=0); each process takes half the global batch
        loader = DataLoader(ds, batch_size=GLOBAL_BATCH // 2, shuffle=True)
        kw = dict(devices=2, strategy="ddp")
    init = {k: v.clone() for k, v in module.model.state_dict().items()}
    trainer = pl.Trainer(accelerator="cpu", max_epochs=2, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, **kw)
    trainer.fit(module, train_dataloaders=loader)
    if trainer.global_rank == 0:
        torch.save({"weights": module.model.state_dict(), "init": init, "world_size": trainer.world_size,
                    "steps": trainer.global_step}, out)
