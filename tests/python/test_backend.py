"""dgld.backend (DGL's tensor backend interface, `import dgl.backend as F`)
against torch's own results, and the graph constructors rand_graph,
rand_bipartite, from_scipy and bipartite_from_scipy against DGL's
contract (shapes, dtypes, edge counts, distinct edges, seeds, storage
order). No job needed."""

import numpy as np
import pytest
import torch

import dgld
import dgld.backend as F
from dgld import DGLError

# Every name of DGL 1.1.3's backend interface (dgl/backend/backend.py).
DGL_INTERFACE = """data_type_dict cpu tensor as_scalar get_preferred_sparse_format sparse_matrix sparse_matrix_indices
is_tensor shape dtype ndim context device_type device_id to_backend_ctx astype asnumpy copy_to is_pinned sum floor_div
reduce_sum cumsum mean reduce_mean max reduce_max min reduce_min argsort topk argtopk exp inverse sqrt softmax cat
stack split repeat gather_row slice_axis take narrow_row scatter_row index_add_inplace scatter_row_inplace squeeze
unsqueeze reshape swapaxes empty zeros zeros_like ones uniform randint pad_packed_tensor pack_padded_tensor
boolean_mask equal allclose logical_not logical_and clone clamp replace_inf_with_zero count_nonzero unique full_1d
nonzero_1d sort_1d arange rand_shuffle zerocopy_to_dlpack zerocopy_from_dlpack zerocopy_to_numpy zerocopy_from_numpy
zerocopy_to_dgl_ndarray zerocopy_to_dgl_ndarray_for_write zerocopy_from_dgl_ndarray binary_reduce copy_reduce gspmm
gspmm_hetero gsddmm gsddmm_hetero edge_softmax edge_softmax_hetero segment_reduce scatter_add csrmm csrsum csrmask
gather_mm segment_mm sync attach_grad backward grad is_no_grad is_recording record_grad no_grad NodeEmbedding""".split()

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
          "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
          "bool": torch.bool}


# ---------------------------------------------------------------------------
# The module


def test_module_names():
    assert F.backend_name == "pytorch"
    assert dgld.backend is F
    assert F.data_type_dict == DTYPES
    for name, dt in DTYPES.items():
        assert getattr(F, name) is dt
    assert F.reverse_data_type_dict[torch.float32] == "float32"
    for api in DGL_INTERFACE:
        assert api == "data_type_dict" or callable(getattr(F, api)), api
    missing = {"binary_reduce", "copy_reduce", "NodeEmbedding"}
    for api in DGL_INTERFACE:
        if api != "data_type_dict":
            assert F.is_enabled(api) == (api not in missing), api
    for api in missing:
        with pytest.raises(ImportError, match=f'API "{api}" is not supported by backend "pytorch"'):
            getattr(F, api)()
    assert F.get_preferred_backend() in ("pytorch", "mxnet", "tensorflow")
    F.load_backend("pytorch")
    with pytest.raises(NotImplementedError):
        F.load_backend("mxnet")
    # DGL's module path of the implementation
    import dgld.backend.pytorch as impl
    assert impl.gather_row is F.gather_row and impl.gspmm is F.gspmm


def test_star_import_as_dgls_tests_do():
    ns = {}
    exec("from dgld.backend import *", ns)
    assert ns["backend_name"] == "pytorch" and ns["float32"] is torch.float32 and ns["bool"] is torch.bool
    for api in ("zerocopy_from_numpy", "asnumpy", "tensor", "zeros", "ones", "arange", "copy_to", "cpu", "cat",
                "gather_row", "scatter_row", "unique", "boolean_mask", "astype", "to_dgl_nd", "from_dgl_nd"):
        assert api in ns, api
    assert not any(k in ns for k in ("os", "json", "warnings", "torch")), "modules leak into star imports"


