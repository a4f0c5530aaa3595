"""Chapters 06-11's exercise checks against the mistakes learners make: each wrong answer gets a ✗ line that
names its mistake, and right answers written unlike the worked solutions pass."""

import contextlib
import math

import numpy as np
import pandas as pd
import pytest
import torch
from course_lib.exercises import verdict
from torch.utils.data import DistributedSampler

WRONG, RIGHT = [], []


def wrong(number: str, name: str, message: str):
    "Register the decorated answer as a typical mistake in exercise `number`, with what its check must say."

    def register(answer):
        WRONG.append(pytest.param(number, answer, message, id=f"{number}-{name}"))
        return answer

    return register


def right(number: str, name: str):
    "Register the decorated answer as a right answer to exercise `number`, unlike the worked solution."

    def register(answer):
        RIGHT.append(pytest.param(number, answer, id=f"{number}-{name}"))
        return answer

    return register


# --- 6.1: an accumulation loop that matches the large batch ----------------------------------------------


@wrong(
    "6.1", "loss-not-divided-by-k", "the step moved the weights K times as far as one step on the large batch"
)
def acc_not_divided(model, loss_fn, optimizer, micro_batches, k):
    optimizer.zero_grad()
    steps = 0
    for i, (x, y) in enumerate(micro_batches):
        loss_fn(model(x), y).backward()
        if (i + 1) % k == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    return steps


