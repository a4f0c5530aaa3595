"""Train chapter 04's module with Lightning on 1 process or 2 DDP processes (gloo, CPU); rank 0 saves the
results.

python tests/ddp_check.py single|ddp OUT.pt   (tests/test_lightning.py runs ddp this way, and calls
main('single', ...) in its own process)
Both see the same global batches: DDP's DistributedSampler (seed 0) splits the permutation a 1-replica
DistributedSampler gives the single process. The module's network is swapped for a small CNN without dropout
or BatchNorm (SyncBatchNorm needs GPUs; per-process BatchNorm statistics would differ by design), so the two
runs differ only by the order of floating-point reductions. Validation has 64 images, which two processes
split evenly (no padding), so the AUC gathered from both must equal the AUC of the whole set.
"""

import sys
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from torchmetrics.functional.classification import binary_auroc
from course_lib.support.seeding import seed_everything
from course_lib.lightning import MelanomaModule

GLOBAL_BATCH, N, N_VALID = 16, 64, 64


def dataset(n):
    x = torch.randn(n, 3, 32, 32)
    return TensorDataset(x, (x.mean((1, 2, 3)) > 0).float()[:, None])


@torch.no_grad()
def probabilities(model, ds):
    model.eval()
    return torch.sigmoid(model(ds.tensors[0])).flatten(), ds.tensors[1].flatten().long()


def main(mode, out):
    "Train in `mode` ('single': this process, 'ddp': Lightning starts a second one) and save as rank 0."
    seed_everything(0)
    ds, valid = dataset(N), dataset(N_VALID)
    module = MelanomaModule("resnet18", lr=1e-3, seed=0)
    module.model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 1),
    )
    valid_loader = DataLoader(valid, batch_size=8)
    if mode == "single":
        loader = DataLoader(
            ds,
            batch_size=GLOBAL_BATCH,
            sampler=DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=0),
        )
        kw = dict(devices=1)
    # Lightning swaps in DistributedSampler(num_replicas=2, seed=0); each process takes half the global batch
    else:
        loader = DataLoader(ds, batch_size=GLOBAL_BATCH // 2, shuffle=True)
        kw = dict(devices=2, strategy="ddp")
    init = {k: v.clone() for k, v in module.model.state_dict().items()}
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        **kw,
    )
    trainer.fit(module, train_dataloaders=loader, val_dataloaders=valid_loader)
    if trainer.global_rank == 0:
        probs, targets = probabilities(module.model, valid)
        torch.save(
            {
                "weights": module.model.state_dict(),
                "init": init,
                "world_size": trainer.world_size,
                "steps": trainer.global_step,
                "logged_auc": float(trainer.callback_metrics["valid_auc"]),
                "whole_auc": binary_auroc(probs, targets).item(),
                "rank0_half_auc": binary_auroc(probs[0::2], targets[0::2]).item(),
            },
            out,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