def test_cli_env_other_backend_warns(tmp_path):
    import subprocess
    import sys
    code = "import dgld.backend as F; print(F.backend_name, F.get_preferred_backend())"
    env = {"DGLBACKEND": "mxnet", "PYTHONPATH": ":".join(sys.path), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["pytorch", "mxnet"]
    assert "runs on PyTorch only" in out.stderr


# ---------------------------------------------------------------------------
# Tensor functions against torch


def test_creation_and_queries():
    t = F.tensor(3)
    assert t.shape == (1,) and t.item() == 3  # a scalar makes a one-element tensor
    assert F.tensor(2.5, F.float64).dtype == torch.float64
    stacked = F.tensor([torch.tensor(1), torch.tensor(2)])
    assert stacked.tolist() == [1, 2]
    assert F.tensor([torch.tensor(1), torch.tensor(2)], F.float32).dtype == torch.float32
    x = torch.arange(4)
    assert F.tensor(x) is x  # same dtype: returned as it is
    assert F.tensor(x, F.float32).dtype == torch.float32
    arr = np.arange(5, dtype=np.int32)
    shared = F.tensor(arr)
    arr[0] = 9
    assert shared.dtype == torch.int32 and shared[0].item() == 9  # as_tensor shares NumPy's memory
    assert F.as_scalar(torch.tensor([7])) == 7
    y = torch.zeros(2, 3, dtype=torch.float16)
    assert F.shape(y) == (2, 3) and F.dtype(y) == torch.float16 and F.ndim(y) == 2
    assert F.context(y) == torch.device("cpu") and F.cpu() == torch.device("cpu")
    assert F.device_type(F.cpu()) == "cpu" and F.device_type("cuda:1") == "cuda"
    assert F.device_id("cpu") == 0 and F.device_id(torch.device("cuda", 3)) == 3
    assert F.is_tensor(y) and not F.is_tensor(np.zeros(2))

    class Ctx:
        def __init__(self, kind, idx):
            self.device_type, self.device_id = kind, idx
    assert F.to_backend_ctx(Ctx(1, 0)) == torch.device("cpu")
    assert F.to_backend_ctx(Ctx(2, 1)) == torch.device("cuda", 1)
    with pytest.raises(ValueError):
        F.to_backend_ctx(Ctx(7, 0))
    assert F.copy_to(y, F.cpu()) is y
    with pytest.raises(RuntimeError):
        F.copy_to(y, "meta")
    assert not F.is_pinned(y)
    assert F.astype(torch.tensor([1.7, -2.2]), F.int64).tolist() == [1, -2]
    assert F.empty((2, 2), F.int32, F.cpu()).dtype == torch.int32
    assert torch.equal(F.zeros((2, 3), F.float32, F.cpu()), torch.zeros(2, 3))
    assert torch.equal(F.ones((4,), F.int64, "cpu"), torch.ones(4, dtype=torch.int64))
    assert torch.equal(F.zeros_like(torch.ones(3, dtype=torch.int8)), torch.zeros(3, dtype=torch.int8))
    assert torch.equal(F.full_1d(3, 5, F.int32, F.cpu()), torch.tensor([5, 5, 5], dtype=torch.int32))
    assert torch.equal(F.arange(2, 6), torch.tensor([2, 3, 4, 5]))
    assert F.arange(0, 3, F.int32, F.cpu()).dtype == torch.int32
    c = torch.ones(3)
    assert torch.equal(F.clone(c), c) and F.clone(c).data_ptr() != c.data_ptr()


def test_random_draws_follow_torch_seed():
    torch.manual_seed(5)
    a = F.uniform((1000,), F.float32, F.cpu(), -2.0, 3.0)
    torch.manual_seed(5)
    b = F.uniform((1000,), F.float32, F.cpu(), -2.0, 3.0)
    assert torch.equal(a, b) and float(a.min()) >= -2.0 and float(a.max()) < 3.0
    r = F.randint((500,), F.int64, F.cpu(), 3, 7)
    assert set(r.tolist()) == {3, 4, 5, 6}
    s = F.rand_shuffle(torch.arange(50) * 2)
    assert sorted(s.tolist()) == list(range(0, 100, 2))


def test_numpy_and_dlpack():
    x = torch.arange(6.0).reshape(2, 3)
    n = F.asnumpy(x)
    assert isinstance(n, np.ndarray) and n.tolist() == x.tolist()
    g = torch.ones(2, requires_grad=True) * 2
    assert F.asnumpy(g).tolist() == [2.0, 2.0]  # detached
    sp = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([3.0, 4.0]), (2, 2))
    assert F.asnumpy(sp).tolist() == [[0, 3], [4, 0]]
    z = F.zerocopy_to_numpy(x)
    z[0, 0] = 42
    assert x[0, 0] == 42
    arr = np.ones(3)
    t = F.zerocopy_from_numpy(arr)
    arr[1] = 5
    assert t[1] == 5
    back = F.zerocopy_from_dlpack(F.zerocopy_to_dlpack(x))
    assert back.data_ptr() == x.data_ptr() and torch.equal(back, x)
    for fn in (F.zerocopy_to_dgl_ndarray, F.zerocopy_to_dgl_ndarray_for_write, F.zerocopy_from_dgl_ndarray,
               F.to_dgl_nd, F.from_dgl_nd):
        with pytest.raises(DGLError, match="DGL's NDArray"):
            fn(x)