@wrong("6.1", "post-loop", "the step moved the weights K times as far as one step on the large batch")
def acc_post_loop(model, loss_fn, optimizer, micro_batches, k):
    optimizer.zero_grad()
    steps = 0
    for b_idx, (x, y) in enumerate(micro_batches):
        loss = loss_fn(model(x), y)
        loss.backward()
        if (b_idx + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    return steps


@wrong(
    "6.1",
    "no-step-after-last",
    "5 micro-batches with K=2 took 2 optimizer steps: the last micro-batch was never applied",
)
def acc_no_last_step(model, loss_fn, optimizer, micro_batches, k):
    optimizer.zero_grad()
    steps = 0
    for i, (x, y) in enumerate(micro_batches):
        (loss_fn(model(x), y) / k).backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    return steps


@wrong(
    "6.1", "stale-grad-not-cleared", "a gradient that was in .grad before the call went into the first step"
)
def acc_stale_grad(model, loss_fn, optimizer, micro_batches, k):
    steps = 0
    for i, (x, y) in enumerate(micro_batches):
        (loss_fn(model(x), y) / k).backward()
        if (i + 1) % k == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    return steps


@wrong("6.1", "steps-at-i-mod-k", "3 micro-batches with K=3 took 2 optimizer steps, not 1")
def acc_step_off_by_one(model, loss_fn, optimizer, micro_batches, k):
    optimizer.zero_grad()
    steps = 0
    for i, (x, y) in enumerate(micro_batches):
        (loss_fn(model(x), y) / k).backward()
        if i % k == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    return steps


@wrong("6.1", "never-cleared-after-step", "6 micro-batches with K=2 do not give 3 large-batch steps")
def acc_never_cleared(model, loss_fn, optimizer, micro_batches, k):
    optimizer.zero_grad()
    steps = 0
    for i, (x, y) in enumerate(micro_batches):
        (loss_fn(model(x), y) / k).backward()
        if (i + 1) % k == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            steps += 1
    return steps


@wrong("6.1", "cleared-every-micro-batch", "3 micro-batches with K=3 do not give one step on the large batch")
def acc_cleared_every_batch(model, loss_fn, optimizer, micro_batches, k):
    steps = 0
    for i, (x, y) in enumerate(micro_batches):
        optimizer.zero_grad()
        (loss_fn(model(x), y) / k).backward()
        if (i + 1) % k == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            steps += 1
    return steps


@wrong("6.1", "cleared-before-group-not-after", "a gradient was left in .grad after the last micro-batch")
def acc_cleared_before_group(model, loss_fn, optimizer, micro_batches, k):
    steps = 0
    for i, (x, y) in enumerate(micro_batches):
        if i % k == 0:
            optimizer.zero_grad()
        (loss_fn(model(x), y) / k).backward()
        if (i + 1) % k == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            steps += 1
    return steps


@right("6.1", "groups-divided-by-their-size")
def acc_by_groups(model, loss_fn, optimizer, micro_batches, k):
    "Walks the list group by group, dividing by each group's own size."
    model.zero_grad(set_to_none=True)
    groups = [micro_batches[i : i + k] for i in range(0, len(micro_batches), k)]
    for group in groups:
        for x, y in group:
            (loss_fn(model(x), y) / len(group)).backward()
        optimizer.step()
        model.zero_grad(set_to_none=True)
    return len(groups)


@right("6.1", "autograd-grad-summed-by-hand")
def acc_manual_sum(model, loss_fn, optimizer, micro_batches, k):
    "Sums the micro-batches' gradients by hand with autograd.grad, then sets .grad and steps."
    params = list(model.parameters())
    steps, total = 0, None
    for i, (x, y) in enumerate(micro_batches):
        grads = torch.autograd.grad(loss_fn(model(x), y) / k, params)
        total = grads if total is None else [a + b for a, b in zip(total, grads)]
        if (i + 1) % k == 0 or i + 1 == len(micro_batches):
            for p, g in zip(params, total):
                p.grad = g
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps, total = steps + 1, None
    return steps


# --- 6.2: the smallest micro-batch BatchNorm tolerates ---------------------------------------------------


def _accumulated(model, loss_fn, x, y, size, divide=True, clear=True):
    if clear:
        model.zero_grad()
    k = len(x) // size
    for xs, ys in zip(x.split(size), y.split(size)):
        loss = loss_fn(model(xs), ys)
        (loss / k if divide else loss).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def _distance(a, b):
    return ((a - b).norm() / b.norm()).item()


@wrong(
    "6.2",
    "loss-not-divided-by-k",
    "without BatchNorm every micro-batch size gives the whole batch's gradient, yet the answer was 12",
)
def smallest_not_divided(model, loss_fn, x, y, tolerance):
    whole = _accumulated(model, loss_fn, x, y, len(x), divide=False)
    for m in range(1, len(x) + 1):
        if len(x) % m == 0:
            if _distance(_accumulated(model, loss_fn, x, y, m, divide=False), whole) <= tolerance:
                return m


@wrong(
    "6.2",
    "largest-size-within",
    "without BatchNorm every micro-batch size gives the whole batch's gradient, yet the answer was 12",
)
def smallest_largest_first(model, loss_fn, x, y, tolerance):
    whole = _accumulated(model, loss_fn, x, y, len(x))
    within = [m for m in range(1, len(x) + 1) if len(x) % m == 0]
    within = [m for m in within if _distance(_accumulated(model, loss_fn, x, y, m), whole) <= tolerance]
    return max(within)


@wrong(
    "6.2",
    "batchnorm-in-eval-mode",
    "with BatchNorm, micro-batches of 1 give a gradient 0.73 away from the whole batch's, more than the "
    "tolerance 0.2",
)
def smallest_eval_mode(model, loss_fn, x, y, tolerance):
    model.eval()
    whole = _accumulated(model, loss_fn, x, y, len(x))
    for m in range(1, len(x) + 1):
        if len(x) % m == 0 and _distance(_accumulated(model, loss_fn, x, y, m), whole) <= tolerance:
            return m


@wrong(
    "6.2",
    "gradients-never-cleared",
    "without BatchNorm every micro-batch size gives the whole batch's gradient, yet the answer was 12",
)
def smallest_no_zero_grad(model, loss_fn, x, y, tolerance):
    whole = _accumulated(model, loss_fn, x, y, len(x)).clone()
    for m in range(1, len(x) + 1):
        if len(x) % m == 0:
            if _distance(_accumulated(model, loss_fn, x, y, m, clear=False), whole) <= tolerance:
                return m
    return len(x)  # the whole batch is always within any tolerance


@right("6.2", "autograd-grad-and-torch-dist")
def smallest_by_autograd(model, loss_fn, x, y, tolerance):
    "Gradients from autograd.grad, sizes from the divisors, smallest first."
    params = list(model.parameters())

    def gradient(size):
        k = len(x) // size
        pairs = zip(x.split(size), y.split(size))
        parts = [torch.autograd.grad(loss_fn(model(xs), ys) / k, params) for xs, ys in pairs]
        return torch.cat([sum(gs).flatten() for gs in zip(*parts)])

    whole = gradient(len(x))
    divisors = sorted(m for m in range(1, len(x) + 1) if len(x) % m == 0)
    return next(m for m in divisors if torch.dist(gradient(m), whole) <= tolerance * whole.norm())


# --- 6.3: accumulation under DDP, synced once ------------------------------------------------------------


def _ddp_micro_steps(ddp_model, micro_batches, loss_fn, divide=True, synced=lambda i, n: i == n - 1):
    "Forward and backward over the micro-batches, each inside no_sync() unless `synced(i, n)`; the loss."
    n, total = len(micro_batches), 0.0
    for i, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if synced(i, n) else ddp_model.no_sync():
            loss = loss_fn(ddp_model(x), y) / (n if divide else 1)
            loss.backward()
        total += loss.item() / (1 if divide else n)
    return total


@wrong(
    "6.3",
    "no-sync-never-used",
    "the gradients were all-reduced 4 times in one step: run every micro-batch but the last inside "
    "ddp_model.no_sync()",
)
def ddp_syncs_every_micro_batch(ddp_model, micro_batches, loss_fn, optimizer):
    loss = _ddp_micro_steps(ddp_model, micro_batches, loss_fn, synced=lambda i, n: True)
    optimizer.step()
    optimizer.zero_grad()
    return loss


@wrong(
    "6.3",
    "every-micro-batch-in-no-sync",
    "the gradients were never all-reduced: the last micro-batch's forward and backward must run outside "
    "no_sync()",
)
def ddp_never_syncs(ddp_model, micro_batches, loss_fn, optimizer):
    loss = _ddp_micro_steps(ddp_model, micro_batches, loss_fn, synced=lambda i, n: False)
    optimizer.step()
    optimizer.zero_grad()
    return loss


@wrong(
    "6.3",
    "last-forward-inside-no-sync",
    "the gradients were never all-reduced: the last micro-batch's forward and backward must run outside "
    "no_sync()",
)
def ddp_last_forward_unsynced(ddp_model, micro_batches, loss_fn, optimizer):
    n, total = len(micro_batches), 0.0
    for i, (x, y) in enumerate(micro_batches):
        with ddp_model.no_sync():
            loss = loss_fn(ddp_model(x), y) / n
        with contextlib.nullcontext() if i == n - 1 else ddp_model.no_sync():
            loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad()
    return total


@wrong(
    "6.3",
    "losses-not-divided",
    "the step differs from one step on the whole batch: divide each micro-batch's loss by their number",
)
def ddp_losses_not_divided(ddp_model, micro_batches, loss_fn, optimizer):
    loss = _ddp_micro_steps(ddp_model, micro_batches, loss_fn, divide=False)
    optimizer.step()
    optimizer.zero_grad()
    return loss


@wrong(
    "6.3",
    "gradients-kept",
    "the second step differs from two large-batch steps: clear the gradients after a step",
)
def ddp_gradients_kept(ddp_model, micro_batches, loss_fn, optimizer):
    loss = _ddp_micro_steps(ddp_model, micro_batches, loss_fn)
    optimizer.step()
    return loss


@wrong(
    "6.3",
    "steps-every-micro-batch",
    "the gradients were all-reduced 4 times in one step: run every micro-batch but the last inside "
    "ddp_model.no_sync()",
)
def ddp_steps_every_micro_batch(ddp_model, micro_batches, loss_fn, optimizer):
    total = 0.0
    for x, y in micro_batches:
        loss = loss_fn(ddp_model(x), y) / len(micro_batches)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total += loss.item()
    return total


@right("6.3", "no-sync-around-all-but-the-last")
def ddp_one_no_sync_block(ddp_model, micro_batches, loss_fn, optimizer):
    "One no_sync() block around the first micro-batches, the last outside it; zeroed before, not after."
    optimizer.zero_grad()
    *first, (x, y) = micro_batches
    n, total = len(micro_batches), 0.0
    with ddp_model.no_sync():
        for xs, ys in first:
            loss = loss_fn(ddp_model(xs), ys) / n
            loss.backward()
            total += loss.item()
    loss = loss_fn(ddp_model(x), y) / n
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return total + loss.item()


# --- 7.1: when compiling pays back -----------------------------------------------------------------------


@wrong(
    "7.1",
    "chapter-formula",
    "break_even_calls(30.0, 0.05, 0.03) = 1500, one call too many: the first compiled call also does one "
    "call's work",
)
def calls_chapter_formula(first_call_s, eager_s, compiled_s):
    if compiled_s >= eager_s:
        return math.inf
    return math.ceil(first_call_s / (eager_s - compiled_s))


@wrong(
    "7.1",
    "rounded-down",
    "after break_even_calls(30.0, 0.05, 0.03) = 1498 calls the compiled run is still behind",
)
def calls_floor(first_call_s, eager_s, compiled_s):
    if compiled_s >= eager_s:
        return math.inf
    return math.floor((first_call_s - compiled_s) / (eager_s - compiled_s))


@wrong(
    "7.1",
    "not-rounded",
    "break_even_calls(30.0, 0.05, 0.03) = 1498.4999999999995: a number of calls is a whole number",
)
def calls_not_rounded(first_call_s, eager_s, compiled_s):
    if compiled_s >= eager_s:
        return math.inf
    return (first_call_s - compiled_s) / (eager_s - compiled_s)


@wrong(
    "7.1",
    "no-inf-for-a-slower-compiled-call",
    "break_even_calls(5.0, 0.02, 0.03) gave -497: a compiled call that is not faster never pays back: "
    "return math.inf",
)
def calls_never_inf(first_call_s, eager_s, compiled_s):
    return math.ceil((first_call_s - compiled_s) / (eager_s - compiled_s))


@wrong(
    "7.1",
    "equal-times-divide-by-zero",
    "break_even_calls(5.0, 0.02, 0.02) gave ZeroDivisionError: a compiled call that is not faster never "
    "pays back: return math.inf",
)
def calls_equal_times_divide_by_zero(first_call_s, eager_s, compiled_s):
    if compiled_s > eager_s:
        return math.inf
    return math.ceil((first_call_s - compiled_s) / (eager_s - compiled_s))


@right("7.1", "totals-added-call-by-call")
def calls_counted(first_call_s, eager_s, compiled_s):
    "Adds up both totals call by call until the compiled one has caught up."
    if eager_s <= compiled_s:
        return math.inf
    n, compiled_total, eager_total = 1, first_call_s, eager_s
    while compiled_total > eager_total:
        n, compiled_total, eager_total = n + 1, compiled_total + compiled_s, eager_total + eager_s
    return n


# --- 7.2: a backend that counts operations ---------------------------------------------------------------


def _compiled_counts(fn, x, count):
    counts = []

    def backend(gm, example_inputs):
        counts.append(count(gm))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(x)
    return counts


@wrong(
    "7.2",
    "inputs-and-output-counted",
    "the count includes the graph's inputs and its output: count the operations only",
)
def counts_all_nodes(fn, x):
    return _compiled_counts(fn, x, lambda gm: len(gm.graph.nodes))


def _operations(gm):
    return sum(n.op not in ("placeholder", "output") for n in gm.graph.nodes)


@wrong("7.2", "one-total", "a function with a graph break gave one total: give one count per graph")
def counts_total(fn, x):
    return [sum(_compiled_counts(fn, x, _operations))]


@wrong(
    "7.2",
    "call-function-only",
    "op_counts gave [2, 1] for a function with one graph break: not the operations in each graph",
)
def counts_call_function_only(fn, x):
    return _compiled_counts(fn, x, lambda gm: sum(n.op == "call_function" for n in gm.graph.nodes))


@wrong("7.2", "int-not-list", "op_counts returned a int: return a list, one count per graph")
def counts_int(fn, x):
    return sum(_compiled_counts(fn, x, _operations))


_SEEN_GRAPHS = []


def _remembering_backend(gm, example_inputs):
    _SEEN_GRAPHS.append(_operations(gm))
    return gm.forward


@wrong(
    "7.2",
    "list-outside-the-call",
    "op_counts also returned the graphs of its previous call: each call should count only its own",
)
def counts_module_list(fn, x):
    torch._dynamo.reset()
    torch.compile(fn, backend=_remembering_backend)(x)
    return _SEEN_GRAPHS


class _Counter:
    "A backend object: the graphs it received, each as its number of operations."

    def __init__(self):
        self.counts = []

    def __call__(self, gm, example_inputs):
        inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        outputs = [n for n in gm.graph.nodes if n.op == "output"]
        self.counts.append(len(gm.graph.nodes) - len(inputs) - len(outputs))
        return gm


@right("7.2", "backend-object")
def counts_with_object(fn, x):
    "A callable object as the backend, the graph module itself returned to run."
    counter = _Counter()
    torch._dynamo.reset()
    torch.compile(fn, backend=counter, fullgraph=False)(x)
    return counter.counts


# --- 7.3: a branch that stays in the graph ---------------------------------------------------------------


@wrong(
    "7.3",
    "python-if",
    "Dynamo breaks the graph at a Python if on a tensor's value: decide with a tensor operation instead",
)
def shrink_python_if(x):
    if x.abs().max() > 1:
        return x / x.abs().max()
    return x


@wrong(
    "7.3",
    "item-in-compiled-function",
    "Dynamo breaks the graph at .item(), which takes a number out of the graph: decide with a tensor "
    "operation instead",
)
def shrink_item(x):
    largest = x.abs().max().item()
    return x / largest if largest > 1 else x


@wrong(
    "7.3",
    "max-not-abs",
    "a tensor whose largest absolute value is 5 (a -5) was not scaled: compare absolute values",
)
def shrink_max_not_abs(x):
    largest = x.max()
    return torch.where(largest > 1, x / largest, x)


@wrong(
    "7.3",
    "elementwise-condition",
    "for values up to 4, the result is not the input divided by its largest absolute value",
)
def shrink_elementwise(x):
    return torch.where(x.abs() > 1, x / x.abs().max(), x)


@wrong("7.3", "always-divides", "a tensor within [-1, 1] should come back unchanged")
def shrink_always(x):
    return x / x.abs().max()


@wrong(
    "7.3", "clamped", "for values up to 4, the result is not the input divided by its largest absolute value"
)
def shrink_clamped(x):
    return x.clamp(-1, 1)


@right("7.3", "divide-by-clamped-max")
def shrink_divide_by_at_least_one(x):
    "Divides by the largest absolute value, or by 1 when that is smaller."
    return x / x.abs().amax().clamp(min=1)


@right("7.3", "maximum-with-one")
def shrink_maximum(x):
    "Divides by torch.maximum of the largest absolute value and a tensor of one: no condition at all."
    return x / torch.maximum(torch.linalg.vector_norm(x, ord=math.inf), torch.ones((), dtype=x.dtype))


# --- 7.4: compile the block once, not the model ----------------------------------------------------------


@wrong(
    "7.4",
    "whole-model",
    "a graph of 26 operations was compiled: that is the whole model, compile each block so that one graph "
    "serves all six",
)
def compile_whole_model(model, backend="inductor"):
    return torch.compile(model, backend=backend)


@wrong(
    "7.4",
    "result-dropped",
    "nothing was compiled: torch.compile returns a new module, which the loop dropped; call block.compile() "
    "to compile the block in place",
)
def compile_into_loop_variable(model, backend="inductor"):
    for block in model.blocks:
        block = torch.compile(block, backend=backend)  # noqa: PLW2901
    return model


@wrong(
    "7.4",
    "wrapper-put-back",
    "the checkpoint's names changed (blocks.0._orig_mod.linear.bias): compile each block in place with "
    "block.compile()",
)
def compile_wrappers_into_the_list(model, backend="inductor"):
    for i, block in enumerate(model.blocks):
        model.blocks[i] = torch.compile(block, backend=backend)
    return model


@wrong("7.4", "first-block-only", "1 of the 6 blocks ran compiled code: compile every block")
def compile_first_block(model, backend="inductor"):
    model.blocks[0].compile(backend=backend)
    return model


@right("7.4", "dynamic-sizes-by-index")
def compile_blocks_dynamic(model, backend="inductor"):
    for i in range(len(model.blocks)):
        model.blocks[i].compile(backend=backend, dynamic=True)
    return model


# --- 8.1: shard a list like DistributedSampler -----------------------------------------------------------


@wrong(
    "8.1",
    "no-padding",
    "10 items on 3 replicas gave shards of [4, 3, 3] items: every replica must run the same number of "
    "steps, so every shard needs the same size",
)
def shard_no_padding(items, world, rank):
    return items[rank::world]


@wrong(
    "8.1",
    "contiguous-blocks",
    "rank 1 of 3 got a block of neighbouring items: the sampler deals the items out one at a time",
)
def shard_blocks(items, world, rank):
    size = math.ceil(len(items) / world)
    padded = (items * math.ceil(size * world / len(items)))[: size * world]
    return padded[rank * size : (rank + 1) * size]


@wrong("8.1", "drops-the-rest", "1 of the 10 items went to no replica: the sampler pads, it does not drop")
def shard_dropped(items, world, rank):
    return items[: len(items) // world * world][rank::world]


@wrong(
    "8.1",
    "pads-once",
    "3 items on 8 replicas: rank 6 got []; the padding repeats the list as often as needed",
)
def shard_pads_once(items, world, rank):
    total = math.ceil(len(items) / world) * world
    padded = items + items[: total - len(items)]
    return padded[rank::world]


@wrong(
    "8.1",
    "pads-from-the-end",
    "rank 1 of 3 got ['image_1', 'image_4', 'image_7', 'image_8'] from 10 items: not what "
    "DistributedSampler(shuffle=False) hands it",
)
def shard_pads_from_end(items, world, rank):
    total = math.ceil(len(items) / world) * world
    padded = items + items[len(items) - (total - len(items)) :]
    return padded[rank::world]


@wrong("8.1", "positions-not-items", "shard returned positions: return the items themselves")
def shard_positions(items, world, rank):
    total = math.ceil(len(items) / world) * world
    return [i % len(items) for i in range(rank, total, world)]


@right("8.1", "modulo-positions")
def shard_modulo(items, world, rank):
    "Walks the padded positions of this replica, wrapping around the list."
    per_replica = -(-len(items) // world)
    return [items[(rank + j * world) % len(items)] for j in range(per_replica)]


@right("8.1", "the-sampler-itself")
def shard_with_sampler(items, world, rank):
    "Asks DistributedSampler itself."
    return [items[i] for i in DistributedSampler(items, num_replicas=world, rank=rank, shuffle=False)]


# --- 8.2: a short last batch that compiles nothing new ------------------------------------------------------


@wrong("8.2", "not-padded", "a batch of 5 came back with 5 rows: pad it to 8")
def padded_batch_not_padded(x, y, batch_size):
    return x, y, torch.ones(len(x))


@wrong("8.2", "padding-weighs-one", "weight should be 1 for each real row and 0 for each padded one")
def padded_batch_weighs_the_padding(x, y, batch_size):
    pad = batch_size - len(x)
    x = torch.cat([x, x.new_zeros(pad, *x.shape[1:])])
    return x, torch.cat([y, y.new_zeros(pad, *y.shape[1:])]), torch.ones(batch_size)


@wrong("8.2", "targets-not-padded", "x came back with 8 rows and y with 5: pad the targets too")
def padded_batch_pads_x_only(x, y, batch_size):
    pad = batch_size - len(x)
    weight = torch.cat([torch.ones(len(x)), torch.zeros(pad)])
    return torch.cat([x, x.new_zeros(pad, *x.shape[1:])]), y, weight


@wrong("8.2", "weight-as-a-column", "weight has shape (8, 1): one number per row, shape (batch_size,)")
def padded_batch_weight_column(x, y, batch_size):
    pad = batch_size - len(x)
    weight = torch.cat([torch.ones(len(x), 1), torch.zeros(pad, 1)])
    return (
        torch.cat([x, x.new_zeros(pad, *x.shape[1:])]),
        torch.cat([y, y.new_zeros(pad, *y.shape[1:])]),
        weight,
    )


@right("8.2", "repeats-rows-with-weight-zero")
def padded_batch_by_repeating(x, y, batch_size):
    "Pads with copies of the first rows, whose weight 0 keeps them out of the loss."
    rows = torch.arange(batch_size) % len(x)
    return x[rows], y[rows], (torch.arange(batch_size) < len(x)).float()


# --- 8.3: a metric without data-dependent shapes --------------------------------------------------------


@wrong(
    "8.3",
    "boolean-index",
    "compilations after each batch: [3, 4, 5, 6, 7, 7]: each new count of malignant images compiled a graph, "
    "because a boolean index gives a shape that depends on the data; weight by the targets instead",
)
def means_by_boolean_index(logits, targets):
    return torch.stack([logits[targets == 0].mean(), logits[targets == 1].mean()])


@wrong("8.3", "malignant-first", "the means came back malignant first: return the benign images' mean first")
def means_malignant_first(logits, targets):
    malignant = targets.float()
    benign = 1 - malignant
    return torch.stack([(logits * malignant).sum() / malignant.sum(), (logits * benign).sum() / benign.sum()])


@wrong(
    "8.3",
    "zero-for-a-missing-class",
    "a batch without a malignant image gave [-0.5551, 0.0]: its malignant mean is NaN (0 / 0), and the "
    "benign mean a number",
)
def means_clamped(logits, targets):
    malignant = targets.float()
    benign = 1 - malignant
    return torch.stack(
        [
            (logits * benign).sum() / benign.sum().clamp(min=1),
            (logits * malignant).sum() / malignant.sum().clamp(min=1),
        ]
    )


@wrong(
    "8.3",
    "divided-by-the-batch",
    "for 5 benign and 3 malignant images the means are [0.1748, 0.5854], not [0.2797, 1.561]",
)
def means_over_the_batch(logits, targets):
    malignant = targets.float()
    return torch.stack([(logits * (1 - malignant)).mean(), (logits * malignant).mean()])


@right("8.3", "where-and-one-hot")
def means_by_one_hot(logits, targets):
    onehot = torch.nn.functional.one_hot(targets.long(), 2).float()  # (batch, 2)
    return (logits[:, None] * onehot).sum(0) / onehot.sum(0)


# --- 8.4: the loss of every step, brought over once -----------------------------------------------------


@wrong(
    "8.4",
    "item-every-step",
    "the losses came to the host in 6 transfers: each one waits for the device to finish; keep the losses "
    "on the device and bring them over once",
)
def losses_by_item(model, batches, loss_fn, optimizer):
    import torch_xla

    losses = []
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
        losses.append(loss.item())
    return losses


@wrong(
    "8.4",
    "no-sync",
    "the six steps ran as one graph: without torch_xla.sync() after each step the graph grows with every "
    "step, and a run of another length compiles another",
)
def losses_without_sync(model, batches, loss_fn, optimizer):
    losses = []
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()


@wrong("8.4", "tensors-returned", "a loss came back as a Tensor: return Python floats")
def losses_as_tensors(model, batches, loss_fn, optimizer):
    import torch_xla

    losses = []
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
        losses.append(loss.detach())
    return losses


@wrong(
    "8.4",
    "gradients-never-zeroed",
    "the losses [1.6577, 0.3382, 1.2587, 1.4461, 0.9171, 1.7693] are not those of one SGD step per batch "
    "[1.6577, 0.3382, 1.3181, 1.032, 0.2172, 1.0197]",
)
def losses_without_zero_grad(model, batches, loss_fn, optimizer):
    import torch_xla

    losses = []
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()


@right("8.4", "step-context-and-cpu-copy")
def losses_in_step_context(model, batches, loss_fn, optimizer):
    import torch_xla

    losses = torch.zeros(len(batches), device=torch_xla.device())
    for i, (x, y) in enumerate(batches):
        with torch_xla.step():  # syncs when the step ends
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            losses[i] = loss.detach()
    return [float(v) for v in losses.cpu()]


# --- 9.1: a run of your own, offline ---------------------------------------------------------------------


@wrong("9.1", "no-mode", 'no offline run in the folder: wandb.init(..., mode="offline", dir=folder)')
def run_without_a_mode(folder, config, losses, model_file):
    import wandb

    run = wandb.init(project="exercise", dir=folder, config=config)  # WANDB_MODE decides: here, disabled
    for epoch, loss in enumerate(losses):
        run.log({"epoch": epoch, "train_loss": loss})
    run.log_artifact(model_file, name="model", type="model")
    run.finish()
    return run.id


@wrong("9.1", "never-finished", "the run is still open when log_run returns: finish it with run.finish()")
def run_never_finished(folder, config, losses, model_file):
    import wandb

    run = wandb.init(project="exercise", mode="offline", dir=folder, config=config)
    for epoch, loss in enumerate(losses):
        run.log({"epoch": epoch, "train_loss": loss})
    run.log_artifact(model_file, name="model", type="model")
    return run.id


@wrong(
    "9.1",
    "rows-without-epochs",
    "the rows' epochs are [None, None, None]: log each row with its epoch, from 0",
)
def rows_without_epochs(folder, config, losses, model_file):
    import wandb

    run = wandb.init(project="exercise", mode="offline", dir=folder, config=config)
    for loss in losses:
        run.log({"train_loss": loss})
    run.log_artifact(model_file, name="model", type="model")
    run.finish()
    return run.id


@wrong(
    "9.1",
    "artifact-of-another-type",
    "the run logged no artifact of type model (types: ['dataset']): log model_file as one",
)
def artifact_of_another_type(folder, config, losses, model_file):
    import wandb

    run = wandb.init(project="exercise", mode="offline", dir=folder, config=config)
    for epoch, loss in enumerate(losses):
        run.log({"epoch": epoch, "train_loss": loss})
    run.log_artifact(model_file, name="weights", type="dataset")
    run.finish()
    return run.id


@right("9.1", "context-manager-and-artifact-object")
def run_as_a_context(folder, config, losses, model_file):
    "The run as a with block (finished on leaving it), the artifact built as an object."
    import wandb

    with wandb.init(project="exercise", mode="offline", dir=str(folder)) as run:
        run.config.update(config)
        for epoch in range(len(losses)):
            run.log({"train_loss": losses[epoch], "epoch": epoch})
        artifact = wandb.Artifact("weights", type="model")
        artifact.add_file(str(model_file))
        run.log_artifact(artifact)
    return run.id


# --- 9.2: a WandbLogger whose best checkpoint is found again ---------------------------------------------


def _trainer(folder, max_epochs, checkpoint, **logger):
    "A Trainer with a WandbLogger under `folder` (`logger` its arguments) and the callback `checkpoint`."
    import pytorch_lightning as pl
    from pytorch_lightning.loggers import WandbLogger

    wandb_logger = WandbLogger(project="course-lib-exercise", save_dir=str(folder), **logger)
    callbacks = [checkpoint] if checkpoint else []
    return pl.Trainer(
        max_epochs=max_epochs, logger=wandb_logger, callbacks=callbacks, enable_progress_bar=False
    )


@wrong(
    "9.2",
    "mode-left-min",
    "the version aliased best is the checkpoint of epoch=0 (score 0.62), not of epoch=1, where valid_auc "
    "peaked at 0.81: the ModelCheckpoint decides which is best",
)
def trainer_lowest_auc_best(folder, max_epochs):
    from pytorch_lightning.callbacks import ModelCheckpoint

    return _trainer(folder, max_epochs, ModelCheckpoint(monitor="valid_auc"), log_model="all")


@wrong(
    "9.2",
    "nothing-monitored",
    "the version aliased best is the checkpoint of epoch=2 (score none), not of epoch=1, where valid_auc "
    "peaked at 0.81: the ModelCheckpoint decides which is best",
)
def trainer_last_is_best(folder, max_epochs):
    return _trainer(folder, max_epochs, None, log_model="all")


@wrong(
    "9.2",
    "no-log-model",
    "the run holds no model artifact: a WandbLogger logs checkpoints only with log_model",
)
def trainer_without_log_model(folder, max_epochs):
    from pytorch_lightning.callbacks import ModelCheckpoint

    return _trainer(folder, max_epochs, ModelCheckpoint(monitor="valid_auc", mode="max"))


@wrong("9.2", "csv-logger", "the Trainer's logger is a CSVLogger: give it a WandbLogger")
def trainer_with_csv_logger(folder, max_epochs):
    import pytorch_lightning as pl
    from pytorch_lightning.loggers import CSVLogger

    return pl.Trainer(max_epochs=max_epochs, logger=CSVLogger(str(folder)), enable_progress_bar=False)


@right("9.2", "log-model-at-the-end")
def trainer_logs_the_best_at_the_end(folder, max_epochs):
    from pytorch_lightning.callbacks import ModelCheckpoint

    best = ModelCheckpoint(monitor="valid_auc", mode="max", filename="{epoch}-{valid_auc:.2f}")
    return _trainer(folder, max_epochs, best, log_model=True)


# --- 9.3: one run per fold, in one group ------------------------------------------------------------------


def _fold_runs(folder, histories, group, finish=True, **init):
    "One offline run per fold with `init`'s arguments; finished unless told not to; their ids."
    import wandb

    ids = []
    for k, rows in enumerate(histories):
        run = wandb.init(project="course-lib-exercise", dir=folder, mode="offline", **init)
        for row in rows:
            run.log(row)
        ids.append(run.id)
        if finish:
            run.finish()
    return ids


@wrong(
    "9.3",
    "one-run-for-all-folds",
    "3 folds were recorded as 1 run(s): start a run for each fold and finish it before the next",
)
def folds_in_one_run(folder, histories, group):
    import wandb

    run = wandb.init(project="course-lib-exercise", dir=folder, mode="offline", group=group)
    for rows in histories:
        for row in rows:
            run.log(row)
    run.finish()
    return [run.id]


@wrong("9.3", "no-group", "the runs' groups are ['']: pass group=group to every run")
def folds_without_group(folder, histories, group):
    import wandb

    ids = []
    for k, rows in enumerate(histories):
        run = wandb.init(
            project="course-lib-exercise", dir=folder, mode="offline", name=f"fold-{k}", config={"fold": k}
        )
        for row in rows:
            run.log(row)
        ids.append(run.id)
        run.finish()
    return ids


@wrong("9.3", "never-finished", "a run is still open when log_folds returns: finish each fold's run")
def folds_never_finished(folder, histories, group):
    import wandb

    ids = []
    for k, rows in enumerate(histories):
        run = wandb.init(
            project="course-lib-exercise", dir=folder, mode="offline", group=group, name=f"fold-{k}"
        )
        for row in rows:
            run.log(row)
        ids.append(run.id)
    return ids


@wrong(
    "9.3",
    "folds-numbered-from-one",
    "the runs' configs hold the folds [1, 2, 3]: give each run config fold=k",
)
def folds_from_one(folder, histories, group):
    import wandb

    ids = []
    for k, rows in enumerate(histories, 1):
        run = wandb.init(
            project="course-lib-exercise",
            dir=folder,
            mode="offline",
            group=group,
            name=f"fold-{k}",
            config={"fold": k},
        )
        for row in rows:
            run.log(row)
        ids.append(run.id)
        run.finish()
    return ids


@right("9.3", "context-manager-and-settings")
def folds_as_context_managers(folder, histories, group):
    import wandb

    ids = []
    for k, rows in enumerate(histories):
        settings = wandb.Settings(mode="offline", run_group=group, run_name=f"fold-{k}")
        with wandb.init(
            project="course-lib-exercise", dir=folder, settings=settings, config={"fold": k}
        ) as run:
            for row in rows:
                run.log(row)
            ids.append(run.id)
    return ids


# --- 9.4: the worst mistakes, as a W&B Table ---------------------------------------------------------------


def _table_run(folder, rows, key="mistakes", columns=("image_name", "target", "prob", "error")):
    "An offline run that logs `rows` as a wandb.Table under `key`; its id."
    import wandb

    run = wandb.init(project="course-lib-exercise", dir=folder, mode="offline")
    run.log({key: wandb.Table(columns=list(columns), data=rows)})
    run.finish()
    return run.id


def _rows(names, targets, probs, error=lambda t, p: abs(t - p)):
    return [[n, t, p, error(t, p)] for n, t, p in zip(names, targets, probs)]


@wrong(
    "9.4",
    "best-first",
    "the rows come in the order ['ISIC_0000007', 'ISIC_0000001', 'ISIC_0000002']: the worst mistake first",
)
def mistakes_ascending(folder, names, targets, probs, k):
    return _table_run(folder, sorted(_rows(names, targets, probs), key=lambda r: r[3])[-k:])


@wrong(
    "9.4",
    "signed-error",
    "the table holds ['ISIC_0000001', 'ISIC_0000006', 'ISIC_0000004']: not the 3 images whose probability "
    "is furthest from their target",
)
def mistakes_signed(folder, names, targets, probs, k):
    rows = _rows(names, targets, probs, error=lambda t, p: t - p)
    return _table_run(folder, sorted(rows, key=lambda r: r[3], reverse=True)[:k])


@wrong("9.4", "every-image", "the table holds 8 rows for k=3: the k worst mistakes only")
def mistakes_all_rows(folder, names, targets, probs, k):
    return _table_run(folder, sorted(_rows(names, targets, probs), key=lambda r: r[3], reverse=True))


@wrong("9.4", "other-key", "the run logged the table(s) ['worst']: log one, under the key mistakes")
def mistakes_under_another_key(folder, names, targets, probs, k):
    rows = sorted(_rows(names, targets, probs), key=lambda r: r[3], reverse=True)[:k]
    return _table_run(folder, rows, key="worst")


@right("9.4", "from-a-dataframe")
def mistakes_from_dataframe(folder, names, targets, probs, k):
    import wandb

    df = pd.DataFrame({"image_name": names, "target": targets, "prob": probs})
    df["error"] = (df.target - df.prob).abs()
    with wandb.init(project="course-lib-exercise", dir=folder, mode="offline") as run:
        run.log({"mistakes": wandb.Table(dataframe=df.nlargest(k, "error"))})
        return run.id


# --- 10.1: test-time augmentation with a left-right flip -------------------------------------------------


@wrong("10.1", "plain-prediction", "that is the plain prediction: average it with the flipped image's")
def tta_plain(model, x):
    with torch.inference_mode():
        return torch.sigmoid(model(x)).flatten()


@wrong("10.1", "mean-logits", "some values lie outside [0, 1]: apply the sigmoid")
def tta_mean_logits(model, x):
    with torch.inference_mode():
        return ((model(x) + model(x.flip(3))) / 2).flatten()


@wrong(
    "10.1",
    "sigmoid-of-mean-logit",
    "that is the sigmoid of the mean logit: average the two probabilities instead",
)
def tta_sigmoid_of_mean_logit(model, x):
    with torch.inference_mode():
        return torch.sigmoid((model(x) + model(x.flip(3))) / 2).flatten()


@wrong("10.1", "up-down-flip", "that flips up-down: a left-right flip turns the width, the last dimension")
def tta_up_down(model, x):
    with torch.inference_mode():
        return ((torch.sigmoid(model(x)) + torch.sigmoid(model(x.flip(2)))) / 2).flatten()


@wrong(
    "10.1",
    "batch-order-flip",
    "that flips the order of the batch: a left-right flip turns the width, the last dimension",
)
def tta_batch_order(model, x):
    with torch.inference_mode():
        return ((torch.sigmoid(model(x)) + torch.sigmoid(model(x.flip(0)))) / 2).flatten()


@wrong("10.1", "not-flattened", "the shape is (5, 1): one probability per image, (batch,)")
def tta_not_flattened(model, x):
    with torch.inference_mode():
        return (torch.sigmoid(model(x)) + torch.sigmoid(model(x.flip(3)))) / 2


@wrong(
    "10.1",
    "gradients-recorded",
    "the probabilities carry a graph for gradients: predict under torch.inference_mode()",
)
def tta_with_grad(model, x):
    return ((torch.sigmoid(model(x)) + torch.sigmoid(model(x.flip(3)))) / 2).flatten()


@right("10.1", "no-grad-flip-minus-one")
def tta_no_grad_negative_dim(model, x):
    "Under torch.no_grad, the width as dimension -1, the mean taken by hand."
    with torch.no_grad():
        first = model(x).sigmoid().view(-1)
        mirrored = model(torch.flip(x, dims=[-1])).sigmoid().view(-1)
    return 0.5 * (first + mirrored)


@right("10.1", "both-views-one-batch")
def tta_one_pass(model, x):
    "Both views in one batch, split after the sigmoid."
    with torch.inference_mode():
        probs = torch.sigmoid(model(torch.cat([x, x.flip(-1)]))).squeeze(1)
    return probs.view(2, len(x)).mean(0)


# --- 10.2: how far from calibrated ------------------------------------------------------------------------


def _bins_10_2(probs, n_bins, keep_ones=True):
    bins = (probs * n_bins).astype(int)
    return np.minimum(bins, n_bins - 1) if keep_ones else bins


@wrong(
    "10.2",
    "plain-mean-of-gaps",
    "that is the plain mean of the bins' gaps: weight each gap by its bin's share of the images",
)
def ece_unweighted(probs, labels, n_bins=10):
    bins = _bins_10_2(probs, n_bins)
    gaps = [
        abs(probs[bins == b].mean() - labels[bins == b].mean()) for b in range(n_bins) if (bins == b).any()
    ]
    return float(np.mean(gaps))


@wrong(
    "10.2",
    "signed-gaps",
    "over- and underconfident bins cancel each other: take each gap's absolute value",
)
def ece_signed(probs, labels, n_bins=10):
    bins = _bins_10_2(probs, n_bins)
    held = [b for b in range(n_bins) if (bins == b).any()]
    return float(sum((bins == b).mean() * (probs[bins == b].mean() - labels[bins == b].mean()) for b in held))


@wrong(
    "10.2",
    "ones-left-out",
    "the predictions of exactly 1.0 were left out: they belong to the last bin",
)
def ece_drops_ones(probs, labels, n_bins=10):
    bins = _bins_10_2(probs, n_bins, keep_ones=False)
    held = [b for b in range(n_bins) if (bins == b).any()]
    return float(
        sum((bins == b).mean() * abs(probs[bins == b].mean() - labels[bins == b].mean()) for b in held)
    )


@wrong("10.2", "empty-bins-are-nan", "the answer is NaN: an empty bin should count nothing")
def ece_empty_bins(probs, labels, n_bins=10):
    bins = _bins_10_2(probs, n_bins)
    with np.errstate(invalid="ignore"):
        parts = [
            (bins == b).mean() * abs(np.mean(probs[bins == b]) - np.mean(labels[bins == b]))
            if (bins == b).any()
            else float("nan")
            for b in range(n_bins)
        ]
    return float(sum(parts))


@right("10.2", "digitize-and-bincount")
def ece_by_bincount(probs, labels, n_bins=10):
    "np.digitize on the inner edges, then per-bin sums with np.bincount."
    bins = np.digitize(probs, np.linspace(0, 1, n_bins + 1)[1:-1])
    counts = np.bincount(bins, minlength=n_bins)
    pred = np.bincount(bins, weights=probs, minlength=n_bins)
    true = np.bincount(bins, weights=labels, minlength=n_bins)
    held = counts > 0
    return float(np.sum(np.abs(pred[held] - true[held])) / len(probs))


# --- 10.3: a model that runs without its class ------------------------------------------------------------


@wrong(
    "10.3",
    "batch-size-fixed",
    "the exported model takes only batches of 4, the example's size: declare the batch dimension dynamic",
)
def export_static(model, example):
    model.eval()
    return torch.export.export(model, (example,))


@wrong(
    "10.3",
    "training-mode",
    "the exported model's outputs differ from the model's in eval mode: export it in eval mode, where "
    "BatchNorm uses its running statistics and dropout is off",
)
def export_in_training_mode(model, example):
    return torch.export.export(model, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))


@wrong(
    "10.3",
    "torchscript-trace",
    "export_model returned a TopLevelTracedModule: return what torch.export.export returns",
)
def export_by_jit_trace(model, example):
    return torch.jit.trace(model.eval(), example)


@right("10.3", "dim-auto-by-name")
def export_with_auto_dim(model, example):
    return torch.export.export(model.eval(), (example,), dynamic_shapes={"input": {0: torch.export.Dim.AUTO}})


# --- 10.4: how sure the fold's AUC is ----------------------------------------------------------------------


def _bootstrap(targets, probs, n_boot, rng, percents=(2.5, 97.5), replace=True, skip=True, paired=True):
    "A bootstrap interval of the AUC, with the mistakes as switches."
    from sklearn.metrics import roc_auc_score

    aucs = []
    for _ in range(n_boot):
        n = len(targets)
        i = rng.integers(0, n, n) if replace else rng.permutation(n)
        j = i if paired else rng.integers(0, n, n)
        if skip and not 0 < targets[i].sum() < n:
            continue
        aucs.append(roc_auc_score(targets[i], probs[j]))
    low, high = np.percentile(aucs, percents)
    return low, high


@wrong(
    "10.4",
    "one-class-kept",
    "the interval is (nan, nan): a resample without a melanoma has no AUC, skip resamples with one class",
)
def interval_one_class_kept(targets, probs, n_boot=1000, seed=0):
    return _bootstrap(targets, probs, n_boot, np.random.default_rng(seed), skip=False)


@wrong("10.4", "without-replacement", "the interval has no width: resample the images with replacement")
def interval_without_replacement(targets, probs, n_boot=1000, seed=0):
    return _bootstrap(targets, probs, n_boot, np.random.default_rng(seed), replace=False)


@wrong(
    "10.4",
    "labels-and-probabilities-apart",
    "the interval (0.214, 0.802) is centred near 0.5, away from the fold's AUC 0.858: resample each "
    "image's target and probability together",
)
def interval_unpaired(targets, probs, n_boot=1000, seed=0):
    return _bootstrap(targets, probs, n_boot, np.random.default_rng(seed), paired=False)


@wrong(
    "10.4",
    "ninety-percent",
    "(0.702, 1.000) is narrower than the 95% interval (0.651, 1.000): take the 2.5th and 97.5th percentiles",
)
def interval_ninety(targets, probs, n_boot=1000, seed=0):
    return _bootstrap(targets, probs, n_boot, np.random.default_rng(seed), percents=(5, 95))


@wrong(
    "10.4",
    "fractions-to-percentile",
    "(0.544, 0.625) lies among the lowest resampled AUCs: np.percentile takes percents (2.5, 97.5), "
    "np.quantile fractions",
)
def interval_fractions(targets, probs, n_boot=1000, seed=0):
    return _bootstrap(targets, probs, n_boot, np.random.default_rng(seed), percents=(0.025, 0.975))


@wrong(
    "10.4",
    "normal-approximation",
    "(0.685, 1.031) leaves [0, 1], where every AUC lies: take the percentiles of the resampled AUCs, not "
    "the AUC plus or minus 1.96 standard deviations",
)
def interval_normal(targets, probs, n_boot=1000, seed=0):
    from sklearn.metrics import roc_auc_score

    rng, aucs = np.random.default_rng(seed), []
    for _ in range(n_boot):
        i = rng.integers(0, len(targets), len(targets))
        if 0 < targets[i].sum() < len(i):
            aucs.append(roc_auc_score(targets[i], probs[i]))
    auc, sd = roc_auc_score(targets, probs), np.std(aucs)
    return auc - 1.96 * sd, auc + 1.96 * sd


@wrong(
    "10.4",
    "global-random-state",
    "the same seed gave another interval: draw the resamples from a generator seeded with `seed`",
)
def interval_unseeded(targets, probs, n_boot=1000, seed=0):
    return _bootstrap(targets, probs, n_boot, np.random.default_rng())


@right("10.4", "stratified-by-class")
def interval_stratified(targets, probs, n_boot=1000, seed=0):
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(targets == 1), np.flatnonzero(targets == 0)
    aucs = []
    for _ in range(n_boot):
        i = np.concatenate([rng.choice(pos, len(pos)), rng.choice(neg, len(neg))])
        aucs.append(roc_auc_score(targets[i], probs[i]))
    return tuple(np.quantile(aucs, [0.025, 0.975]))


# --- 11.1: the same photo, saved again ---------------------------------------------------------------------


@wrong("11.1", "hash-of-the-bytes", "average_hash returned str of <U32: return a boolean array")
def average_hash_of_bytes(path):
    import hashlib

    return hashlib.md5(open(path, "rb").read()).hexdigest()


@wrong(
    "11.1",
    "not-shrunk",
    "the hash's shape is (160, 160), and (120, 120) for the smaller copy: shrink every image to 8 x 8 pixels "
    "first, so that every hash has 64 bits whatever the photo's size",
)
def average_hash_full_size(path):
    from PIL import Image

    pixels = np.asarray(Image.open(path).convert("L"), dtype=np.float32)
    return pixels > pixels.mean()


@wrong(
    "11.1",
    "in-colour",
    "the hash's shape is (8, 8, 3), and (8, 8, 3) for the smaller copy: shrink every image to 8 x 8 pixels "
    "first, so that every hash has 64 bits whatever the photo's size",
)
def average_hash_in_colour(path):
    from PIL import Image

    pixels = np.asarray(Image.open(path).convert("RGB").resize((8, 8)), dtype=np.float32)
    return pixels > pixels.mean()


@right("11.1", "median-threshold")
def average_hash_against_the_median(path):
    from PIL import Image

    with Image.open(path) as img:
        pixels = np.array(img.convert("L").resize((8, 8), Image.Resampling.BILINEAR), dtype=float)
    return pixels >= np.median(pixels)


# --- 11.2: loading a shared model without the course -------------------------------------------------------


@wrong(
    "11.2", "left-in-training-mode", "the model is in training mode: BatchNorm and dropout need model.eval()"
)
def load_shared_in_training_mode(folder):
    import json

    import torchvision
    from safetensors.torch import load_file

    config = json.loads((folder / "config.json").read_text())
    model = getattr(torchvision.models, config["arch"])(num_classes=1)
    model.load_state_dict(load_file(folder / "model.safetensors"))
    return model


@wrong(
    "11.2",
    "architecture-hard-coded",
    "the folder holds a efficientnet_b0, and load_shared built a ResNet: read the architecture from "
    "config.json",
)
def load_shared_always_resnet(folder):
    import torchvision
    from safetensors.torch import load_file

    model = torchvision.models.resnet18(num_classes=1)
    model.load_state_dict(load_file(folder / "model.safetensors"), strict=False)
    return model.eval()


@right("11.2", "safe-open-and-train-false")
def load_shared_with_safe_open(folder):
    import json

    import torchvision
    from safetensors import safe_open

    config = json.load(open(folder / "config.json"))
    model = torchvision.models.get_model(config["arch"], num_classes=config["num_classes"])
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        model.load_state_dict({k: f.get_tensor(k) for k in f.keys()})
    model.train(False)
    return model


# --- 11.3: the lesions that leak ---------------------------------------------------------------------------


@wrong(
    "11.3",
    "groups-with-several-photos",
    "L3 has three photos, all in fold 3: a group with several photos leaks only when they are in "
    "several folds",
)
def split_groups_by_photo_count(df):
    counts = df.group.value_counts()
    return sorted(counts[counts > 1].index)


@wrong("11.3", "missing-group-counted", "a photo without a group is no group: leave the missing ones out")
def split_groups_with_the_missing(df):
    folds = df.groupby("group", dropna=False).fold.nunique()
    return sorted(folds[folds > 1].index, key=str)


@wrong("11.3", "one-entry-per-photo", "['L1', 'L1', 'L4', 'L4'] names a group more than once: once each")
def split_groups_per_photo(df):
    return sorted(g for g in df.group.dropna() if df[df.group == g].fold.nunique() > 1)


@right("11.3", "drop-duplicates")
def split_groups_from_pairs(df):
    pairs = df.dropna(subset=["group"])[["group", "fold"]].drop_duplicates()
    return sorted(pairs.group[pairs.group.duplicated()].unique().tolist())


# --- mistakes the checks once let through ----------------------------------------------------------------


@wrong(
    "6.1",
    "returns-a-wrong-count",
    "train_accumulated returned 0 but stepped the optimizer 1 time(s): return the number of steps it took",
)
def acc_wrong_count(model, loss_fn, optimizer, micro_batches, k):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(micro_batches):
        (loss_fn(model(x), y) / k).backward()
        if (i + 1) % k == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            optimizer.zero_grad()
    return len(micro_batches) // (k + 1)


@wrong(
    "6.2",
    "tries-every-size",
    "the model saw a micro-batch of 5 images: try only the sizes that divide the batch of 12",
)
def smallest_any_size(model, loss_fn, x, y, tolerance):
    def grad(m):
        model.zero_grad()
        for xs, ys in zip(x.split(m), y.split(m)):
            (loss_fn(model(xs), ys) / (len(x) // m)).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()]).clone()

    whole = grad(len(x))
    for m in range(1, len(x) + 1):  # every size, not only those that divide the batch
        if ((grad(m) - whole).norm() / whole.norm()).item() <= tolerance:
            return m
    return len(x)


@wrong(
    "8.1",
    "rank-ignored",
    "ranks 0 and 1 of 3 got the same items: each replica's shard starts at its own rank",
)
def shard_rank_ignored(items, world, rank):
    padded = list(items) + list(items)[: (-len(items)) % world]
    return padded[0::world]


@wrong(
    "10.1",
    "gradients-recorded-then-detached",
    "the probabilities carry a graph for gradients: predict under torch.inference_mode()",
)
def tta_detached(model, x):
    return ((torch.sigmoid(model(x)) + torch.sigmoid(model(x.flip(3)))) / 2).flatten().detach()


@wrong(
    "7.2",
    "explain-not-a-backend",
    "op_counts used torch._dynamo.explain: count the operations in a backend of your own",
)
def counts_by_explain(fn, x):
    graphs = torch._dynamo.explain(fn)(x).graphs
    return [sum(n.op not in ("placeholder", "output") for n in g.graph.nodes) for g in graphs]


# --- the verdicts ----------------------------------------------------------------------------------------


# the checks that run an answer on the XLA device: in .venv-tpu
ON_XLA = {"8.2", "8.3", "8.4"}


def _marked(cases: list) -> list:
    "The cases, those of the XLA checks marked xla."
    return [
        pytest.param(*c.values, marks=[*c.marks, pytest.mark.xla], id=c.id) if c.values[0] in ON_XLA else c
        for c in cases
    ]


@pytest.mark.parametrize("number, answer, message", _marked(WRONG))
def test_a_typical_mistake_gets_the_message_that_names_it(number, answer, message):
    _SEEN_GRAPHS.clear()  # 7.2's list-outside-the-call mistake: its list grows within one check, from empty
    assert verdict(number, answer) == (False, f"✗ Exercise {number}: {message}")


@pytest.mark.parametrize("number, answer", _marked(RIGHT))
def test_a_right_answer_unlike_the_worked_solution_passes(number, answer):
    assert verdict(number, answer) == (True, f"✓ Exercise {number}: right")


def test_every_exercise_of_chapters_06_to_11_is_covered():
    from course_lib.exercises import registered

    numbers = {n for n in registered() if n.split(".")[0] in ("6", "7", "8", "9", "10", "11")}
    mistakes = {n: sum(p.values[0] == n for p in WRONG) for n in numbers}
    assert all(count >= 2 for count in mistakes.values()), mistakes
    assert numbers <= {p.values[0] for p in RIGHT}, numbers - {p.values[0] for p in RIGHT}
