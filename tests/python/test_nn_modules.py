"""dgld.nn's modules against a dense reference of DGL's formula for each, in
double precision: forward and gradcheck, on a block whose edges are not in
dst order and one of whose dst nodes has no in-edge, with a single input and
DGL's (h_src, h_dst) pair; edge weights; DGL's checks (zero in-degree, a
feature of the wrong width naming the layer and both widths)."""

import pytest
import torch
import torch.nn.functional as F

import dgld
import dgld.nn.pytorch as dglnn

NS, ND = 9, 5


def block():
    """Edges in no particular order; dst 3 has none."""
    src = torch.tensor([4, 0, 7, 2, 8, 1, 5, 0, 6, 3, 8])
    dst = torch.tensor([2, 0, 1, 4, 0, 2, 4, 1, 0, 2, 4])
    return dgld.create_block((src, dst), num_src_nodes=NS, num_dst_nodes=ND)


def neighbours(g, v):
    """Edge ids into v, in edge-id order."""
    _, dst = g.edges()
    return torch.nonzero(dst == v).reshape(-1)


def reduce_rows(g, msg, how):
    """Per dst: how ('sum', 'mean', 'max') over its in-edges' messages; 0 without."""
    rows = []
    for v in range(g.num_dst_nodes()):
        m = msg[neighbours(g, v)]
        if m.shape[0] == 0:
            rows.append(msg.new_zeros(msg.shape[1:]))
        else:
            rows.append({"sum": m.sum(0), "mean": m.mean(0), "max": m.max(0)[0]}[how])
    return torch.stack(rows)