def test_reductions_and_math():
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    assert torch.equal(F.sum(x, 1), x.sum(1))
    assert F.sum(x, 0, keepdims=True).shape == (1, 5)
    assert torch.equal(F.reduce_sum(x), x.sum())
    assert torch.equal(F.floor_div(torch.tensor([7, -7]), 2), torch.tensor([3, -4]))
    assert torch.equal(F.cumsum(x, 0), torch.cumsum(x, 0))
    assert torch.equal(F.mean(x, 1), x.mean(1)) and torch.equal(F.reduce_mean(x), x.mean())
    assert torch.equal(F.max(x, 1), x.max(1).values) and torch.equal(F.reduce_max(x), x.max())
    assert torch.equal(F.min(x, 0), x.min(0).values) and torch.equal(F.reduce_min(x), x.min())
    assert torch.equal(F.argsort(x, 1, True), torch.argsort(x, 1, descending=True))
    assert torch.equal(F.topk(x, 2, 1), torch.topk(x, 2, 1).values)
    assert torch.equal(F.topk(x, 2, 1, descending=False), torch.topk(x, 2, 1, largest=False).values)
    assert torch.equal(F.argtopk(x, 3, 0), torch.topk(x, 3, 0).indices)
    assert torch.equal(F.argtopk(x, 3, 0, False), torch.topk(x, 3, 0, largest=False).indices)
    assert torch.equal(F.exp(x), torch.exp(x)) and torch.equal(F.sqrt(x.abs()), x.abs().sqrt())
    m = torch.randn(3, 3) + 3 * torch.eye(3)
    assert torch.allclose(F.inverse(m) @ m, torch.eye(3), atol=1e-5)
    assert torch.equal(F.softmax(x), torch.softmax(x, -1)) and torch.equal(F.softmax(x, 0), torch.softmax(x, 0))
    assert torch.equal(F.equal(torch.tensor([1, 2]), torch.tensor([1, 3])), torch.tensor([True, False]))
    assert F.allclose(x, x + 1e-6) and not F.allclose(x, x + 1)
    b = torch.tensor([True, False, True])
    assert F.logical_not(b).tolist() == [False, True, False]
    assert F.logical_and(b, torch.tensor([True, True, False])).tolist() == [True, False, False]
    assert torch.equal(F.clamp(x, -0.5, 0.5), x.clamp(-0.5, 0.5))
    inf = torch.tensor([1.0, float("inf"), -float("inf")])
    assert F.replace_inf_with_zero(inf).tolist() == [1.0, 0.0, 0.0]
    assert F.count_nonzero(torch.tensor([0, 3, 0, 1])) == 2 and isinstance(F.count_nonzero(b), int)


