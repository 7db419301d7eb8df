"""dgld.nn's layers (the code trainer-host's built-in models run,
dgld.models) against their formulas written with dense matrices, eager and
scripted with torch.jit.script; resize(), which sizes a scripted model; and
DGL's conventions (tuple input, zero in-degree)."""

import pytest
import torch

import dgld
import dgld.nn.pytorch as dglnn
from dgld import _C


def random_block(num_dst, num_src, max_deg, seed, zero_degree=True):
    g = torch.Generator().manual_seed(seed)
    deg = torch.randint(0, max_deg + 1, (num_dst,), generator=g)
    if zero_degree:
        deg[0] = 0
    else:
        deg = deg.clamp(min=1)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(deg, 0)])
    indices = torch.randint(0, num_src, (int(indptr[-1]),), generator=g)
    return _C.make_block(indptr, indices, num_src)


def dense(b):
    """The block's adjacency [num_dst, num_src]: edge counts."""
    a = torch.zeros(b.num_dst_nodes(), b.num_src_nodes())
    src, dst = b.edges()
    a.index_put_((dst, src), torch.ones(src.shape[0]), accumulate=True)
    return a


def dense_sage(layer, a, x):
    deg = a.sum(1, keepdim=True).clamp(min=1)
    nd = a.shape[0]
    return layer.fc_self(x[:nd]) + layer.fc_neigh((a @ x) / deg)  # fc_self has the bias, as DGL's


def dense_gcn(layer, a, x):
    nd = a.shape[0]
    a = a.clone()
    a[:, :nd] += torch.eye(nd)  # a self edge per dst node
    c_src = a.sum(0).clamp(min=1).pow(-0.5)
    c_dst = a.sum(1).clamp(min=1).pow(-0.5)
    return (c_dst.unsqueeze(1) * (a @ (c_src.unsqueeze(1) * x))) @ layer.weight + layer.bias


def dense_gat(layer, a, x):
    heads, out = layer._num_heads, layer._out_feats
    z = layer.fc(x).view(-1, heads, out)
    el = (z * layer.attn_l).sum(-1)  # [src, heads]
    er = (z[:a.shape[0]] * layer.attn_r).sum(-1)  # [dst, heads]
    e = torch.nn.functional.leaky_relu(er.unsqueeze(1) + el.unsqueeze(0), 0.2)  # [dst, src, heads]
    e = e.masked_fill((a == 0).unsqueeze(2), float("-inf"))
    alpha = torch.softmax(e, 1).nan_to_num(0.0) * a.unsqueeze(2)  # repeated edges count once each
    alpha = alpha / alpha.sum(1, keepdim=True).clamp(min=1e-30)
    return torch.einsum("dsh,shf->dhf", alpha, z) + layer.bias.view(1, heads, out)


@pytest.mark.parametrize("in_dim,out_dim", [(6, 4), (3, 8)])
def test_sageconv_relu_dropout_is_dropout_of_relu_of_forward(in_dim, out_dim):
    """The form dgld.models' SAGE runs between layers (the bias added in the
    dropout pass): the same output and gradients as dropout(relu(forward))
    with the same seed, scripted, in training and eval mode; a layer with
    an activation of its own keeps it."""
    b = random_block(30, 70, 6, 1)
    layer = dglnn.SAGEConv(in_dim, out_dim, "mean")
    with torch.no_grad():
        layer.fc_self.bias.normal_()
    scripted = torch.jit.script(layer)
    x = torch.randn(70, in_dim, requires_grad=True)
    w = torch.randn(30, out_dim)
    for training in (True, False):
        torch.manual_seed(4)
        want = torch.ops.dgld.dropout(layer(b, x), 0.3, training, True)
        grads_want = torch.autograd.grad((want * w).sum(), [x] + list(layer.parameters()))
        for m in (layer, scripted):
            torch.manual_seed(4)
            got = m.forward_relu_dropout(b, x, 0.3, training)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            grads = torch.autograd.grad((got * w).sum(), [x] + list(m.parameters()))
            for g, gw in zip(grads, grads_want):
                torch.testing.assert_close(g, gw, rtol=1e-4, atol=1e-5)
    act = dglnn.SAGEConv(in_dim, out_dim, "mean", activation=torch.tanh)
    torch.testing.assert_close(act.forward_relu_dropout(b, x, 0.3, False), torch.relu(act(b, x)))


@pytest.mark.parametrize("in_dim,out_dim", [(6, 4), (3, 8)])
def test_sageconv_equals_its_formula_eager_and_scripted(in_dim, out_dim):
    b = random_block(30, 70, 6, 1)
    layer = dglnn.SAGEConv(in_dim, out_dim, "mean")
    with torch.no_grad():
        layer.fc_self.bias.normal_()
    x = torch.randn(70, in_dim)
    want = dense_sage(layer, dense(b), x)
    torch.testing.assert_close(layer(b, x), want, rtol=1e-5, atol=1e-5)
    scripted = torch.jit.script(layer)
    torch.testing.assert_close(scripted(b, x), want, rtol=1e-5, atol=1e-5)
    # DGL's tuple input: (h_src, h_dst) with h_dst the first num_dst rows.
    torch.testing.assert_close(layer(b, (x, x[:30])), want, rtol=1e-5, atol=1e-5)