def inputs(width=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(NS, width, dtype=torch.float64, generator=gen, requires_grad=True)


def randomise(layer, seed=1):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    return layer.double()


def sage_ref(layer, g, x, ew=None):
    src, _ = g.edges()
    h_src, h_dst = x, x[:g.num_dst_nodes()]
    w = torch.ones(g.num_edges(), 1, dtype=x.dtype) if ew is None else ew.reshape(-1, 1)
    kind = layer._aggre_type
    if kind == "mean":
        neigh = layer.fc_neigh(reduce_rows(g, h_src[src] * w, "mean"))
    elif kind == "gcn":
        deg = g.in_degrees().to(x.dtype).unsqueeze(1)
        neigh = layer.fc_neigh((reduce_rows(g, h_src[src] * w, "sum") + h_dst) / (deg + 1))
    elif kind == "pool":
        neigh = layer.fc_neigh(reduce_rows(g, torch.relu(layer.fc_pool(h_src))[src] * w, "max"))
    else:
        rows = []
        for v in range(g.num_dst_nodes()):
            e = neighbours(g, v)
            if e.numel() == 0:
                rows.append(x.new_zeros(layer._in_src_feats))
                continue
            seq = (h_src[src[e]] * w[e]).unsqueeze(0)
            _, (h, _) = layer.lstm(seq)
            rows.append(h.reshape(-1))
        neigh = layer.fc_neigh(torch.stack(rows))
    # DGL's parameters: fc_self carries the bias; gcn has a bias of its own.
    return neigh + layer.bias if kind == "gcn" else layer.fc_self(h_dst) + neigh


@pytest.mark.parametrize("kind", ["mean", "gcn", "pool", "lstm"])
def test_sageconv(kind):
    g = block()
    layer = randomise(dglnn.SAGEConv(4, 3, kind))
    x = inputs()
    ew = torch.rand(g.num_edges(), dtype=torch.float64) + 0.5
    for weights in (None, ew):
        want = sage_ref(layer, g, x, weights)
        assert torch.allclose(layer(g, x, edge_weight=weights), want, atol=1e-10), kind
        assert torch.allclose(layer(g, (x, x[:ND]), edge_weight=weights), want, atol=1e-10), kind
        assert torch.autograd.gradcheck(lambda t: layer(g, t, edge_weight=weights), (x,))
    if kind != "lstm":
        scripted = torch.jit.script(layer)
        assert torch.allclose(scripted(g._csr(), x), sage_ref(layer, g, x), atol=1e-10)


@pytest.mark.parametrize("norm", ["both", "right", "left", "none"])
def test_graphconv(norm):
    g = block()
    src, dst = g.edges()
    layer = randomise(dglnn.GraphConv(4, 3, norm=norm, allow_zero_in_degree=True))
    x = inputs()
    ew = torch.rand(g.num_edges(), dtype=torch.float64) + 0.5
    out_deg = g.out_degrees().to(x.dtype).clamp(min=1)
    in_deg = g.in_degrees().to(x.dtype).clamp(min=1)
    cu = {"both": out_deg.pow(-0.5), "left": 1 / out_deg}.get(norm, torch.ones(NS, dtype=x.dtype))
    cv = {"both": in_deg.pow(-0.5), "right": 1 / in_deg}.get(norm, torch.ones(ND, dtype=x.dtype))
    for weights in (None, ew):
        w = torch.ones(g.num_edges(), dtype=x.dtype) if weights is None else weights
        want = reduce_rows(g, (x * cu.unsqueeze(1))[src] * w.unsqueeze(1), "sum") @ layer.weight
        want = want * cv.unsqueeze(1) + layer.bias
        assert torch.allclose(layer(g, x, edge_weight=weights), want, atol=1e-10), norm
        assert torch.autograd.gradcheck(lambda t: layer(g, t, edge_weight=weights), (x,))
    with pytest.raises(dgld.DGLError, match="0-in-degree"):
        dglnn.GraphConv(4, 3, norm=norm).double()(g, x)
    # weight=False takes the weight in forward; both is DGL's error
    ext = torch.randn(4, 3, dtype=torch.float64)
    bare = dglnn.GraphConv(4, 3, norm=norm, weight=False, bias=False, allow_zero_in_degree=True).double()
    want_ext = reduce_rows(g, (x * cu.unsqueeze(1))[src], "sum") @ ext * cv.unsqueeze(1)
    assert torch.allclose(bare(g, x, weight=ext), want_ext, atol=1e-10)
    with pytest.raises(RuntimeError, match="External weight is provided"):
        layer(g, x, weight=ext)


def test_edge_weight_norm():
    g = block()
    src, dst = g.edges()
    w = torch.rand(g.num_edges(), dtype=torch.float64) + 0.5
    s_out = torch.zeros(NS, dtype=w.dtype).index_add(0, src, w)
    s_in = torch.zeros(ND, dtype=w.dtype).index_add(0, dst, w)
    both = dglnn.EdgeWeightNorm("both")(g, w)
    assert torch.allclose(both, w / torch.sqrt(s_out[src] * s_in[dst]))
    assert torch.allclose(dglnn.EdgeWeightNorm("right")(g, w), w / s_in[dst])
    assert torch.equal(dglnn.EdgeWeightNorm("none")(g, w), w)
    with pytest.raises(RuntimeError, match="Non-positive edge weight"):
        dglnn.EdgeWeightNorm("both")(g, w - 1.0)
    # GraphConv(norm='none') with normalised weights is GCN's weighted form
    layer = randomise(dglnn.GraphConv(4, 3, norm="none", allow_zero_in_degree=True))
    x = inputs()
    want = reduce_rows(g, x[src] * both.unsqueeze(1), "sum") @ layer.weight + layer.bias
    assert torch.allclose(layer(g, x, edge_weight=both), want)


def attention_ref(g, e, values):
    """softmax of e [E, H] over each dst's in-edges, then sum of a * values[src] [E, H, F]."""
    out = []
    for v in range(g.num_dst_nodes()):
        idx = neighbours(g, v)
        if idx.numel() == 0:
            out.append(values.new_zeros(values.shape[1:]))
            continue
        a = torch.softmax(e[idx], 0)
        out.append((a.unsqueeze(-1) * values[idx]).sum(0))
    return torch.stack(out)


@pytest.mark.parametrize("share_weights", [False, True])
def test_gatv2conv(share_weights):
    g = block()
    src, dst = g.edges()
    layer = randomise(dglnn.GATv2Conv(4, 3, num_heads=2, residual=True, allow_zero_in_degree=True,
                                      share_weights=share_weights))
    x = inputs()
    fs = layer.fc_src(x).view(-1, 2, 3)
    # On a block, as DGL's GATv2Conv (1.1.3 and 2.x): fc_dst(h)[:num_dst],
    # fc_src's rows only with share_weights.
    fd = fs[:ND] if share_weights else layer.fc_dst(x).view(-1, 2, 3)[:ND]
    e = (F.leaky_relu(fs[src] + fd[dst], 0.2) * layer.attn).sum(-1)
    want = attention_ref(g, e, fs[src]) + layer.res_fc(x[:ND]).view(ND, 2, 3)
    assert torch.allclose(layer(g, x), want, atol=1e-10)
    # Every parameter gets a gradient on a block (DDP without
    # find_unused_parameters needs it).
    layer.zero_grad()
    layer(g, x).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters())
    # On a whole graph fc_dst projects the destination nodes (unless shared).
    whole = dgld.graph((src, dst), num_nodes=NS)
    fd_all = fs if share_weights else layer.fc_dst(x).view(-1, 2, 3)
    e_all = (F.leaky_relu(fs[src] + fd_all[dst], 0.2) * layer.attn).sum(-1)
    want_all = attention_ref(whole, e_all, fs[src]) + layer.res_fc(x).view(NS, 2, 3)
    assert torch.allclose(layer(whole, x), want_all, atol=1e-10)
    assert torch.autograd.gradcheck(lambda t: layer(g, t), (x,))
    scripted = torch.jit.script(layer)
    assert torch.allclose(scripted(g._csr(), x), want, atol=1e-10)
    pair = randomise(dglnn.GATv2Conv((4, 2), 3, num_heads=2, allow_zero_in_degree=True))
    xd = torch.randn(ND, 2, dtype=torch.float64)
    fs, fd = pair.fc_src(x).view(-1, 2, 3), pair.fc_dst(xd).view(-1, 2, 3)
    e = (F.leaky_relu(fs[src] + fd[dst], 0.2) * pair.attn).sum(-1)
    assert torch.allclose(pair(g, (x, xd)), attention_ref(g, e, fs[src]), atol=1e-10)
    with pytest.raises(dgld.DGLError, match="0-in-degree"):
        dglnn.GATv2Conv(4, 3, num_heads=2).double()(g, x)