def test_shapes_and_indexing():
    x = torch.arange(24.0).reshape(4, 6)
    assert torch.equal(F.cat([x, x], 0), torch.cat([x, x])) and torch.equal(F.stack([x, x], 1), torch.stack([x, x], 1))
    assert [p.shape[1] for p in F.split(x, 4, 1)] == [4, 2]
    assert [p.shape[0] for p in F.split(x, [1, 3], 0)] == [1, 3]
    assert F.repeat(torch.tensor([1, 2]), 2, 0).tolist() == [1, 1, 2, 2]
    assert F.repeat(torch.tensor([1, 2]), torch.tensor([1, 3]), 0).tolist() == [1, 2, 2, 2]
    assert torch.equal(F.gather_row(x, torch.tensor([3, 0, 3], dtype=torch.int32)), x[[3, 0, 3]])
    assert torch.equal(F.slice_axis(x, 1, 2, 5), x[:, 2:5])
    idx = torch.tensor([[0, 2], [1, 1]])
    assert torch.equal(F.take(x, idx, 0), x[idx]) and F.take(x, idx, 1).shape == (4, 2, 2)
    assert torch.equal(F.take(x, idx, 1), x[:, idx])
    view = F.narrow_row(x, 1, 3)
    assert torch.equal(view, x[1:3]) and view.data_ptr() == x[1].data_ptr()
    assert F.squeeze(torch.zeros(2, 1), 1).shape == (2,) and F.unsqueeze(torch.zeros(2), 0).shape == (1, 2)
    assert F.reshape(x, (6, 4)).shape == (6, 4) and torch.equal(F.swapaxes(x, 0, 1), x.t())
    assert torch.equal(F.boolean_mask(x, torch.tensor([1, 0, 0, 1])), x[[0, 3]])
    assert torch.equal(F.boolean_mask(x, torch.tensor([True, False, True, False])), x[[0, 2]])
    assert F.nonzero_1d(torch.tensor([0, 5, 0, 2])).tolist() == [1, 3]
    assert F.nonzero_1d(torch.tensor([0, 1])).tolist() == [1]  # one hit: still 1-D
    vals, order = F.sort_1d(torch.tensor([3, 1, 2]))
    assert vals.tolist() == [1, 2, 3] and order.tolist() == [1, 2, 0]
    u = torch.tensor([3, 1, 3, 2])
    assert F.unique(u).tolist() == [1, 2, 3]
    uq, inv, cnt = F.unique(u, return_inverse=True, return_counts=True)
    assert inv.tolist() == [2, 0, 2, 1] and cnt.tolist() == [1, 1, 2]
    ub = F.unique(torch.tensor([True, False, True]))
    assert ub.dtype == torch.int8 and ub.tolist() == [0, 1]


def test_scatter_functions():
    data = torch.zeros(4, 2, requires_grad=True)
    value = torch.ones(2, 2, requires_grad=True)
    out = F.scatter_row(data, torch.tensor([3, 1], dtype=torch.int32), value)
    assert out.tolist() == [[0, 0], [1, 1], [0, 0], [1, 1]] and data.sum() == 0  # out of place
    out.sum().backward()
    assert value.grad.tolist() == [[1, 1], [1, 1]] and data.grad.tolist() == [[1, 1], [0, 0], [1, 1], [0, 0]]
    d = torch.zeros(3)
    F.index_add_inplace(d, torch.tensor([0, 2, 0]), torch.tensor([1.0, 2.0, 3.0]))
    assert d.tolist() == [4.0, 0.0, 2.0]
    F.scatter_row_inplace(d, torch.tensor([1], dtype=torch.int32), torch.tensor([9.0]))
    assert d.tolist() == [4.0, 9.0, 2.0]


def test_pad_and_pack():
    lengths = [2, 0, 3]
    packed = torch.arange(5.0).unsqueeze(1).repeat(1, 2)
    padded = F.pad_packed_tensor(packed, lengths, -1.0)
    expect = torch.full((3, 3, 2), -1.0)
    expect[0, :2] = packed[:2]
    expect[2, :3] = packed[2:]
    assert torch.equal(padded, expect)
    assert F.pad_packed_tensor(packed, torch.tensor(lengths), 0.0, l_min=5).shape == (3, 5, 2)
    assert torch.equal(F.pack_padded_tensor(padded, lengths), packed)
    assert torch.equal(F.pack_padded_tensor(padded, torch.tensor(lengths)), packed)


