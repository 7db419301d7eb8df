"""The TorchScript example models (examples/models) that trainer-host loads
with --model-file: exported by export.py, loaded back with torch.jit.load,
checked against the contract (num_layers, forward's output shape, forward
equal to chaining forward_layer in eval mode, dropout following
train()/eval()); and trainer-host's built-in model files against the
dgld.models modules they are scripted from."""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import dgld  # noqa: F401 - registers torch.classes.dgld.Block before torch.jit.load
from dgld import _C

from conftest import BUILD, REPO

EXPORT = REPO / "examples" / "models" / "export.py"
IN_FEATS, N_HIDDEN, N_CLASSES = 6, 8, 3

# model -> (extra export.py flags, num_layers it should have)
MODELS = {
    "sage": ([], 2),
    "gcn": (["--num-layers", "3"], 3),
    "gat": (["--num-heads", "3"], 2),
    "sage_res": ([], 3),  # export.py's default for sage_res
}


def export_env():
    e = dict(os.environ)
    e.update({"PYTHONPATH": str(BUILD / "python"), "PYTHONUNBUFFERED": "1"})
    return e


def run_export(*args):
    return subprocess.run([sys.executable, str(EXPORT), *args], env=export_env(), cwd=REPO, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """model name -> path of the module export.py wrote (each exported once)."""
    d = tmp_path_factory.mktemp("models")
    cache = {}

    def get(name):
        if name not in cache:
            flags, _ = MODELS[name]
            out = d / f"{name}.pt"
            r = run_export("--model", name, "--in-feats", str(IN_FEATS), "--n-classes", str(N_CLASSES),
                           "--n-hidden", str(N_HIDDEN), "--dropout", "0.5", "--seed", "1", "--out", str(out), *flags)
            assert r.returncode == 0, r.stdout + r.stderr
            assert str(out) in r.stdout and name in r.stdout and "parameters" in r.stdout, r.stdout
            assert out.is_file() and not (d / f"{name}.pt.tmp").exists()
            cache[name] = out
        return cache[name]

    return get


def random_block(num_dst, num_src, max_deg, g):
    """A random CSR block; dst 0 has no in-edges (as a sampled block may)."""
    deg = torch.randint(0, max_deg + 1, (num_dst,), generator=g)
    deg[0] = 0
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(deg, 0)])
    indices = torch.randint(0, num_src, (int(indptr[-1]),), generator=g)
    return _C.make_block(indptr, indices, num_src)


def chained_blocks(num_layers, seed, num_seeds=7):
    """Blocks input layer first: block i's dst nodes are block i+1's src nodes
    (and the first rows of block i's src nodes)."""
    g = torch.Generator().manual_seed(seed)
    sizes = [num_seeds]
    for _ in range(num_layers):
        sizes.append(sizes[-1] + int(torch.randint(5, 20, (1,), generator=g)))
    sizes.reverse()  # sizes[i] = block i's src nodes, sizes[i + 1] its dst nodes
    blocks = [random_block(sizes[i + 1], sizes[i], 5, g) for i in range(num_layers)]
    x = torch.randn(sizes[0], IN_FEATS, generator=g)
    return blocks, x


def layerwise(m, blocks, x):
    h = x
    for i, b in enumerate(blocks):
        h = m.forward_layer(i, b, h)
    return h


@pytest.mark.parametrize("name", list(MODELS))
def test_exported_model_meets_the_contract(exported, name):
    m = torch.jit.load(str(exported(name)))
    L = MODELS[name][1]
    assert isinstance(m.num_layers, int) and m.num_layers == L
    assert m.in_feats == IN_FEATS and m.n_classes == N_CLASSES
    block_t = "__torch__.torch.classes.dgld.Block"
    assert str(m.forward.schema).endswith(f"{block_t}[] blocks, Tensor x) -> Tensor")
    assert str(m.forward_layer.schema).endswith(f"int i, {block_t} block, Tensor h) -> Tensor")
    for seed in (1, 2):
        blocks, x = chained_blocks(L, seed)
        num_dst = blocks[-1].num_dst_nodes()
        m.eval()
        with torch.no_grad():
            out = m(blocks, x)
            assert out.shape == (num_dst, N_CLASSES) and out.dtype == torch.float32
            assert torch.isfinite(out).all()
            assert (layerwise(m, blocks, x) - out).abs().max() < 1e-5
            assert torch.equal(m(blocks, x), out)  # eval: no dropout
        m.train()
        torch.manual_seed(seed)
        a, b = m(blocks, x), m(blocks, x)
        assert a.shape == (num_dst, N_CLASSES)
        assert not torch.equal(a, b), "dropout 0.5 is not active in train mode"
        # Trainable as trainer-host trains it: every parameter gets a gradient.
        F.cross_entropy(a, torch.randint(0, N_CLASSES, (num_dst,))).backward()
        for pname, p in m.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, pname
        m.zero_grad()


