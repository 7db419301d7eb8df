"""LibTorch kernels dgld replaces when imported (python/src/torch_kernels.cpp):
Tensor.bernoulli_(p), which torch.nn.Dropout draws its mask with, gives the
same distribution from the same seed in one parallel pass; so does
torch.nn.functional.dropout, whose backward keeps no mask; what they do not
handle goes to LibTorch's kernel; DGLD_TORCH_KERNELS=0 keeps LibTorch's."""

import os
import subprocess
import sys

import torch
from conftest import BUILD

import dgld  # noqa: F401 - installs the kernels
from dgld import _C


def test_bernoulli_is_replaced_and_draws_bernoulli_p():
    assert _C.torch_kernels
    n = 1_000_003
    for p in (0.1, 0.5, 0.9):
        share = torch.empty(n).bernoulli_(p).mean().item()
        assert abs(share - p) < 5 * (p * (1 - p) / n) ** 0.5
    x = torch.empty(n, dtype=torch.float64).bernoulli_(0.25)
    assert set(torch.unique(x).tolist()) == {0.0, 1.0}
    assert torch.equal(torch.empty(7).bernoulli_(0.0), torch.zeros(7))
    assert torch.equal(torch.empty(7).bernoulli_(1.0), torch.ones(7))


def test_bernoulli_and_dropout_are_reproducible_from_the_seed():
    torch.manual_seed(4)
    a = torch.empty(10_000).bernoulli_(0.3)
    d1 = torch.nn.functional.dropout(torch.ones(5000), 0.5, True)
    torch.manual_seed(4)
    b = torch.empty(10_000).bernoulli_(0.3)
    d2 = torch.nn.functional.dropout(torch.ones(5000), 0.5, True)
    assert torch.equal(a, b) and torch.equal(d1, d2)
    assert set(torch.unique(d1).tolist()) == {0.0, 2.0}
    g = torch.Generator().manual_seed(9)
    c = torch.empty(1000).bernoulli_(0.5, generator=g)
    g.manual_seed(9)
    assert torch.equal(c, torch.empty(1000).bernoulli_(0.5, generator=g))


def test_dropout_is_dgld_one_pass_with_the_same_distribution_and_gradient():
    n = 1_000_003
    x = torch.randn(n, requires_grad=True)
    for p in (0.1, 0.5, 0.9):
        torch.manual_seed(2)
        y = torch.nn.Dropout(p)(x)
        kept = y.ne(0)
        assert abs(kept.double().mean().item() - (1 - p)) < 5 * (p * (1 - p) / n) ** 0.5
        torch.testing.assert_close(y[kept], x[kept] / (1 - p))
        # dgld's draws: those of torch.ops.dgld.dropout from the same seed.
        torch.manual_seed(2)
        assert torch.equal(y, torch.ops.dgld.dropout(x, p, True, False))
        w = torch.randn(n)
        (g,) = torch.autograd.grad((y * w).sum(), [x])
        torch.testing.assert_close(g, torch.where(kept, w / (1 - p), torch.zeros(())))
    # Outside training, p = 0, and what it does not handle: LibTorch's.
    assert torch.equal(torch.nn.functional.dropout(x, 0.5, False), x)
    assert torch.equal(torch.nn.functional.dropout(x, 0.0, True), x)
    tiny = torch.nn.functional.dropout(torch.ones(100_000), 1e-9, True)
    assert tiny.ne(0).sum().item() >= 100_000 - 1
    assert torch.equal(torch.nn.functional.dropout(torch.ones(100), 1.0, True), torch.zeros(100))


def test_what_it_does_not_handle_goes_to_libtorch():
    ints = torch.empty(1000, dtype=torch.int64).bernoulli_(0.5)
    assert ints.dtype == torch.int64 and set(torch.unique(ints).tolist()) <= {0, 1}
    strided = torch.zeros(100, 4)[:, 1]
    strided.bernoulli_(0.5)
    assert set(torch.unique(strided).tolist()) <= {0.0, 1.0}
    tiny = torch.empty(100_000).bernoulli_(1e-9)
    assert tiny.sum().item() <= 1


def test_the_environment_keeps_libtorchs_kernels():
    code = "import dgld; from dgld import _C; print(_C.torch_kernels)"
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    env.pop("DGLD_TORCH_KERNELS", None)
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, DGLD_TORCH_KERNELS="0"), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"
    assert "Overriding" not in out.stderr
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    assert "Overriding" not in out.stderr