def test_graphconv_with_self_loops_equals_its_formula():
    b = random_block(25, 60, 5, 2)
    layer = dglnn.GraphConv(7, 5, norm="both", self_loop=True)
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(60, 7)
    want = dense_gcn(layer, dense(b), x)
    torch.testing.assert_close(layer(b, x), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.jit.script(layer)(b, x), want, rtol=1e-5, atol=1e-5)


def test_gatconv_equals_its_formula_and_its_plain_torch_path():
    b = random_block(20, 50, 6, 3, zero_degree=False)
    layer = dglnn.GATConv(6, 4, num_heads=3, allow_zero_in_degree=True)
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(50, 6)
    got = layer(b, x)
    assert got.shape == (20, 3, 4)
    src, dst = b.edges()
    if len(set(zip(src.tolist(), dst.tolist()))) == src.shape[0]:  # the dense form counts a repeated edge once
        torch.testing.assert_close(got, dense_gat(layer, dense(b), x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.jit.script(layer)(b, x), got, rtol=1e-5, atol=1e-6)
    # The general-kernel path (used with attention dropout or edge weights)
    # computes the same with dropout switched off and unit edge weights.
    z = layer.fc(x).view(-1, 3, 4)
    torch.testing.assert_close(layer._aggregate_general(b, z, z[:20], None)
                               + layer.bias.view(1, 3, 4), got, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layer(b, x, edge_weight=torch.ones(b.num_edges())), got, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [lambda i, o: dglnn.SAGEConv(i, o, "mean"),
                                  lambda i, o: dglnn.SAGEConv(i, o, "gcn"),
                                  lambda i, o: dglnn.GraphConv(i, o),
                                  lambda i, o: dglnn.GATConv(i, o, 3),
                                  lambda i, o: dglnn.RelGraphConv(i, o, 4, regularizer="basis", num_bases=2)])
def test_resize_gives_the_shapes_the_constructor_gives(make):
    """resize() (how trainer-host sizes its built-in models) and the
    constructor declare the same parameters: a resized layer is the layer."""
    want = {n: tuple(p.shape) for n, p in make(9, 5).named_parameters()}
    layer = make(2, 3)
    layer.resize(9, 5)
    assert {n: tuple(p.shape) for n, p in layer.named_parameters()} == want
    scripted = torch.jit.script(make(2, 3))
    scripted.resize(9, 5)
    assert {n: tuple(p.shape) for n, p in scripted.named_parameters()} == want


def test_gradients_flow_to_every_parameter():
    b = random_block(15, 40, 4, 4, zero_degree=False)
    for layer in [dglnn.SAGEConv(5, 3), dglnn.GraphConv(5, 3), dglnn.GATConv(5, 3, 2)]:
        x = torch.randn(40, 5, requires_grad=True)
        layer(b, x).sum().backward()
        for name, p in layer.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, f"{type(layer).__name__}.{name}"
        assert x.grad is not None


def test_zero_in_degree_is_refused_as_dgl_does():
    b = random_block(10, 20, 3, 5)  # dst 0 has no in-edges
    with pytest.raises(dgld.DGLError, match="0-in-degree"):
        dglnn.GraphConv(4, 2)(b, torch.randn(20, 4))
    with pytest.raises(dgld.DGLError, match="0-in-degree"):
        dglnn.GATConv(4, 2, 1)(b, torch.randn(20, 4))
    with pytest.raises(torch.jit.Error, match="0-in-degree"):  # scripted: TorchScript's error
        torch.jit.script(dglnn.GraphConv(4, 2))(b, torch.randn(20, 4))
    out = dglnn.GraphConv(4, 2, allow_zero_in_degree=True, bias=False)(b, torch.randn(20, 4))
    assert torch.equal(out[0], torch.zeros(2))


def test_block_api():
    b = _C.make_block(torch.tensor([0, 2, 3, 3]), torch.tensor([1, 3, 0]), 4, torch.tensor([10, 11, 12, 13]),
                      torch.tensor([10, 11, 12]))
    assert b.num_src_nodes() == 4 and b.number_of_dst_nodes() == 3 and b.num_edges() == 3
    src, dst = b.edges()
    assert src.tolist() == [1, 3, 0] and dst.tolist() == [0, 0, 1]
    assert b.in_degrees().tolist() == [2, 1, 0] and b.out_degrees().tolist() == [1, 1, 0, 1]
    assert b.srcdata[dgld.NID].tolist() == [10, 11, 12, 13] and b.dstdata[dgld.NID].tolist() == [10, 11, 12]
    assert b.to(torch.device("cpu")) is not None
    with pytest.raises(ValueError, match="src index 7 of 4"):
        _C.make_block(torch.tensor([0, 1]), torch.tensor([7]), 4)
    with pytest.raises(ValueError, match="aggregator_type must be one of mean, gcn, pool, lstm"):
        dglnn.SAGEConv(2, 2, "median")
