"""Homogeneous graphs and blocks (HomoGraph, HomoBlock): what dgld.graph,
dgld.create_block, dgld.to_block and the loaders make; both are
dgld.DGLGraph instances, HomoBlock a dgld.DGLBlock (heterograph.py).

A graph is a set of source nodes, destination nodes and edges between them,
with frames of named tensors for each (srcdata, dstdata, edata). A plain
graph has one node set: srcdata, dstdata and ndata are the same frame. A
block (DGL's message-flow graph, what the loaders and to_block make) has
separate source and destination nodes, and its first num_dst_nodes source
nodes are its destination nodes.

Structure is held in whichever form it arrived in and the other is made on
first need: COO (src and dst of every edge in edge-id order) for graphs
built from edges (dgld.graph, sample_neighbors' frontiers, to_block, pair
graphs), and the dst-major CSR of a torch.classes.dgld.Block (with the
permutation from CSR positions to edge ids) for the loaders' blocks. The
message-passing kernels (torch.ops.dgld.gspmm / gsddmm) run on that CSR,
which is made once per graph and shared by every layer.

Message passing (update_all, apply_edges, send_and_recv, pull, apply_nodes)
is in message_passing.py; graphs are made by convert.py's functions.
"""

import contextlib

import torch

from . import message_passing as _mp
from ._errors import DGLError
from .base import ALL, Block, as_ids
from .frame import Frame, SpaceView
from .heterograph import DGLBlock, DGLGraph

__all__ = ["HomoGraph", "HomoBlock"]


