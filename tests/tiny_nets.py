"""Small networks and random batches for the tests of chapters 05 and 06."""

import torch
from torch import nn


def small_cnn(norm=False):
    bn = (lambda c: nn.BatchNorm2d(c)) if norm else (lambda c: nn.Identity())
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        bn(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2),
        bn(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 1),
    )


def batches(n, size, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(size, 3, 32, 32, generator=g), (torch.rand(size, 1, generator=g) < 0.3).float())
        for _ in range(n)
    ]