@pytest.mark.parametrize("name", list(MODELS))
def test_exported_model_passes_trainer_hosts_probe(exported, name):
    """The probe trainer-host runs on a --model-file (torchscript.cpp): block l
    with L - l dst and L - l + 1 src nodes, every src -> every dst; x =
    sin(arange); forward gives [1, n_classes] and layer-wise chaining agrees."""
    m = torch.jit.load(str(exported(name)))
    L = m.num_layers
    blocks = []
    for l in range(L):
        nd, ns = L - l, L - l + 1
        blocks.append(_C.make_block(torch.arange(0, (nd + 1) * ns, ns), torch.arange(ns).repeat(nd), ns))
    x = torch.sin(torch.arange(float((L + 1) * IN_FEATS))).view(L + 1, IN_FEATS)
    m.eval()
    with torch.no_grad():
        out = m(blocks, x)
        assert out.shape == (1, N_CLASSES)
        h = x
        for l in range(L):
            h = m.forward_layer(l, blocks[l], h)
            assert h.dim() == 2 and h.shape[0] == L - l
        assert (h - out).abs().max() <= 1e-4 * (1.0 + out.abs().max())


@pytest.mark.parametrize("name", list(MODELS))
def test_exported_model_refuses_a_wrong_layer_or_block_count(exported, name):
    m = torch.jit.load(str(exported(name)))
    blocks, x = chained_blocks(m.num_layers, 3)
    with pytest.raises(Exception, match="no layer"):
        m.forward_layer(m.num_layers, blocks[-1], x)
    with pytest.raises(Exception, match="blocks for a"):
        m(blocks[:-1], x)


@pytest.mark.parametrize("kind,heads", [("sage", 1), ("gcn", 1), ("gat", 3)])
def test_builtin_model_files_are_the_package_modules(kind, heads):
    """trainer-host's built-in model is dgld.models' module: its file
    (scripted at build time, sized by configure() as trainer-host sizes it)
    and the eager module drawn from the same seed have the same weights and
    compute the same logits."""
    from dgld.models import KINDS
    path = BUILD / "daemons" / "trainer_host" / "models" / f"{kind}-2.pt"
    scripted = torch.jit.load(str(path))
    torch.manual_seed(5)
    scripted.configure(IN_FEATS, N_HIDDEN, N_CLASSES, 0.5, heads, 0, 0)
    kwargs = {"num_heads": heads} if kind == "gat" else {}
    eager = KINDS[kind](IN_FEATS, N_HIDDEN, N_CLASSES, num_layers=2, dropout=0.5, **kwargs)
    torch.manual_seed(5)
    eager.configure(IN_FEATS, N_HIDDEN, N_CLASSES, 0.5, heads, 0, 0)
    want = dict(eager.named_parameters())
    got = dict(scripted.named_parameters())
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name
    scripted.eval()
    eager.eval()
    blocks, x = chained_blocks(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(scripted(blocks, x), eager(blocks, x), rtol=1e-6, atol=1e-6)
    assert scripted.num_layers == 2 and scripted.in_feats == IN_FEATS and scripted.n_classes == N_CLASSES


def test_sage_res_adds_the_residual(exported):
    m = torch.jit.load(str(exported("sage_res")))
    m.eval()
    names = {k for k, _ in m.named_parameters()}
    # in 6 -> 8 and 8 -> 3 change the width (a projection), 8 -> 8 does not.
    assert {"layers.0.res.weight", "layers.2.res.weight"} <= names
    assert not any(k.startswith("layers.1.res.") for k in names)
    blocks, x = chained_blocks(3, 5)
    with torch.no_grad():
        full = m.forward_layer(0, blocks[0], x)
        for k, p in m.named_parameters():
            if ".res." in k:
                p.zero_()
        plain = m.forward_layer(0, blocks[0], x)
        assert not torch.allclose(full, plain)
        want = F.relu(getattr(m.layers, "0").conv(blocks[0], x))  # no residual left once projections are zero
        torch.testing.assert_close(plain, want)


@pytest.mark.parametrize("flags,message", [
    (["--model", "mlp"], "invalid choice: 'mlp'"),
    (["--model", "sage", "--in-feats", "0"], "--in-feats: must be >= 1"),
    (["--model", "sage", "--n-classes", "x"], "--n-classes: expected a positive integer"),
    (["--model", "gat", "--dropout", "1.0"], "--dropout: must be in [0, 1)"),
    (["--model", "gat", "--num-heads", "-2"], "--num-heads: must be >= 1"),
])
def test_export_refuses_bad_values(tmp_path, flags, message):
    base = {"--in-feats": "4", "--n-classes": "2"}
    args = list(flags)
    for k, v in base.items():
        if k not in args:
            args += [k, v]
    r = run_export(*args, "--out", str(tmp_path / "m.pt"))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_export_refuses_a_missing_directory(tmp_path):
    r = run_export("--model", "sage", "--in-feats", "4", "--n-classes", "2", "--out", str(tmp_path / "no" / "m.pt"))
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr
