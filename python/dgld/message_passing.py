"""Message passing on dgld's graph objects: what DGLGraph.update_all,
apply_edges, send_and_recv, pull and apply_nodes do.

A built-in message with a built-in reducer runs as one fused kernel over
the graph's CSR (torch.ops.dgld.gspmm: no edge-sized tensor); a built-in
message alone (apply_edges) as torch.ops.dgld.gsddmm. User-defined
functions work as in DGL: an edge UDF gets an EdgeBatch (edges.src,
edges.dst, edges.data) and returns a dict of per-edge tensors; a reduce UDF
gets a NodeBatch (nodes.data, nodes.mailbox) for the nodes of one in-degree
at a time (DGL's degree bucketing: mailbox tensors are [nodes, degree,
...], each node's messages in edge-id order), and nodes without in-edges
get zeros. A built-in reducer may follow a UDF message and a UDF reducer a
built-in message.
"""

from collections.abc import Mapping

import torch

from . import _kernels
from . import function as fn
from ._errors import DGLError
from .base import ALL, as_ids


# ---------------------------------------------------------------- batches for UDFs

class _Rows(Mapping):
    """Rows `ids` of a frame's columns, gathered on first read (all rows
    when ids is None)."""

    def __init__(self, frame, ids):
        self._frame = frame
        self._ids = ids
        self._cache = {}

    def __getitem__(self, key):
        if key not in self._cache:
            col = self._frame[key]
            self._cache[key] = col if self._ids is None else col.index_select(0, self._ids)
        return self._cache[key]

    def __iter__(self):
        return iter(self._frame)

    def __len__(self):
        return len(self._frame)


class EdgeBatch:
    """The edges an edge UDF sees: src / dst (their end nodes' data), data
    (their own), edges() (src ids, dst ids, edge ids)."""

    def __init__(self, graph, eids, src, dst):
        self._g = graph
        self._eids = eids
        self._src, self._dst = src, dst

    @property
    def src(self):
        return _Rows(self._g._srcframe, self._src)

    @property
    def dst(self):
        return _Rows(self._g._dstframe, self._dst)

    @property
    def data(self):
        return _Rows(self._g._eframe, self._eids)

    def edges(self):
        eids = self._eids if self._eids is not None else torch.arange(self._src.numel(), dtype=torch.int64)
        return self._src, self._dst, eids

    def batch_size(self):
        return int(self._src.numel())

    def __len__(self):
        return self.batch_size()

    @property
    def canonical_etype(self):
        return ("_N", "_E", "_N")


class NodeBatch:
    """The nodes a node UDF sees: data (their data), mailbox (their
    messages, [nodes, degree, ...], in a reduce UDF), nodes() (their ids)."""

    def __init__(self, graph, nodes, frame, mailbox=None):
        self._g = graph
        self._nodes = nodes
        self._frame = frame
        self._mailbox = mailbox

    @property
    def data(self):
        return _Rows(self._frame, self._nodes)

    @property
    def mailbox(self):
        if self._mailbox is None:
            raise DGLError("nodes.mailbox exists only in a reduce function")
        return self._mailbox

    def nodes(self):
        if self._nodes is None:
            return torch.arange(self._frame.num_rows, dtype=torch.int64)
        return self._nodes

    def batch_size(self):
        return int(self.nodes().numel())

    def __len__(self):
        return self.batch_size()

    @property
    def ntype(self):
        return "_N"


# ---------------------------------------------------------------- built-ins on kernels

def _frame_of(g, target):
    return {"u": g._srcframe, "v": g._dstframe, "e": g._eframe}[target]


def _operands(g, mfunc):
    """The operand tensors of a built-in message, 1-d ones as [n, 1]; and
    whether every one was 1-d (the result is then made 1-d again)."""
    tensors = []
    for target, field in mfunc.operands():
        t = _frame_of(g, target)[field]
        if not t.is_floating_point():
            raise DGLError(f"{mfunc!r}: field {field!r} is {t.dtype}; built-in messages take floating-point "
                           "tensors")
        tensors.append(t)
    flat = all(t.dim() == 1 for t in tensors)
    return [t.unsqueeze(-1) if t.dim() == 1 else t for t in tensors], flat


def _check_builtin(func, kind):
    if isinstance(func, fn.BuiltinFunction) and not isinstance(func, kind):
        want = "message" if kind is fn.MessageFunction else "reduce"
        raise DGLError(f"{func!r} is not a built-in {want} function")


def _spmm(g, mfunc, reducer):
    tensors, flat = _operands(g, mfunc)
    native = g._csr()
    targets = [t for t, _ in mfunc.operands()]
    if mfunc.is_copy:
        out = _kernels.gspmm(native, "copy_lhs", reducer, tensors[0], None, targets[0], "e")
    else:
        out = _kernels.gspmm(native, mfunc.op, reducer, tensors[0], tensors[1], targets[0],
                          targets[1])
    return out.squeeze(-1) if flat else out


def _sddmm(g, mfunc):
    tensors, flat = _operands(g, mfunc)
    native = g._csr()
    targets = [t for t, _ in mfunc.operands()]
    if mfunc.is_copy:
        out = _kernels.gsddmm(native, "copy_lhs", tensors[0], None, targets[0], "v")
    else:
        out = _kernels.gsddmm(native, mfunc.op, tensors[0], tensors[1], targets[0], targets[1])
    return out.squeeze(-1) if flat else out


def _reduce_edge_tensor(g, msg, reducer):
    """A built-in reducer over per-edge messages (edge-id order)."""
    flat = msg.dim() == 1
    m = msg.unsqueeze(-1) if flat else msg
    if not m.is_floating_point():
        raise DGLError(f"reducer {reducer!r}: messages must be floating-point, got {m.dtype}")
    out = _kernels.gspmm(g._csr(), "copy_rhs", reducer, None, m, "u", "e")
    return out.squeeze(-1) if flat else out


# ---------------------------------------------------------------- steps

def _messages(g, mfunc):
    """Every edge's messages, edge-id order, as a dict."""
    if isinstance(mfunc, fn.MessageFunction):
        return {mfunc.out_field: _sddmm(g, mfunc)}
    if not callable(mfunc):
        raise DGLError(f"message function must be a dgld.function built-in or a callable, got {mfunc!r}")
    src, dst = g._coo()
    out = mfunc(EdgeBatch(g, None, src, dst))
    return _check_dict(out, "message function", g.num_edges(), "edges")


def _check_dict(out, what, rows, unit):
    if not isinstance(out, Mapping):
        raise DGLError(f"a {what} must return a dict of tensors, got {type(out).__name__}")
    for k, v in out.items():
        if not isinstance(v, torch.Tensor) or v.dim() == 0 or v.shape[0] != rows:
            got = tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__
            raise DGLError(f"the {what}'s output {k!r} must have one row per {unit[:-1]} ({rows} {unit}), got "
                           f"{got}")
    return dict(out)


def _bucketed_reduce(g, msgs, rfunc):
    """A reduce UDF over the nodes of each in-degree (see the module doc)."""
    native = g._csr()
    indptr = native.indptr()
    order = native.edge_order()
    deg = indptr[1:] - indptr[:-1]
    num_dst = g.num_dst_nodes()
    pieces = {}
    for d in torch.unique(deg[deg > 0]).tolist():
        nodes = torch.nonzero(deg == d, as_tuple=False).reshape(-1)
        pos = indptr.index_select(0, nodes).unsqueeze(1) + torch.arange(d, dtype=torch.int64)
        eids = order[pos] if order.numel() else pos
        mailbox = {k: m[eids] for k, m in msgs.items()}
        res = rfunc(NodeBatch(g, nodes, g._dstframe, mailbox))
        for k, v in _check_dict(res, "reduce function", nodes.numel(), "nodes").items():
            pieces.setdefault(k, []).append((nodes, v))
    out = {}
    for k, parts in pieces.items():
        first = parts[0][1]
        col = first.new_zeros((num_dst,) + tuple(first.shape[1:]))
        for nodes, v in parts:
            if v.shape[1:] != first.shape[1:]:
                raise DGLError(f"the reduce function's output {k!r} has shape {tuple(v.shape[1:])} for some nodes "
                               f"and {tuple(first.shape[1:])} for others")
            col = col.index_copy(0, nodes, v)
        out[k] = col
    return out