class HomoGraph(DGLGraph):
    """A graph of one node type and one edge type (see the module doc)."""

    # ------------------------------------------------------------ construction

    def _init_structure(self, src, dst, num_src, num_dst, native=None, idtype=torch.int64):
        self._src, self._dst = src, dst
        self._native = native
        self._num_src, self._num_dst = int(num_src), int(num_dst)
        self._idtype = idtype
        if self.is_block:
            self._srcframe = Frame(self._num_src, "source node data")
            self._dstframe = Frame(self._num_dst, "destination node data")
        else:
            self._srcframe = self._dstframe = Frame(self._num_src, "node data")
        self._eframe = Frame(self.num_edges(), "edge data")

    @classmethod
    def _from_coo(cls, src, dst, num_src, num_dst, idtype=torch.int64):
        g = cls.__new__(cls)
        g._init_structure(src, dst, num_src, num_dst, None, idtype)
        return g

    @classmethod
    def _from_native(cls, native, idtype=torch.int64):
        g = cls.__new__(cls)
        g._init_structure(None, None, native.num_src_nodes(), native.num_dst_nodes(), native, idtype)
        return g

    def _coo(self):
        """(src, dst) of every edge, int64, in edge-id order."""
        if self._src is None:
            src, dst = self._native.edges()
            order = self._native.edge_order()
            if order.numel():
                s, d = torch.empty_like(src), torch.empty_like(dst)
                s[order], d[order] = src, dst
                src, dst = s, d
            self._src, self._dst = src, dst
        return self._src, self._dst

    def _csr(self):
        """The graph as a torch.classes.dgld.Block (dst-major CSR with the
        edge-id permutation), made once."""
        if self._native is None:
            src, dst = self._coo()
            n = self._num_dst
            if dst.numel() > 1 and not bool((dst[1:] >= dst[:-1]).all()):
                sorted_dst, order = torch.sort(dst, stable=True)
            else:
                sorted_dst, order = dst, None
            indptr = torch.zeros(n + 1, dtype=torch.int64)
            if dst.numel():
                torch.cumsum(torch.bincount(sorted_dst, minlength=n), 0, out=indptr[1:])
            indices = src if order is None else src[order]
            native = Block(indptr, indices.contiguous(), self._num_src)
            if order is not None:
                native.set_edge_order(order)
            self._native = native
        return self._native

    def __getstate__(self):
        # The native block is rebuilt from COO after unpickling.
        self._coo()
        state = dict(self.__dict__)
        state["_native"] = None
        return state

    # ------------------------------------------------------------ sizes and types

    @property
    def ntypes(self):
        return ["_N"]

    @property
    def etypes(self):
        return ["_E"]

    @property
    def canonical_etypes(self):
        return [("_N", "_E", "_N")]

    @property
    def srctypes(self):
        return ["_N"]

    @property
    def dsttypes(self):
        return ["_N"]

    def is_homogeneous(self):
        return True

    @property
    def is_unibipartite(self):
        return self.is_block

    def _check_ntype(self, ntype):
        if ntype is not None and ntype not in ("_N", "SRC/_N", "DST/_N"):
            raise DGLError(f"node type {ntype!r} does not exist (the graph has node type '_N')")

    def _check_etype(self, etype):
        if etype is not None and etype not in ("_E", ("_N", "_E", "_N")):
            raise DGLError(f"edge type {etype!r} does not exist (the graph has edge type '_E')")

    def num_nodes(self, ntype=None):
        self._check_ntype(ntype)
        if self.is_block and ntype is None:
            return self._num_src + self._num_dst
        return self._num_src

    def num_src_nodes(self, ntype=None):
        self._check_ntype(ntype)
        return self._num_src

    def num_dst_nodes(self, ntype=None):
        self._check_ntype(ntype)
        return self._num_dst

    def num_edges(self, etype=None):
        self._check_etype(etype)
        if self._src is not None:
            return int(self._src.numel())
        return int(self._native.num_edges())

    number_of_nodes = num_nodes
    number_of_src_nodes = num_src_nodes
    number_of_dst_nodes = num_dst_nodes
    number_of_edges = num_edges

    def __len__(self):
        return self.num_nodes()

    @property
    def idtype(self):
        return self._idtype

    def _with_idtype(self, idtype):
        if idtype == self._idtype:
            return self
        g = self._shallow_copy()
        g._idtype = idtype
        return g

    def int(self):
        return self._with_idtype(torch.int32)

    def long(self):
        return self._with_idtype(torch.int64)

    def local_var(self):
        """DGL's local_var: the same structure with frames of its own (the
        same tensors), so columns set or replaced on it leave this graph's
        frames as they are."""
        return self._shallow_copy()

    def _shallow_copy(self):
        g = type(self).__new__(type(self))
        g.__dict__.update(self.__dict__)
        g._srcframe = Frame(self._num_src, self._srcframe._what, self._srcframe.snapshot())
        g._dstframe = g._srcframe if not self.is_block else Frame(self._num_dst, self._dstframe._what,
                                                                  self._dstframe.snapshot())
        g._eframe = Frame(self.num_edges(), "edge data", self._eframe.snapshot())
        return g

    def _ids_out(self, t):
        return t if self._idtype == torch.int64 else t.to(self._idtype)

    # ------------------------------------------------------------ frames

    @property
    def ndata(self):
        """The node data; on a block its source nodes' (DGL's block.ndata)."""
        return self._srcframe

    @property
    def srcdata(self):
        return self._srcframe

    @property
    def dstdata(self):
        return self._dstframe

    @property
    def edata(self):
        return self._eframe

    @contextlib.contextmanager
    def local_scope(self):
        """Inside the block, writes to the frames (new or replaced columns)
        are undone when it ends; tensors changed in place stay changed."""
        saved = [(f, f.snapshot()) for f in {id(f): f for f in (self._srcframe, self._dstframe,
                                                                 self._eframe)}.values()]
        try:
            yield
        finally:
            for f, cols in saved:
                f.restore(cols)

    # ------------------------------------------------------------ nodes and edges

    def _node_ids(self, count):
        return self._ids_out(torch.arange(count, dtype=torch.int64))

    @property
    def nodes(self):
        """g.nodes() and g.nodes[ids].data; on a block its source nodes'."""
        return SpaceView(self, lambda: self._srcframe, lambda k: as_ids(k, "g.nodes[...]", self._num_src),
                         lambda: self.ntypes, lambda ntype=None: self._node_ids(self._num_src))

    @property
    def srcnodes(self):
        return SpaceView(self, lambda: self._srcframe,
                         lambda k: as_ids(k, "g.srcnodes[...]", self._num_src), lambda: self.srctypes,
                         lambda ntype=None: self._node_ids(self._num_src))

    @property
    def dstnodes(self):
        return SpaceView(self, lambda: self._dstframe,
                         lambda k: as_ids(k, "g.dstnodes[...]", self._num_dst), lambda: self.dsttypes,
                         lambda ntype=None: self._node_ids(self._num_dst))

    @property
    def edges(self):
        """g.edges(form='uv'|'eid'|'all', order='eid'|'srcdst'), and
        g.edges[ids].data / g.edges[etype].data."""
        return SpaceView(self, lambda: self._eframe, lambda k: self._edge_ids_of(k, "g.edges[...]"),
                         lambda: self.etypes + [self.canonical_etypes[0]], self.all_edges)

    def _edge_ids_of(self, key, what):
        if isinstance(key, tuple) and len(key) == 2 and not isinstance(key[0], str):
            return self.edge_ids(key[0], key[1])
        return as_ids(key, what, self.num_edges())

    def all_edges(self, form="uv", order="eid", etype=None):
        self._check_etype(etype)
        src, dst = self._coo()
        eid = torch.arange(src.numel(), dtype=torch.int64)
        if order == "srcdst":
            key = src * max(1, self._num_dst) + dst
            perm = torch.sort(key, stable=True)[1]
            src, dst, eid = src[perm], dst[perm], perm
        elif order != "eid":
            raise DGLError(f"order must be 'eid' or 'srcdst', got {order!r}")
        return self._edge_form(src, dst, eid, form)

    def _edge_form(self, src, dst, eid, form):
        if form == "uv":
            return self._ids_out(src), self._ids_out(dst)
        if form == "eid":
            return self._ids_out(eid)
        if form == "all":
            return self._ids_out(src), self._ids_out(dst), self._ids_out(eid)
        raise DGLError(f"form must be 'uv', 'eid' or 'all', got {form!r}")

    def in_degrees(self, v=ALL, etype=None):
        self._check_etype(etype)
        if self._native is not None:
            deg = self._native.in_degrees()
        else:
            deg = torch.bincount(self._coo()[1], minlength=self._num_dst)
        return self._pick(deg, v, self._num_dst, "in_degrees")

    def out_degrees(self, u=ALL, etype=None):
        self._check_etype(etype)
        deg = torch.bincount(self._coo()[0], minlength=self._num_src)
        return self._pick(deg, u, self._num_src, "out_degrees")

    def _pick(self, values, ids, bound, what):
        if isinstance(ids, str) and ids == ALL:
            return self._ids_out(values)
        scalar = isinstance(ids, int) or (isinstance(ids, torch.Tensor) and ids.dim() == 0)
        picked = values[as_ids(ids, what, bound)]
        return int(picked[0]) if scalar else self._ids_out(picked)

    def in_edges(self, v, form="uv", etype=None):
        self._check_etype(etype)
        v = as_ids(v, "in_edges", self._num_dst)
        src, dst = self._coo()
        eid = torch.nonzero(torch.isin(dst, v), as_tuple=False).reshape(-1)
        return self._edge_form(src[eid], dst[eid], eid, form)

    def out_edges(self, u, form="uv", etype=None):
        self._check_etype(etype)
        u = as_ids(u, "out_edges", self._num_src)
        src, dst = self._coo()
        eid = torch.nonzero(torch.isin(src, u), as_tuple=False).reshape(-1)
        return self._edge_form(src[eid], dst[eid], eid, form)

    def find_edges(self, eid, etype=None):
        self._check_etype(etype)
        eid = as_ids(eid, "find_edges", self.num_edges())
        src, dst = self._coo()
        return self._ids_out(src[eid]), self._ids_out(dst[eid])

    def predecessors(self, v, etype=None):
        return self.in_edges(v, etype=etype)[0]

    def successors(self, u, etype=None):
        return self.out_edges(u, etype=etype)[1]

    def has_edges_between(self, u, v, etype=None):
        self._check_etype(etype)
        scalar = isinstance(u, int) and isinstance(v, int)
        u = as_ids(u, "has_edges_between", self._num_src)
        v = as_ids(v, "has_edges_between", self._num_dst)
        src, dst = self._coo()
        width = max(1, self._num_dst)
        found = torch.isin(u * width + v, src * width + dst)
        return bool(found[0]) if scalar else found

    has_edge_between = has_edges_between

    def edge_ids(self, u, v, return_uv=False, etype=None):
        """The id of the edge u[i] -> v[i] for each i (the first such edge),
        DGLError naming a pair that has none; with return_uv (DGL <= 0.7),
        (src, dst, id) of every edge between the pairs, pairs without one
        left out."""
        self._check_etype(etype)
        scalar = isinstance(u, int) and isinstance(v, int)
        u = as_ids(u, "edge_ids", self._num_src)
        v = as_ids(v, "edge_ids", self._num_dst)
        src, dst = self._coo()
        width = max(1, self._num_dst)
        want = u * width + v
        if return_uv:
            eid = torch.nonzero(torch.isin(src * width + dst, want), as_tuple=False).reshape(-1)
            return self._ids_out(src[eid]), self._ids_out(dst[eid]), self._ids_out(eid)
        keys, perm = torch.sort(src * width + dst, stable=True)
        pos = torch.searchsorted(keys, want).clamp(max=max(0, keys.numel() - 1))
        ok = keys[pos] == want if keys.numel() else torch.zeros_like(want, dtype=torch.bool)
        if not bool(ok.all()):
            i = int(torch.nonzero(~ok)[0])
            raise DGLError(f"edge_ids: there is no edge {int(u[i])} -> {int(v[i])}")
        eid = perm[pos]
        return int(eid[0]) if scalar else self._ids_out(eid)

    # ------------------------------------------------------------ mutation

    def add_nodes(self, num, data=None, ntype=None):
        """DGL's add_nodes: num more nodes (ids after the last), their data
        from `data` ({name: tensor}) or zeros in every existing column."""
        self._check_ntype(ntype)
        if self.is_block:
            raise DGLError("add_nodes: a block's node sets are fixed")
        num = int(num)
        if num < 0:
            raise DGLError(f"add_nodes: num must be >= 0, got {num}")
        self._coo()
        self._srcframe.grow(num, data)
        self._num_src = self._num_dst = self._num_src + num
        self._native = self._out = None

    def add_edges(self, u, v, data=None, etype=None):
        """DGL's add_edges: edges u[i] -> v[i] after the last (ids in that
        order), adding the nodes they name that the graph lacks; their data
        from `data` or zeros in every existing column."""
        self._check_etype(etype)
        if self.is_block:
            raise DGLError("add_edges: a block's edges are fixed")
        u = as_ids(u, "add_edges u", None, check_range=False)
        v = as_ids(v, "add_edges v", None, check_range=False)
        if u.numel() == 1 and v.numel() > 1:
            u = u.expand(v.numel())
        if v.numel() == 1 and u.numel() > 1:
            v = v.expand(u.numel())
        if u.numel() != v.numel():
            raise DGLError(f"add_edges: {u.numel()} sources but {v.numel()} destinations")
        if u.numel() and int(torch.minimum(u.min(), v.min())) < 0:
            raise DGLError("add_edges: node ids must be >= 0")
        need = int(torch.maximum(u.max(), v.max())) + 1 if u.numel() else 0
        if need > self._num_src:
            self.add_nodes(need - self._num_src)
        src, dst = self._coo()
        self._src, self._dst = torch.cat([src, u.to(torch.int64)]), torch.cat([dst, v.to(torch.int64)])
        self._eframe.grow(u.numel(), data)
        self._native = self._out = None

    # ------------------------------------------------------------ sparse formats

    _FORMATS = ("coo", "csr", "csc")

    def _out_csr(self):
        """The out-edge CSR (src-major: indptr, dst ids, edge ids), made once."""
        if getattr(self, "_out", None) is None:
            src, dst = self._coo()
            order = torch.argsort(src, stable=True)
            indptr = torch.zeros(self._num_src + 1, dtype=torch.int64)
            if src.numel():
                torch.cumsum(torch.bincount(src, minlength=self._num_src), 0, out=indptr[1:])
            self._out = (indptr, dst[order], order)
        return self._out

    def formats(self, formats=None):
        """DGL's formats. With no argument, {'created': [...], 'not created':
        [...]}: the sparse formats this graph holds now ('coo' its edge list,
        'csc' the in-edge index message passing uses, 'csr' the out-edge
        index). With a format or a list of them, a graph of the same
        structure and data with those formats made (DGL's clone; dgld's graphs
        allow every format, so the others are made when needed)."""
        made = {"coo": self._src is not None, "csc": self._native is not None,
                "csr": getattr(self, "_out", None) is not None}
        if formats is None:
            return {"created": [f for f in self._FORMATS if made[f]],
                    "not created": [f for f in self._FORMATS if not made[f]]}
        wanted = [formats] if isinstance(formats, str) else list(formats)
        bad = [f for f in wanted if f not in self._FORMATS]
        if bad:
            raise DGLError(f"formats: unknown sparse format {bad[0]!r} (DGL's are 'coo', 'csr' and 'csc')")
        g = self._shallow_copy()
        for f in wanted:
            {"coo": g._coo, "csc": g._csr, "csr": g._out_csr}[f]()
        return g

    # ------------------------------------------------------------ message passing

    def update_all(self, message_func, reduce_func, apply_node_func=None, etype=None):
        """Every edge sends message_func's message; each destination node
        reduces its messages with reduce_func (then apply_node_func)."""
        self._check_etype(etype)
        _mp.update_all(self, message_func, reduce_func, apply_node_func)

    def apply_edges(self, func, edges=ALL, etype=None):
        self._check_etype(etype)
        _mp.apply_edges(self, func, edges)

    def send_and_recv(self, edges, message_func, reduce_func, apply_node_func=None, etype=None, inplace=False):
        self._check_etype(etype)
        _mp.send_and_recv(self, edges, message_func, reduce_func, apply_node_func)

    def pull(self, v, message_func, reduce_func, apply_node_func=None, etype=None, inplace=False):
        self._check_etype(etype)
        _mp.pull(self, v, message_func, reduce_func, apply_node_func)

    def apply_nodes(self, func, v=ALL, ntype=None, inplace=False):
        self._check_ntype(ntype)
        _mp.apply_nodes(self, func, v)

    # ------------------------------------------------------------ misc

    def __repr__(self):
        if self.is_block:
            return (f"Block(num_src_nodes={self._num_src}, num_dst_nodes={self._num_dst}, "
                    f"num_edges={self.num_edges()})")
        return f"Graph(num_nodes={self._num_src}, num_edges={self.num_edges()})"


def _empty_graph():
    """DGLGraph(): DGL's empty graph of one node and one edge type."""
    empty = torch.empty(0, dtype=torch.int64)
    return HomoGraph._from_coo(empty, empty, 0, 0)


DGLGraph._make_empty = staticmethod(_empty_graph)


class HomoBlock(HomoGraph, DGLBlock):
    """A homogeneous block: separate source and destination node sets, the
    first num_dst_nodes source nodes being the destination nodes (DGL's
    message-flow graph)."""

    is_block = True
