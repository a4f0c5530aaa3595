"""Chapter 06: accumulated micro-batches take the large batch's step (without BatchNorm), and the optimizer
and scheduler step once per group, the last partial one included."""

import math

import pytest
import torch
from torch import nn
from course_lib.pytorch_loop import TrainConfig, WeightedFocalLoss, train_one_epoch
from tiny_nets import batches, small_cnn

CPU = torch.device("cpu")


def weights_after_epoch(data, accumulate, norm=False):
    torch.manual_seed(0)
    net = small_cnn(norm)
    train_one_epoch(
        net,
        data,
        WeightedFocalLoss(),
        torch.optim.SGD(net.parameters(), lr=0.5),
        CPU,
        TrainConfig(accumulate=accumulate),
    )
    return torch.cat([p.detach().flatten() for p in net.parameters()])


def split(data, k):
    return [
        (x[i : i + len(x) // k], y[i : i + len(x) // k])
        for x, y in data
        for i in range(0, len(x), len(x) // k)
    ]


def test_accumulated_micro_batches_equal_the_large_batch_without_batchnorm():
    big = batches(4, 16)
    full, accumulated = weights_after_epoch(big, 1), weights_after_epoch(split(big, 4), 4)
    assert (full - accumulated).abs().max() < 1e-5
    assert (full - weights_after_epoch(big[:1], 1)).abs().max() > 1e-3, (
        "the four steps really changed the weights"
    )


def test_batchnorm_breaks_exact_equality():
    big = batches(4, 16)
    no_bn = (weights_after_epoch(big, 1) - weights_after_epoch(split(big, 4), 4)).abs().max()
    with_bn = (
        (weights_after_epoch(big, 1, norm=True) - weights_after_epoch(split(big, 4), 4, norm=True))
        .abs()
        .max()
    )
    assert with_bn > 1e-3 and with_bn > 1000 * no_bn, (with_bn, no_bn)


@pytest.mark.parametrize("n, k, steps", [(10, 4, 3), (8, 4, 2), (5, 1, 5), (3, 8, 1)])
def test_optimizer_and_scheduler_step_once_per_group_including_the_last_partial_one(n, k, steps):
    net = nn.Linear(3 * 32 * 32, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    data = [(x.flatten(1), y) for x, y in batches(n, 2)]
    train_one_epoch(net, data, WeightedFocalLoss(), opt, CPU, TrainConfig(accumulate=k), scheduler=sched)
    assert sched.last_epoch == steps == math.ceil(n / k)
    assert all(p.grad is None for p in net.parameters()), "gradients cleared after the last step"