def test_sparse_matrix():
    coords = torch.tensor([[0, 2], [1, 0]])
    spmat, shuffle = F.sparse_matrix(torch.tensor([5.0, 6.0]), ("coo", coords), (3, 2))
    assert shuffle is None and spmat.to_dense().tolist() == [[0, 5], [0, 0], [6, 0]]
    fmt, idx = F.sparse_matrix_indices(spmat)
    assert fmt == "coo" and torch.equal(idx, coords)
    assert F.get_preferred_sparse_format() == "coo"
    with pytest.raises(TypeError):
        F.sparse_matrix(torch.ones(2), ("csr", coords), (3, 2))


def test_autograd_helpers():
    x = torch.ones(3)
    assert F.attach_grad(x) is x and x.requires_grad
    F.backward((x * 2).sum())
    assert F.grad(x).tolist() == [2, 2, 2] and not F.is_no_grad(x)
    F.attach_grad(x)  # zeroes the existing gradient
    assert F.is_no_grad(x)
    y = torch.tensor([3.0], requires_grad=True)
    F.backward((y * y).sum(), torch.tensor([1.0]))  # one-element head gradient for a scalar
    assert y.grad.tolist() == [6.0]
    assert F.is_recording()
    with F.no_grad():
        assert not F.is_recording()
    with F.record_grad():
        assert F.is_recording()
    F.sync()


# ---------------------------------------------------------------------------
# Graph operators


def dense_adj(g):
    src, dst = g.edges()
    a = torch.zeros(g.num_nodes(), g.num_nodes())
    a.index_put_((src, dst), torch.ones(src.numel()), accumulate=True)
    return a


def test_gspmm_gsddmm_edge_softmax_on_dgld_graphs():
    torch.manual_seed(1)
    g = dgld.graph((torch.tensor([0, 1, 2, 2, 3]), torch.tensor([1, 2, 0, 1, 1])), num_nodes=4)
    x, e = torch.randn(4, 3), torch.randn(5, 3)
    src, dst = g.edges()
    expect = torch.zeros(4, 3).index_add(0, dst, x[src] * e)
    assert torch.allclose(F.gspmm(g, "mul", "sum", x, e), expect, atol=1e-6)
    expect_max = torch.full((4, 3), -float("inf"))
    for i in range(5):
        expect_max[dst[i]] = torch.maximum(expect_max[dst[i]], x[src[i]])
    expect_max[torch.isinf(expect_max)] = 0
    assert torch.allclose(F.gspmm(g, "copy_lhs", "max", x, None), expect_max)
    assert torch.allclose(F.gsddmm(g, "add", x, x), x[src] + x[dst])
    assert torch.allclose(F.gsddmm(g, "dot", x, x, "u", "v"), (x[src] * x[dst]).sum(-1, keepdim=True), atol=1e-6)
    logits = torch.randn(5)
    sm = F.edge_softmax(g, logits)
    for v in range(4):
        sel = dst == v
        if sel.any():
            assert torch.allclose(sm[sel], torch.softmax(logits[sel], 0), atol=1e-6)
    with pytest.raises(DGLError, match="HeteroGraphIndex"):
        F.gspmm(object(), "mul", "sum", x, e)
    with pytest.raises(DGLError, match="HeteroGraphIndex"):
        F.gspmm_hetero(g, "mul", "sum", 1, x, e)
    with pytest.raises(DGLError, match="HeteroGraphIndex"):
        F.gsddmm_hetero(g, "add", 1, "u", "v", x, x)
    with pytest.raises(DGLError, match="HeteroGraphIndex"):
        F.edge_softmax_hetero(g, None, "dst", logits)


