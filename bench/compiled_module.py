"""What a compiled LightningModule does on this torch and Lightning: the whole module compiled with
`torch.compile(module)` (Lightning's documented way; its training_step calls self.log), beside the course's
way, `MelanomaModule(compile=True)`, which compiles the network in place and leaves self.log outside the
graph.

    python bench/compiled_module.py        # one line per way: ok, or the error's first line

Run in a runtime profile's environment (`.venv-colab-next/bin/python bench/compiled_module.py`) to see what a
learner on that torch meets; bench/RUNTIMES.md records the results.
"""

import importlib.metadata as md
import warnings
import torch
import pytorch_lightning as pl
from torch import nn


class Tiny(pl.LightningModule):
    "A two-layer classifier whose training_step logs its loss, as chapter 04's module does."

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.binary_cross_entropy_with_logits(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def fit(module) -> str:
    "Two steps of Lightning on the CPU: 'ok', or the error's type and first line."
    data = torch.utils.data.TensorDataset(torch.randn(16, 3, 2, 2), torch.randint(0, 2, (16, 1)).float())
    trainer = pl.Trainer(
        max_steps=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    try:
        trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=8))
        return "ok"
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def main() -> None:
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, pytorch-lightning {md.version('pytorch-lightning')}")
    print("torch.compile(module), self.log in training_step:", fit(torch.compile(Tiny())))
    compiled_net = Tiny()
    compiled_net.net.compile()  # the course's way: the network only, in place
    print("module.net.compile() (the course's MelanomaModule(compile=True)):", fit(compiled_net))


if __name__ == "__main__":
    main()
