"""DistEmbedding with SparseAdam / SparseAdagrad as DGL's scripts use them.

DGL's transductive GraphSAGE script (examples/distributed/graphsage,
train_dist_transductive.py) calls the sparse optimiser's zero_grad() after
the forward pass and before backward():

    batch_inputs = emb_layer(input_nodes); loss = ...
    emb_optimizer.zero_grad(); optimizer.zero_grad(); loss.backward()
    emb_optimizer.step(); optimizer.step()

dgld's zero_grad() used to drop the lookups, so step() updated nothing and
the embedding stayed at its initial values for the whole run (the script
reached ~0.28 test accuracy on Cora instead of trainer-host's ~0.41). DGL's
zero_grad() only marks the lookups to be dropped after the next step. These
tests pin that, and DGL's other update rules: a row's gradients that come
several times (two trainers, or twice in a batch) are averaged, and a lookup
that got no gradient is left out of the step."""

import tempfile

import pytest
import torch

from conftest import Job, run_trainers

import dgld
import dgld.distributed as dist

IDS = [3, 1600, 2999]  # rows of both machines
TARGET = torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, -2.0], [0.3, 0.3, 0.3]])


def _zeros(shape, dtype):
    return torch.zeros(shape, dtype=dtype)


def _pair(g, name, optimizer):
    emb = dist.DistEmbedding(g.num_nodes(), 3, name=name, init_func=_zeros)
    dense = torch.zeros(3, 3, requires_grad=True)
    if optimizer == "adam":
        opt = dgld.distributed.optim.SparseAdam([emb], lr=0.05)
        ref = torch.optim.Adam([dense], lr=0.05)
    else:
        opt = dgld.distributed.optim.SparseAdagrad([emb], lr=0.05)
        ref = torch.optim.Adagrad([dense], lr=0.05, eps=1e-10)
    return emb, opt, dense, ref


@pytest.mark.parametrize("optimizer", ["adam", "adagrad"])
@pytest.mark.parametrize("order", ["zero_grad_after_forward", "zero_grad_before_forward"])
def test_zero_grad_anywhere_before_backward_keeps_the_batch(g, optimizer, order):
    emb, opt, dense, ref = _pair(g, f"sem-order-{optimizer}-{order}", optimizer)
    ids = torch.tensor(IDS)
    for _ in range(5):
        if order == "zero_grad_before_forward":
            opt.zero_grad()
        loss = ((emb(ids) - TARGET) ** 2).sum()
        if order == "zero_grad_after_forward":
            opt.zero_grad()  # DGL's train_dist_transductive.py
        loss.backward()
        opt.step()
        ref.zero_grad()
        ((dense - TARGET) ** 2).sum().backward()
        ref.step()
    got = emb.weight[ids]
    assert got.abs().sum() > 0, "step() after zero_grad() left the rows at their initial values"
    torch.testing.assert_close(got, dense.detach(), rtol=1e-4, atol=1e-6)
    assert emb._trace == []  # step() drops the lookups it applied


def test_rows_repeated_in_a_batch_get_the_mean_gradient(g):
    # DGL's SparseAdagrad/SparseAdam: index_add_ the rows' gradients, divide by
    # the count. Step 1: row 7 twice, gradient c each (mean c, sum 2c); step 2:
    # row 7 once, gradient c. Adagrad's second move is lr c / sqrt(c^2 + c^2)
    # with the mean, lr c / sqrt(4c^2 + c^2) with the sum.
    emb = dist.DistEmbedding(g.num_nodes(), 2, name="sem-dup", init_func=_zeros)
    opt = dist.SparseAdagrad([emb], lr=0.1)
    c = torch.tensor([1.0, -2.0])
    (emb(torch.tensor([7, 7])) * c).sum().backward()
    opt.step()
    (emb(torch.tensor([7])) * c).sum().backward()
    opt.step()
    want = -0.1 * torch.sign(c) * (1 + 1 / 2 ** 0.5)
    torch.testing.assert_close(emb.weight[torch.tensor([7])][0], want, rtol=1e-5, atol=1e-7)