def test_segment_reduce_and_scatter_add():
    x = torch.tensor([[1.0, 5.0], [3.0, 2.0], [3.0, 7.0], [4.0, 0.0]], requires_grad=True)
    offsets = torch.tensor([0, 3, 3, 4])
    s = F.segment_reduce("sum", x, offsets)
    assert s.tolist() == [[7, 14], [0, 0], [4, 0]]
    mx = F.segment_reduce("max", x, offsets)
    assert mx[0].tolist() == [3, 7] and torch.isneginf(mx[1]).all() and mx[2].tolist() == [4, 0]
    mn = F.segment_reduce("min", x, offsets)
    assert mn[0].tolist() == [1, 2] and torch.isposinf(mn[1]).all()
    mx[[0, 2]].sum().backward()
    # the gradient goes to the first row holding the maximum (row 1, not 2, for column 0)
    assert x.grad.tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]
    ints = F.segment_reduce("max", torch.tensor([[2], [9]]), torch.tensor([0, 0, 2]))
    assert ints.tolist() == [[torch.iinfo(torch.int64).min], [9]]
    with pytest.raises(DGLError):
        F.segment_reduce("mean", x, offsets)
    y = torch.tensor([[1.0], [2.0], [4.0]], requires_grad=True)
    out = F.scatter_add(y, torch.tensor([2, 0, 2]), 4)
    assert out.tolist() == [[2], [0], [5], [0]]
    (out * torch.arange(4.0).unsqueeze(1)).sum().backward()
    assert y.grad.tolist() == [[2], [0], [2]]


def test_segment_mm_and_gather_mm():
    torch.manual_seed(2)
    A, B = torch.randn(6, 3), torch.randn(3, 3, 2)
    seglen = torch.tensor([2, 0, 4])
    expect = torch.cat([A[:2] @ B[0], A[2:] @ B[2]])
    assert torch.allclose(F.segment_mm(A, B, seglen), expect, atol=1e-6)
    idx_b = torch.tensor([2, 0, 1, 0, 2, 2])
    expect = torch.stack([A[i] @ B[idx_b[i]] for i in range(6)])
    assert torch.allclose(F.gather_mm(A, B, None, idx_b), expect, atol=1e-6)
    idx_a = torch.tensor([5, 5, 0])
    expect = torch.stack([A[idx_a[i]] @ B[i] for i in range(3)])
    assert torch.allclose(F.gather_mm(A, B, idx_a, None), expect, atol=1e-6)
    Ag = A.clone().requires_grad_()
    F.gather_mm(Ag, B, None, idx_b).sum().backward()
    assert torch.allclose(Ag.grad, torch.stack([B[idx_b[i]].sum(1) for i in range(6)]), atol=1e-6)
    with pytest.raises(DGLError):
        F.segment_mm(A, B[0], seglen)


def test_csr_matrix_operators():
    torch.manual_seed(3)
    a = dgld.graph((torch.tensor([0, 0, 1, 2, 3]), torch.tensor([1, 2, 2, 3, 0])), num_nodes=4)
    b = dgld.graph((torch.tensor([1, 2, 2, 3]), torch.tensor([0, 0, 3, 1])), num_nodes=4)
    wa = torch.randn(5, requires_grad=True)
    wb = torch.randn(4, requires_grad=True)

    def dense(g, w):
        src, dst = g.edges()
        return torch.zeros(4, 4).index_put((src, dst), w, accumulate=True)

    c, wc = F.csrmm(a, wa, b, wb, 1)
    cs, cd = c.edges()
    ref = dense(a, wa) @ dense(b, wb)
    assert torch.allclose(torch.zeros(4, 4).index_put((cs, cd), wc), ref, atol=1e-6)
    assert int((ref != 0).sum()) == c.num_edges()
    keys = (cs * 4 + cd).tolist()
    assert keys == sorted(keys)  # row-major order
    wc.sum().backward()
    ga, gb = wa.grad.clone(), wb.grad.clone()
    wa.grad = wb.grad = None
    ref.sum().backward()
    assert torch.allclose(ga, wa.grad, atol=1e-6) and torch.allclose(gb, wb.grad, atol=1e-6)

    s, ws = F.csrsum([a, b], [wa.detach(), wb.detach()])
    ss, sd = s.edges()
    assert torch.allclose(torch.zeros(4, 4).index_put((ss, sd), ws), dense(a, wa.detach()) + dense(b, wb.detach()))

    m = F.csrmask(a, wa.detach(), b)
    bs, bd = b.edges()
    assert torch.allclose(m, dense(a, wa.detach())[bs, bd])

    bip, wbip = F.csrmm(a, wa.detach(), b, wb.detach(), 2)
    assert bip.ntypes == ["_U", "_V"] and bip.num_edges() == wbip.numel()
    with pytest.raises(DGLError):
        F.csrmm(a, wa, dgld.graph(([0], [1]), num_nodes=5), torch.ones(1), 1)


