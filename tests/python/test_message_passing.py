"""Every built-in message / reduce combination of dgld.function on the fused
kernels against a dense reference in double precision, forward and
gradcheck: broadcasting feature shapes, a node without in-edges, a
non-identity edge order, blocks, and empty graphs."""

import itertools

import pytest
import torch

import dgld
import dgld.function as fn

MESSAGES = ["copy_u", "copy_e", "copy_v"] + [f"{a}_{op}_{b}" for op in fn.BINARY_OPS for a in "uve" for b in "uve"
                                            if a != b]
REDUCERS = list(fn.REDUCERS)


def random_graph(block):
    """7 src / 7 dst nodes (5 dst for the block), 13 edges in an order that
    is not dst-major; dst 3 has no in-edge."""
    g = torch.Generator().manual_seed(3)
    num_src, num_dst = 7, (5 if block else 7)
    dst_choices = torch.tensor([d for d in range(num_dst) if d != 3])
    dst = dst_choices[torch.randint(0, dst_choices.numel(), (13,), generator=g)]
    src = torch.randint(0, num_src, (13,), generator=g)
    if block:
        return dgld.create_block((src, dst), num_src_nodes=num_src, num_dst_nodes=num_dst)
    return dgld.graph((src, dst), num_nodes=num_src)


def shapes_for(name):
    """Feature shapes (lhs, rhs) to try for a message: equal shapes, and
    shapes that broadcast."""
    if "dot" in name:
        return [((2, 5), (2, 5)), ((1, 5), (3, 5)), ((4,), (4,))]
    if name.startswith("copy"):
        return [((3,), None), ((2, 3), None), ((), None)]
    return [((3,), (3,)), ((3, 1), (1, 4)), ((2, 3), (3,)), ((), ())]


def parse(name):
    if name.startswith("copy"):
        return "copy", name[-1], None
    a, op, b = name.split("_")
    return op, a, b


def rows(g, target):
    return {"u": g.num_src_nodes(), "v": g.num_dst_nodes(), "e": g.num_edges()}[target]


def dense_messages(g, name, lhs, rhs):
    op, a, b = parse(name)
    src, dst = g.edges()
    pick = {"u": lambda t: t[src], "v": lambda t: t[dst], "e": lambda t: t}
    x = pick[a](lhs)
    if op == "copy":
        return x
    y = pick[b](rhs)
    # DGL's broadcasting: the shorter feature shape gets leading ones.
    while x.dim() < y.dim():
        x = x.unsqueeze(1)
    while y.dim() < x.dim():
        y = y.unsqueeze(1)
    if op == "dot":
        return (x * y).sum(-1, keepdim=True)
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](x, y)


def dense_reduce(g, msg, reducer):
    _, dst = g.edges()
    n = g.num_dst_nodes()
    out = []
    for v in range(n):
        m = msg[dst == v]
        if m.shape[0] == 0:
            out.append(torch.zeros(msg.shape[1:], dtype=msg.dtype))
        elif reducer == "sum":
            out.append(m.sum(0))
        elif reducer == "mean":
            out.append(m.mean(0))
        elif reducer == "max":
            out.append(m.max(0)[0])
        else:
            out.append(m.min(0)[0])
    return torch.stack(out) if out else msg.new_zeros((0,) + tuple(msg.shape[1:]))


def operands(g, name, shapes, seed):
    gen = torch.Generator().manual_seed(seed)
    op, a, b = parse(name)
    lhs = torch.randn((rows(g, a),) + shapes[0], dtype=torch.float64, generator=gen)
    rhs = None
    if b is not None:
        rhs = torch.randn((rows(g, b),) + shapes[1], dtype=torch.float64, generator=gen)
        if op == "div":
            rhs = rhs.sign() * (rhs.abs() + 0.5)  # away from zero
    return lhs, rhs


def set_operand(g, target, name, value):
    {"u": g.srcdata, "v": g.dstdata, "e": g.edata}[target][name] = value


def builtin(name, out):
    op, a, b = parse(name)
    f = getattr(fn, name)
    return f("x", out) if b is None else f("x", "y", out)