def _reduced(g, mfunc, rfunc):
    """The reducer's outputs for every dst node (nothing written)."""
    _check_builtin(mfunc, fn.MessageFunction)
    _check_builtin(rfunc, fn.ReduceFunction)
    if isinstance(rfunc, fn.ReduceFunction):
        if isinstance(mfunc, fn.MessageFunction):
            if rfunc.msg_field != mfunc.out_field:
                raise DGLError(f"Invalid message ({mfunc!r}) and reduce ({rfunc!r}) function pairs. The output "
                               "field of the message function must be equal to the message field of the reduce "
                               "function.")
            return {rfunc.out_field: _spmm(g, mfunc, rfunc.name)}
        msgs = _messages(g, mfunc)
        if rfunc.msg_field not in msgs:
            raise DGLError(f"{rfunc!r} reduces message {rfunc.msg_field!r} but the message function sent "
                           f"{', '.join(repr(k) for k in msgs) or 'nothing'}")
        return {rfunc.out_field: _reduce_edge_tensor(g, msgs[rfunc.msg_field], rfunc.name)}
    if not callable(rfunc):
        raise DGLError(f"reduce function must be a dgld.function built-in or a callable, got {rfunc!r}")
    return _bucketed_reduce(g, _messages(g, mfunc), rfunc)


def _apply_to_nodes(g, func, frame, nodes):
    """func(NodeBatch) for `nodes` (None: all) of `frame`, written back."""
    if func is None:
        return
    rows = frame.num_rows if nodes is None else int(nodes.numel())
    out = _check_dict(func(NodeBatch(g, nodes, frame)), "node function", rows, "nodes")
    for k, v in out.items():
        if nodes is None:
            frame[k] = v
        else:
            frame.set_rows(k, nodes, v)


def _edge_subgraph(g, eids):
    """g restricted to edges `eids` (same nodes and node frames; its edge
    frame holds those edges' rows)."""
    src, dst = g._coo()
    sub = type(g)._from_coo(src[eids], dst[eids], g._num_src, g._num_dst)
    sub._srcframe, sub._dstframe = g._srcframe, g._dstframe
    sub._eframe = g._eframe.subframe(eids)
    return sub


def _edge_ids(g, edges, what):
    if isinstance(edges, str) and edges == ALL:
        return None
    if isinstance(edges, tuple) and len(edges) == 2:
        return g.edge_ids(edges[0], edges[1])
    return as_ids(edges, what, g.num_edges())


# ---------------------------------------------------------------- the graph methods

def update_all(g, mfunc, rfunc, afunc=None):
    for k, v in _reduced(g, mfunc, rfunc).items():
        g._dstframe[k] = v
    _apply_to_nodes(g, afunc, g._dstframe, None)


def send_and_recv(g, edges, mfunc, rfunc, afunc=None):
    """Messages along `edges` only; the nodes that receive one are updated,
    the others keep their data."""
    eids = _edge_ids(g, edges, "send_and_recv")
    if eids is None:
        return update_all(g, mfunc, rfunc, afunc)
    sub = _edge_subgraph(g, eids)
    receivers = torch.unique(sub._coo()[1])
    for k, v in _reduced(sub, mfunc, rfunc).items():
        g._dstframe.set_rows(k, receivers, v.index_select(0, receivers))
    _apply_to_nodes(g, afunc, g._dstframe, receivers)


def pull(g, v, mfunc, rfunc, afunc=None):
    """Nodes `v` receive along all their in-edges (zeros for those without)."""
    v = torch.unique(as_ids(v, "pull", g.num_dst_nodes()))
    eids = g.in_edges(v, form="eid").to(torch.int64)
    sub = _edge_subgraph(g, eids)
    for k, val in _reduced(sub, mfunc, rfunc).items():
        g._dstframe.set_rows(k, v, val.index_select(0, v))
    _apply_to_nodes(g, afunc, g._dstframe, v)


def apply_edges(g, func, edges=ALL):
    eids = _edge_ids(g, edges, "apply_edges")
    target = g if eids is None else _edge_subgraph(g, eids)
    if isinstance(func, fn.MessageFunction):
        out = {func.out_field: _sddmm(target, func)}
    elif isinstance(func, fn.BuiltinFunction):
        raise DGLError(f"apply_edges takes a message function, not {func!r}")
    else:
        out = _messages(target, func)
    for k, val in out.items():
        if eids is None:
            g._eframe[k] = val
        else:
            g._eframe.set_rows(k, eids, val)


def apply_nodes(g, func, v=ALL):
    if isinstance(func, fn.BuiltinFunction):
        raise DGLError(f"apply_nodes takes a callable, not the built-in {func!r}")
    nodes = None if isinstance(v, str) and v == ALL else as_ids(v, "apply_nodes", g.num_dst_nodes())
    _apply_to_nodes(g, func, g._dstframe, nodes)