# ---------------------------------------------------------------------------
# Graph constructors


def edge_keys(g, n_dst):
    src, dst = g.edges()
    return (src.long() * n_dst + dst.long()).tolist()


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_rand_graph(idtype):
    torch.manual_seed(7)
    g = dgld.rand_graph(100, 500, idtype=idtype)
    assert isinstance(g, dgld.DGLGraph) and g.num_nodes() == 100 and g.num_edges() == 500
    assert g.idtype == idtype and g.edges()[0].dtype == idtype
    keys = edge_keys(g, 100)
    assert len(set(keys)) == 500 and min(keys) >= 0 and max(keys) < 100 * 100
    torch.manual_seed(7)
    assert edge_keys(dgld.rand_graph(100, 500, idtype=idtype), 100) == keys  # the seed repeats it
    assert edge_keys(dgld.rand_graph(100, 500, idtype=idtype), 100) != keys
    # defaults: int64 on the CPU, as DGL
    g = dgld.rand_graph(10, 3)
    assert g.idtype == torch.int64 and g.device == torch.device("cpu")


def test_rand_graph_edge_cases():
    full = dgld.rand_graph(5, 25)
    assert sorted(edge_keys(full, 5)) == list(range(25))  # every pair, self-loops included
    assert dgld.rand_graph(0, 0).num_nodes() == 0 and dgld.rand_graph(3, 0).num_edges() == 0
    with pytest.raises(DGLError, match="cannot choose 26"):
        dgld.rand_graph(5, 26)
    with pytest.raises(DGLError):
        dgld.rand_graph(5, -1)
    with pytest.raises(DGLError, match="CPU"):
        dgld.rand_graph(5, 3, device="cuda:0")
    # a population far beyond a permutation (10^12 pairs): draws with rejection
    big = dgld.rand_graph(10 ** 6, 2000)
    keys = edge_keys(big, 10 ** 6)
    assert len(set(keys)) == 2000 and max(keys) < 10 ** 12