def test_a_lookup_without_gradient_is_left_out(g):
    # Adam with a zero gradient still moves a row (its momentum); DGL skips a
    # traced lookup whose rows got no gradient, so row 11 keeps its value.
    emb = dist.DistEmbedding(g.num_nodes(), 2, name="sem-nograd", init_func=_zeros)
    opt = dist.SparseAdam([emb], lr=0.1)
    (emb(torch.tensor([11, 12])) * torch.tensor([1.0, 1.0])).sum().backward()
    opt.step()
    before = emb.weight[torch.tensor([11, 12])]
    unused = emb(torch.tensor([11]))  # looked up with autograd on, never backpropagated
    assert unused.requires_grad
    (emb(torch.tensor([12])) * torch.tensor([1.0, 1.0])).sum().backward()
    opt.step()
    after = emb.weight[torch.tensor([11, 12])]
    torch.testing.assert_close(after[0], before[0])
    assert (after[1] < before[1]).all()
    state = opt._state["sem-nograd"][0][torch.tensor([11, 12])]  # DGL's (step, mem, power)
    assert state.reshape(-1).tolist() == [1.0, 2.0]


def test_evaluation_reads_the_trained_rows(g):
    # What the script's load_embs does after training: emb(ids) under no_grad
    # is not traced and returns the rows as the last step left them.
    emb = dist.DistEmbedding(g.num_nodes(), 2, name="sem-eval", init_func=_zeros)
    opt = dist.SparseAdam([emb], lr=0.1)
    ids = torch.tensor([20, 1700])
    loss = (emb(ids) * torch.tensor([1.0, -1.0])).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        rows = emb(ids)
    assert emb._trace == []
    torch.testing.assert_close(rows, torch.tensor([[-0.1, 0.1], [-0.1, 0.1]]), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(emb.weight[ids], rows)


def test_a_write_replaces_rows_remembered_with_a_batch(g):
    # DistTensor keeps the rows a data loader fetched with a batch for t[ids]
    # with that very ids tensor; a write through the tensor must not leave
    # them to be read again.
    t = dist.DistTensor((g.num_nodes(), 2), torch.float32, name="sem-recent")
    ids = torch.tensor([30, 1800])
    t._remember(ids, torch.full((2, 2), 5.0))
    assert t[ids][0, 0] == 5.0
    t[ids] = torch.ones(2, 2)
    torch.testing.assert_close(t[ids], torch.ones(2, 2))


TWO_TRAINERS = """
import os, torch, torch.distributed as tdist
import dgld, dgld.distributed as dist
rank = int(os.environ['RANK'])
dist.initialize({ip!r})
tdist.init_process_group('gloo')
g = dist.DistGraph('g', part_config={part!r})
emb = dist.DistEmbedding(g.num_nodes(), 2, name='sem-two', init_func=lambda s, d: torch.zeros(s, dtype=d))
opt = dist.optim.SparseAdagrad([emb], lr=0.1)
c = torch.tensor([1.0, -2.0])
for step in range(2):
    ids = torch.tensor([5, 2500]) if step == 0 or rank == 0 else torch.tensor([2500])
    rows = emb(ids)
    loss = (rows * c * (rank + 1)).sum()
    opt.zero_grad()  # between forward and backward, as DGL's transductive script
    loss.backward()
    opt.step()
g.barrier()
print('rows', emb.weight[torch.tensor([5, 2500])].tolist(), flush=True)
"""


def test_two_trainers_script_order_and_the_mean_of_their_gradients():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-emb-") as d:
        job = Job(d)
        try:
            code = TWO_TRAINERS.format(ip=job.ip_config, part=job.part_config)
            outs = run_trainers(job, [code, code])
        finally:
            job.stop()
    rows = [eval(l.split("rows ")[1]) for l in outs[0].splitlines() if l.startswith("rows ")]
    assert len(rows) == 1, outs[0]
    row5, row2500 = (torch.tensor(r) for r in rows[0])
    s = torch.sign(torch.tensor([1.0, -2.0]))
    # Step 1: both rows get c from trainer 0 and 2c from trainer 1: mean 1.5c.
    # Step 2: row 5 gets c (trainer 0 only), row 2500 the mean 1.5c again.
    # Adagrad: move 1 is lr sign; move 2 is lr g2 / sqrt(g1^2 + g2^2).
    torch.testing.assert_close(row5, -0.1 * s * (1 + 1 / (1 + 1.5 ** 2) ** 0.5), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(row2500, -0.1 * s * (1 + 1 / 2 ** 0.5), rtol=1e-5, atol=1e-7)