def test_gatconv_with_edge_weight_and_attention_dropout_path():
    g = block()
    src, dst = g.edges()
    layer = randomise(dglnn.GATConv(4, 3, num_heads=2, allow_zero_in_degree=True))
    x = inputs()
    ew = torch.rand(g.num_edges(), dtype=torch.float64) + 0.5
    z = layer.fc(x).view(-1, 2, 3)
    e = F.leaky_relu((z * layer.attn_l).sum(-1)[src] + (z[:ND] * layer.attn_r).sum(-1)[dst], 0.2)
    want = attention_ref(g, e, z[src] * ew.view(-1, 1, 1)) + layer.bias.view(1, 2, 3)
    assert torch.allclose(layer(g, x, edge_weight=ew), want, atol=1e-10)
    assert torch.autograd.gradcheck(lambda t: layer(g, t, edge_weight=ew), (x,))


def test_gatconv_pair_input_with_more_dst_than_src_nodes():
    """DGL's (h_src, h_dst) pair on a relation into another node type: the
    dst nodes' attention term comes from their own features (fc_dst with
    pair widths, the one fc otherwise), however many there are."""
    src, dst = torch.tensor([0, 1, 1, 2, 0]), torch.tensor([0, 1, 2, 3, 5])
    g = dgld.create_block((src, dst), num_src_nodes=3, num_dst_nodes=6)
    x = inputs()[:3].detach().requires_grad_(True)
    xd = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    for in_feats, residual in (((4, 2), True), ((4, 2), False)):
        layer = randomise(dglnn.GATConv(in_feats, 3, num_heads=2, residual=residual, allow_zero_in_degree=True))
        zs, zd = layer.fc_src(x).view(-1, 2, 3), layer.fc_dst(xd).view(-1, 2, 3)
        e = F.leaky_relu((zs * layer.attn_l).sum(-1)[src] + (zd * layer.attn_r).sum(-1)[dst], 0.2)
        want = attention_ref(g, e, zs[src]) + layer.bias.view(1, 2, 3)
        if residual:
            want = want + layer.res_fc(xd).view(6, 2, 3)
        assert torch.allclose(layer(g, (x, xd)), want, atol=1e-10)
        assert torch.autograd.gradcheck(lambda a, b: layer(g, (a, b)), (x, xd))
    shared = randomise(dglnn.GATConv(4, 3, num_heads=2, allow_zero_in_degree=True))
    x4 = torch.randn(6, 4, dtype=torch.float64)
    z, zd = shared.fc(x).view(-1, 2, 3), shared.fc(x4).view(-1, 2, 3)
    e = F.leaky_relu((z * shared.attn_l).sum(-1)[src] + (zd * shared.attn_r).sum(-1)[dst], 0.2)
    assert torch.allclose(shared(g, (x, x4)), attention_ref(g, e, z[src]) + shared.bias.view(1, 2, 3), atol=1e-10)
    scripted = torch.jit.script(shared)
    assert torch.allclose(scripted(g._csr(), (x, x4)), shared(g, (x, x4)), atol=1e-10)
    with pytest.raises(dgld.nn._utils.InvalidArgument, match="destination node features have width 3"):
        shared(g, (x, torch.randn(6, 3, dtype=torch.float64)))