def test_rand_graph_is_uniform():
    # 16 possible pairs, 8 drawn: each pair is in half of the graphs.
    torch.manual_seed(11)
    counts = np.zeros(16)
    reps = 1500
    for _ in range(reps):
        for k in edge_keys(dgld.rand_graph(4, 8), 4):
            counts[k] += 1
    # binomial(1500, 0.5): sd ~19; 5 sd either side
    assert counts.min() > reps / 2 - 100 and counts.max() < reps / 2 + 100
    # the rejection path (3000^2 pairs > 2^22): sources spread evenly
    torch.manual_seed(12)
    src, dst = dgld.rand_graph(3000, 20000).edges()
    for ids in (src, dst):
        hist = torch.bincount(ids // 300, minlength=10).double()
        assert float(hist.min()) > 1700 and float(hist.max()) < 2300


def test_rand_bipartite():
    torch.manual_seed(3)
    g = dgld.rand_bipartite("user", "buys", "game", 500, 1000, 1000)
    assert sorted(g.ntypes) == ["game", "user"] and g.canonical_etypes == [("user", "buys", "game")]
    assert g.num_nodes("user") == 500 and g.num_nodes("game") == 1000 and g.num_edges() == 1000
    src, dst = g.edges()
    assert int(src.max()) < 500 and int(dst.max()) < 1000 and g.idtype == torch.int64
    assert len(set(edge_keys(g, 1000))) == 1000
    torch.manual_seed(3)
    assert edge_keys(dgld.rand_bipartite("user", "buys", "game", 500, 1000, 1000), 1000) == edge_keys(g, 1000)
    small = dgld.rand_bipartite("a", "r", "b", 2, 3, 6, idtype=torch.int32)
    assert sorted(edge_keys(small, 3)) == list(range(6)) and small.idtype == torch.int32
    with pytest.raises(DGLError):
        dgld.rand_bipartite("a", "r", "b", 2, 3, 7)


def test_from_scipy():
    sp = pytest.importorskip("scipy.sparse")
    row, col = np.array([2, 0, 3, 2]), np.array([1, 2, 0, 1])  # (2, 1) twice: two edges
    w = np.array([0.5, 0.25, 2.0, 1.0])
    coo = sp.coo_matrix((w, (row, col)), shape=(5, 5))
    g = dgld.from_scipy(coo, eweight_name="w")
    assert g.num_nodes() == 5 and g.num_edges() == 4 and g.idtype == torch.int64
    src, dst = g.edges()
    assert src.tolist() == row.tolist() and dst.tolist() == col.tolist()  # entry i is edge i
    assert g.edata["w"].dtype == torch.float64 and g.edata["w"].tolist() == w.tolist()
    # CSR: row by row in storage order, the values following
    csr = sp.csr_matrix((np.array([1, 2, 3]), np.array([3, 0, 1]), np.array([0, 2, 2, 3])), shape=(3, 4))
    csr.resize((4, 4))
    g = dgld.from_scipy(csr, eweight_name="w", idtype=torch.int32)
    assert g.idtype == torch.int32 and g.edges()[0].tolist() == [0, 0, 2] and g.edges()[1].tolist() == [3, 0, 1]
    assert g.edata["w"].tolist() == [1, 2, 3]
    csc = coo.tocsc()  # sums the two (2, 1) entries
    g = dgld.from_scipy(csc, eweight_name="w")
    s, d = g.edges()
    stored = csc.tocoo()
    assert sorted(zip(s.tolist(), d.tolist(), g.edata["w"].tolist())) == sorted(zip(stored.row, stored.col,
                                                                                       stored.data))
    assert g.num_edges() == 3 and d.tolist() == sorted(d.tolist())  # column by column
    lil = sp.lil_matrix((3, 3))
    lil[0, 2] = 1
    lil[2, 1] = 4
    g = dgld.from_scipy(lil, eweight_name="w")
    assert list(zip(*[t.tolist() for t in g.edges()])) == [(0, 2), (2, 1)] and g.edata["w"].tolist() == [1, 4]
    # DGL's test_partition.py graph
    arr = (sp.random(200, 200, density=0.01, format="coo", random_state=100) != 0).astype(np.int64)
    g = dgld.from_scipy(arr)
    assert g.num_nodes() == 200 and g.num_edges() == arr.nnz
    with pytest.raises(DGLError, match="number of rows"):
        dgld.from_scipy(sp.coo_matrix((2, 3)))
    with pytest.raises(DGLError):
        dgld.from_scipy(np.zeros((2, 2)))


def test_bipartite_from_scipy():
    sp = pytest.importorskip("scipy.sparse")
    m = sp.coo_matrix((np.array([1.0, 2.0]), (np.array([0, 1]), np.array([2, 0]))), shape=(2, 3))
    g = dgld.bipartite_from_scipy(m, "u", "e", "v", eweight_name="w")
    assert g.num_nodes("u") == 2 and g.num_nodes("v") == 3 and g.canonical_etypes == [("u", "e", "v")]
    assert g.edges()[0].tolist() == [0, 1] and g.edges()[1].tolist() == [2, 0]
    assert g.edges[("u", "e", "v")].data["w"].tolist() == [1.0, 2.0]