def run_update_all(g, name, reducer, lhs, rhs):
    op, a, b = parse(name)
    with g.local_scope():
        set_operand(g, a, "x", lhs)
        if b is not None:
            set_operand(g, b, "y", rhs)
        g.update_all(builtin(name, "m"), getattr(fn, reducer)("m", "out"))
        return g.dstdata["out"]


def run_apply_edges(g, name, lhs, rhs):
    op, a, b = parse(name)
    with g.local_scope():
        set_operand(g, a, "x", lhs)
        if b is not None:
            set_operand(g, b, "y", rhs)
        g.apply_edges(builtin(name, "m"))
        return g.edata["m"]


@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("name", MESSAGES)
def test_update_all_builtins_match_dense_reference(name, block):
    g = random_graph(block)
    for i, shapes in enumerate(shapes_for(name)):
        lhs, rhs = operands(g, name, shapes, seed=i)
        msg = dense_messages(g, name, lhs, rhs)
        for reducer in REDUCERS:
            got = run_update_all(g, name, reducer, lhs, rhs)
            want = dense_reduce(g, msg, reducer)
            assert got.shape == want.shape, (name, reducer, shapes)
            assert torch.allclose(got, want, atol=1e-12), (name, reducer, shapes)
        got = run_apply_edges(g, name, lhs, rhs)
        assert got.shape == msg.shape and torch.allclose(got, msg, atol=1e-12), (name, shapes)


@pytest.mark.parametrize("name", MESSAGES)
def test_builtins_gradcheck(name):
    g = random_graph(block=name.endswith("v") or name.startswith("v"))
    shapes = shapes_for(name)[1]  # a broadcasting (or 2-d) case
    lhs, rhs = operands(g, name, shapes, seed=7)
    inputs = [lhs.requires_grad_()] + ([rhs.requires_grad_()] if rhs is not None else [])

    def call(reducer):
        if reducer is None:
            return lambda *t: run_apply_edges(g, name, t[0], t[1] if len(t) > 1 else None)
        return lambda *t: run_update_all(g, name, reducer, t[0], t[1] if len(t) > 1 else None)

    for reducer in REDUCERS + [None]:
        assert torch.autograd.gradcheck(call(reducer), inputs, eps=1e-6, atol=1e-5), (name, reducer)


@pytest.mark.parametrize("reducer", REDUCERS)
def test_empty_graphs(reducer):
    for g in (dgld.graph(([], []), num_nodes=4), dgld.graph(([], []), num_nodes=0),
              dgld.create_block(([], []), num_src_nodes=3, num_dst_nodes=0)):
        g.srcdata["h"] = torch.randn(g.num_src_nodes(), 2, dtype=torch.float64, requires_grad=True)
        g.edata["w"] = torch.randn(0, 2, dtype=torch.float64)
        g.update_all(fn.u_mul_e("h", "w", "m"), getattr(fn, reducer)("m", "out"))
        out = g.dstdata["out"]
        assert out.shape == (g.num_dst_nodes(), 2) and not out.abs().sum()
        out.sum().backward()
        g.apply_edges(fn.u_dot_e("h", "w", "s"))
        assert g.edata["s"].shape == (0, 1)


def test_float32_matches_float64():
    g = random_graph(block=False)
    for name, reducer in itertools.product(["u_mul_e", "copy_u", "u_add_v", "e_div_u"], REDUCERS):
        lhs, rhs = operands(g, name, shapes_for(name)[0], seed=11)
        ref = run_update_all(g, name, reducer, lhs, rhs)
        got = run_update_all(g, name, reducer, lhs.float(), None if rhs is None else rhs.float())
        assert got.dtype == torch.float32 and torch.allclose(got.double(), ref, atol=1e-5)


def test_old_names_are_aliases():
    g = random_graph(block=False)
    g.ndata["h"] = torch.randn(7, 3)
    g.edata["w"] = torch.randn(13, 3)
    g.update_all(fn.src_mul_edge("h", "w", "m"), fn.sum("m", "a"))
    g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "b"))
    g.update_all(fn.copy_src("h", "m"), fn.max("m", "c"))
    g.update_all(fn.copy_u("h", "m"), fn.max("m", "d"))
    assert torch.equal(g.ndata["a"], g.ndata["b"]) and torch.equal(g.ndata["c"], g.ndata["d"])