@pytest.mark.parametrize("aggr", ["sum", "max", "mean"])
def test_ginconv(aggr):
    g = block()
    src, _ = g.edges()
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    layer = randomise(dglnn.GINConv(mlp, aggr, init_eps=0.1, learn_eps=True))
    x = inputs()
    ew = torch.rand(g.num_edges(), dtype=torch.float64) + 0.5
    for weights in (None, ew):
        w = torch.ones(g.num_edges(), 1, dtype=x.dtype) if weights is None else weights.unsqueeze(1)
        want = mlp((1 + layer.eps) * x[:ND] + reduce_rows(g, x[src] * w, aggr))
        assert torch.allclose(layer(g, x, edge_weight=weights), want, atol=1e-10)
        assert torch.allclose(layer(g, (x, x[:ND]), edge_weight=weights), want, atol=1e-10)
        assert torch.autograd.gradcheck(lambda t: layer(g, t, edge_weight=weights), (x,))
    layer(g, x).sum().backward()
    assert layer.eps.grad is not None
    # eps fixed (0 by default, or not): the sum's one-pass path with the dst row added.
    for eps in (0.0, 0.3):
        fixed = dglnn.GINConv(mlp, aggr, init_eps=eps)
        want = mlp((1 + eps) * x[:ND] + reduce_rows(g, x[src], aggr))
        assert torch.allclose(fixed(g, x), want, atol=1e-10)
        assert torch.autograd.gradcheck(lambda t: fixed(g, t), (x,))
    assert torch.allclose(torch.jit.script(layer)(g._csr(), x), mlp((1 + layer.eps) * x[:ND]
                                                                   + reduce_rows(g, x[src], aggr)), atol=1e-10)


@pytest.mark.parametrize("regularizer,num_bases", [(None, None), ("basis", 2), ("bdd", 2)])
def test_relgraphconv(regularizer, num_bases):
    g = block()
    src, _ = g.edges()
    etypes = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1])
    layer = randomise(dglnn.RelGraphConv(4, 4, 3, regularizer=regularizer, num_bases=num_bases))
    x = inputs()
    norm = torch.rand(g.num_edges(), 1, dtype=torch.float64)
    weights = [layer.linear_r.weight(r) for r in range(3)]
    if regularizer == "basis":
        assert torch.allclose(weights[1], layer.linear_r.coeff[1, 0] * layer.linear_r.W[0]
                              + layer.linear_r.coeff[1, 1] * layer.linear_r.W[1])
    msg = torch.stack([x[src[i]] @ weights[int(etypes[i])] for i in range(g.num_edges())]) * norm
    want = reduce_rows(g, msg, "sum") + layer.h_bias + x[:ND] @ layer.loop_weight
    assert torch.allclose(layer(g, x, etypes, norm), want, atol=1e-10)
    assert torch.autograd.gradcheck(lambda t: layer(g, t, etypes, norm), (x,))
    with pytest.raises(dgld.DGLError, match=r"edge types must be in \[0, 3\)"):
        layer(g, x, etypes + 1)


def test_wrong_width_names_the_layer_and_both_widths():
    g = block()
    x = torch.randn(NS, 7)
    ok = {"allow_zero_in_degree": True}
    for layer, name in ((dglnn.SAGEConv(4, 3), "SAGEConv"), (dglnn.GraphConv(4, 3, **ok), "GraphConv"),
                        (dglnn.GATConv(4, 3, 2, **ok), "GATConv"), (dglnn.GATv2Conv(4, 3, 2, **ok), "GATv2Conv"),
                        (dglnn.RelGraphConv(4, 3, 2), "RelGraphConv")):
        with pytest.raises(dgld.DGLError, match=f"{name}: .*width 7, but the layer was built for 4"):
            if name == "RelGraphConv":
                layer(g, x, torch.zeros(g.num_edges(), dtype=torch.int64))
            else:
                layer(g, x)


def test_constructor_errors():
    with pytest.raises(dgld.DGLError, match="Invalid norm value"):
        dglnn.GraphConv(4, 3, norm="sym")
    with pytest.raises(ValueError, match="divisible by num_bases"):
        dglnn.RelGraphConv(5, 4, 3, regularizer="bdd", num_bases=2)
    with pytest.raises(ValueError, match="GINConv: aggregator_type"):
        dglnn.GINConv(None, "prod")


@pytest.mark.parametrize("kind,names", [
    ("mean", {"fc_self.weight", "fc_self.bias", "fc_neigh.weight"}),
    ("pool", {"fc_pool.weight", "fc_pool.bias", "fc_self.weight", "fc_self.bias", "fc_neigh.weight"}),
    ("gcn", {"fc_neigh.weight", "bias"}),
])
def test_sageconv_has_dgls_parameters(kind, names):
    """DGL's SAGEConv keeps the bias in fc_self (nn.Linear's initial values);
    only gcn, which has no fc_self, has a zero-initialised bias of its own."""
    layer = dglnn.SAGEConv(5, 3, kind)
    assert {n for n, _ in layer.named_parameters()} == names
    if kind == "gcn":
        assert layer.bias.abs().sum() == 0
    else:
        assert 0 < layer.fc_self.bias.abs().max() <= 1 / 5 ** 0.5
    assert {n for n, _ in dglnn.SAGEConv(5, 3, kind, bias=False).named_parameters()} == names - {"fc_self.bias",
                                                                                                 "bias"}
