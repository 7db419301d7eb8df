"""Typed graphs (TypedGraph, TypedBlock: DGL's heterographs and typed
blocks, dgld.DGLGraph instances, TypedBlock a dgld.DGLBlock): one relation
graph per canonical edge type (src_type, etype, dst_type) over homogeneous
dgld graphs (graph.py), and one node frame per type shared by every
relation that touches it.

A typed block (dgld.create_block with a dict) has per-type source and
destination node sets; each relation is a HomoBlock over its src type's
source nodes and its dst type's destination nodes (which may outnumber its
source nodes, e.g. author -> paper). A heterograph (dgld.heterograph) has
one node set per type; a relation whose two types are the same is a
HomoGraph, any other a bipartite relation graph. convert.py's heterograph()
and create_block() make them.

What is here is what HeteroGraphConv and DGL's typed frames need: types,
counts, g[etype], typed data views, edges(etype=...), local_scope.
Message passing runs on the relation graphs (g[etype].update_all(...)).
"""

import contextlib
from collections.abc import MutableMapping

import torch

from ._errors import DGLError
from ._graph_data import _uv
from .base import ALL
from .frame import Frame
from .graph import HomoBlock, HomoGraph
from .heterograph import DGLBlock, DGLGraph

__all__ = ["TypedGraph", "TypedBlock", "typed_graph", "heterograph_relations", "block_relations"]


class _BipartiteGraph(HomoGraph):
    """A heterograph's relation between two different node types: separate
    src and dst node counts like a block's, but not a block (its dst nodes
    are not its first src nodes); the typed graph gives it its frames."""

    def __repr__(self):
        return (f"Graph(num_src_nodes={self._num_src}, num_dst_nodes={self._num_dst}, "
                f"num_edges={self.num_edges()})")


class _TypedData(MutableMapping):
    """g.srcdata / g.dstdata / g.ndata of a typed graph (DGL's view for
    several node types): g.srcdata['h'] is {ntype: tensor} over the types
    that have 'h'; assigning a dict sets it per type. With one node type it
    reads and writes that type's frame directly, as DGL does."""

    def __init__(self, frames, what, kind="node"):
        self._frames = frames
        self._what = what
        self._kind = kind  # "node" or "edge": what the frames' keys are types of

    def _single(self):
        return next(iter(self._frames.values())) if len(self._frames) == 1 else None

    def __getitem__(self, key):
        single = self._single()
        if single is not None:
            return single[key]
        out = {t: f[key] for t, f in self._frames.items() if key in f}
        if not out:
            raise KeyError(f"{self._what}: no {self._kind} type has field {key!r}")
        return out

    def __setitem__(self, key, value):
        if isinstance(value, dict):
            for t in value:
                if t not in self._frames:
                    raise DGLError(f"{self._what}: {self._kind} type {t!r} does not exist (types: "
                                   f"{', '.join(map(str, self._frames))})")
            for t, v in value.items():
                self._frames[t][key] = v
            return
        single = self._single()
        if single is None:
            raise DGLError(f"{self._what}[{key!r}]: the graph has several {self._kind} types "
                           f"({', '.join(map(str, self._frames))}); assign a dict {{type: tensor}}")
        single[key] = value

    def __delitem__(self, key):
        found = False
        for f in self._frames.values():
            if key in f:
                del f[key]
                found = True
        if not found:
            raise KeyError(f"{self._what}: no {self._kind} type has field {key!r}")

    def __iter__(self):
        seen = {}
        for f in self._frames.values():
            for k in f:
                seen[k] = None
        return iter(seen)

    def __len__(self):
        return len(list(iter(self)))

    def __repr__(self):
        return f"<{self._what}: {{{', '.join(f'{t!r}: {f!r}' for t, f in self._frames.items())}}}>"


class _Holder:
    data = None


class _TypedNodes:
    """g.nodes / g.srcnodes / g.dstnodes: g.nodes('paper') -> ids,
    g.nodes['paper'].data -> that type's frame."""

    def __init__(self, g, frames, side):
        self._g, self._frames, self._side = g, frames, side

    def _type(self, ntype):
        if ntype is None:
            if len(self._frames) != 1:
                raise DGLError(f"the graph has several {self._side} node types ({', '.join(self._frames)}): "
                               f"name one")
            return next(iter(self._frames))
        if ntype not in self._frames:
            raise DGLError(f"{self._side} node type {ntype!r} does not exist (types: {', '.join(self._frames)})")
        return ntype

    def __call__(self, ntype=None):
        t = self._type(ntype)
        return self._g._ids_out(torch.arange(self._frames[t].num_rows, dtype=torch.int64))

    def __getitem__(self, ntype):
        h = _Holder()
        h.data = self._frames[self._type(ntype)]
        return h


class _TypedEdges:
    """g.edges(form=, order=, etype=) and g.edges[etype].data."""

    def __init__(self, g):
        self._g = g

    def __call__(self, form="uv", order="eid", etype=None):
        return self._g[self._g._canonical(etype)].all_edges(form=form, order=order)

    def __getitem__(self, etype):
        h = _Holder()
        h.data = self._g[etype].edata
        return h


class TypedGraph(DGLGraph):
    """A typed graph (see the module doc); made by dgld.heterograph."""

    def __init__(self, relations, num_src, num_dst, idtype=torch.int64, sort_etypes=True):
        """relations: {(stype, etype, dtype): (src, dst)} int64 tensors,
        checked; num_src / num_dst: {ntype: count} (the same dict for a
        heterograph). The edge types are sorted as DGL's constructors sort
        them, unless sort_etypes is False: the relations' own order (a
        DistGraph's loaders keep its type ids' order)."""
        is_block = self.is_block
        self._idtype = idtype
        self._num_src, self._num_dst = dict(num_src), dict(num_dst)
        if is_block:
            self._srcframes = {t: Frame(n, f"source node data of {t!r}") for t, n in self._num_src.items()}
            self._dstframes = {t: Frame(n, f"destination node data of {t!r}") for t, n in self._num_dst.items()}
        else:
            self._srcframes = {t: Frame(n, f"node data of {t!r}") for t, n in self._num_src.items()}
            self._dstframes = self._srcframes
        self._rels = {}
        # DGL's order of the edge types: sorted canonical triples.
        items = sorted(relations.items(), key=lambda kv: kv[0]) if sort_etypes else relations.items()
        for (s, e, d), (u, v) in items:
            ns, nd = self._num_src[s], self._num_dst[d]
            if is_block:
                rel = HomoBlock._from_coo(u, v, ns, nd, idtype)
            elif s == d:
                rel = HomoGraph._from_coo(u, v, ns, nd, idtype)
            else:
                rel = _BipartiteGraph._from_coo(u, v, ns, nd, idtype)
            rel._srcframe, rel._dstframe = self._srcframes[s], self._dstframes[d]
            self._rels[(s, e, d)] = rel

    # ------------------------------------------------------------ types

    @property
    def ntypes(self):
        return sorted(set(self._num_src) | set(self._num_dst))

    @property
    def srctypes(self):
        return sorted(self._num_src)

    @property
    def dsttypes(self):
        return sorted(self._num_dst)

    @property
    def canonical_etypes(self):
        return list(self._rels)

    @property
    def etypes(self):
        return [e for _, e, _ in self._rels]

    def is_homogeneous(self):
        return len(self.ntypes) == 1 and len(self._rels) == 1

    # The same as a homogeneous graph's (self._idtype).
    idtype = HomoGraph.idtype
    _ids_out = HomoGraph._ids_out

    def _canonical(self, etype):
        """The canonical edge type named by etype (a name or a triple)."""
        if etype is None:
            if len(self._rels) != 1:
                raise DGLError(f"the graph has several edge types ({', '.join(map(str, self._rels))}): name one")
            return next(iter(self._rels))
        if isinstance(etype, tuple):
            if etype not in self._rels:
                raise DGLError(f"edge type {etype!r} does not exist (the graph has: "
                               f"{', '.join(map(str, self._rels))})")
            return etype
        matches = [c for c in self._rels if c[1] == etype]
        if not matches:
            raise DGLError(f"edge type {etype!r} does not exist (the graph has: {', '.join(self.etypes)})")
        if len(matches) > 1:
            raise DGLError(f"edge type {etype!r} is ambiguous ({', '.join(map(str, matches))}): name it by its "
                           f"canonical (src type, edge type, dst type)")
        return matches[0]

    def to_canonical_etype(self, etype):
        return self._canonical(etype)

    def get_ntype_id(self, ntype):
        """A node type's id: its index in ntypes (DGL's)."""
        if ntype is None and len(self.ntypes) == 1:
            return 0
        if ntype not in self.ntypes:
            raise DGLError(f"node type {ntype!r} does not exist (types: {', '.join(self.ntypes)})")
        return self.ntypes.index(ntype)

    def get_etype_id(self, etype):
        """An edge type's id: its index in canonical_etypes (DGL's)."""
        return self.canonical_etypes.index(self._canonical(etype))

    # Queries of one relation, as DGL's heterographs take them (etype=...).
    def edge_ids(self, u, v, return_uv=False, etype=None):
        return self[etype].edge_ids(u, v, return_uv=return_uv)

    def find_edges(self, eid, etype=None):
        return self[etype].find_edges(eid)

    def has_edges_between(self, u, v, etype=None):
        return self[etype].has_edges_between(u, v)

    def in_degrees(self, v=ALL, etype=None):
        return self[etype].in_degrees(v)

    def out_degrees(self, u=ALL, etype=None):
        return self[etype].out_degrees(u)

    def in_edges(self, v, form="uv", etype=None):
        return self[etype].in_edges(v, form=form)

    def out_edges(self, u, form="uv", etype=None):
        return self[etype].out_edges(u, form=form)

    def __getitem__(self, key):
        """The relation graph of an edge type (name or canonical triple)."""
        return self._rels[self._canonical(key)]

    # ------------------------------------------------------------ counts

    def _count(self, counts, ntype, side):
        if ntype not in counts:
            raise DGLError(f"{side} node type {ntype!r} does not exist (types: {', '.join(sorted(counts))})")
        return counts[ntype]

    def num_nodes(self, ntype=None):
        if ntype is None:
            total = sum(self._num_src.values())
            return total + sum(self._num_dst.values()) if self.is_block else total
        if self.is_block:
            if ntype.startswith("SRC/"):
                return self._count(self._num_src, ntype[4:], "source")
            if ntype.startswith("DST/"):
                return self._count(self._num_dst, ntype[4:], "destination")
            if ntype in self._num_src and ntype in self._num_dst:
                raise DGLError(f"node type {ntype!r} is ambiguous in a block: use 'SRC/{ntype}' or "
                               f"'DST/{ntype}' (or num_src_nodes / num_dst_nodes)")
            if ntype in self._num_dst:
                return self._num_dst[ntype]
        return self._count(self._num_src, ntype, "node")

    def _one_type(self, counts, ntype, side):
        if ntype is None:
            if len(counts) != 1:
                return sum(counts.values())
            return next(iter(counts.values()))
        return self._count(counts, ntype, side)

    def num_src_nodes(self, ntype=None):
        return self._one_type(self._num_src, ntype, "source")

    def num_dst_nodes(self, ntype=None):
        return self._one_type(self._num_dst, ntype, "destination")

    def num_edges(self, etype=None):
        if etype is None:
            return sum(r.num_edges() for r in self._rels.values())
        return self[etype].num_edges()

    number_of_nodes = num_nodes
    number_of_src_nodes = num_src_nodes
    number_of_dst_nodes = num_dst_nodes
    number_of_edges = num_edges

    # ------------------------------------------------------------ frames and views

    @property
    def srcdata(self):
        return _TypedData(self._srcframes, "source node data" if self.is_block else "node data")

    @property
    def dstdata(self):
        return _TypedData(self._dstframes, "destination node data" if self.is_block else "node data")

    @property
    def ndata(self):
        """The node data; on a block its source nodes' (as DGL's)."""
        return self.srcdata

    @property
    def edata(self):
        """The edge data: g.edata['w'] is {canonical etype: tensor} over the
        edge types that have 'w' (that type's tensor with one edge type);
        assigning a dict {canonical etype: tensor} sets it per type, as DGL's."""
        return _TypedData({c: r._eframe for c, r in self._rels.items()}, "edge data", "edge")

    @property
    def nodes(self):
        return _TypedNodes(self, self._srcframes, "source" if self.is_block else "")

    @property
    def srcnodes(self):
        return _TypedNodes(self, self._srcframes, "source")

    @property
    def dstnodes(self):
        return _TypedNodes(self, self._dstframes, "destination")

    @property
    def edges(self):
        return _TypedEdges(self)

    def all_edges(self, form="uv", order="eid", etype=None):
        return self[self._canonical(etype)].all_edges(form=form, order=order)

    def local_var(self):
        """DGL's local_var: the same structure with frames of its own (the
        same tensors), so columns set or replaced on it leave this graph's
        frames as they are."""
        g = type(self).__new__(type(self))
        g.__dict__.update(self.__dict__)
        g._srcframes = {t: f.copy() for t, f in self._srcframes.items()}
        g._dstframes = g._srcframes if self._dstframes is self._srcframes else \
            {t: f.copy() for t, f in self._dstframes.items()}
        g._rels = {}
        for (s, e, d), rel in self._rels.items():
            r = rel._shallow_copy()
            r._srcframe, r._dstframe = g._srcframes[s], g._dstframes[d]
            g._rels[(s, e, d)] = r
        return g

    @contextlib.contextmanager
    def local_scope(self):
        """Writes to any frame (new or replaced columns) are undone when the
        block ends; tensors changed in place stay changed."""
        frames = list(self._srcframes.values()) + list(self._dstframes.values())
        frames += [r._eframe for r in self._rels.values()]
        saved = [(f, f.snapshot()) for f in {id(f): f for f in frames}.values()]
        try:
            yield
        finally:
            for f, cols in saved:
                f.restore(cols)

    def __repr__(self):
        kind = "Block" if self.is_block else "Graph"
        if self.is_block:
            nodes = f"num_src_nodes={self._num_src}, num_dst_nodes={self._num_dst}"
        else:
            nodes = f"num_nodes={self._num_src}"
        edges = {c: r.num_edges() for c, r in self._rels.items()}
        return f"{kind}({nodes}, num_edges={edges}, metagraph={list(self._rels)})"


class TypedBlock(TypedGraph, DGLBlock):
    """A typed block (see the module doc); made by dgld.create_block with a
    dict and by the loaders on a typed DistGraph."""

    is_block = True


# ------------------------------------------------------------ construction

def _relations(data_dict, what):
    if not isinstance(data_dict, dict) or not data_dict:
        raise DGLError(f"{what} takes a non-empty dict {{(src_type, edge_type, dst_type): (src ids, dst ids)}}")
    rels = {}
    for key, data in data_dict.items():
        if not (isinstance(key, tuple) and len(key) == 3 and all(isinstance(x, str) for x in key)):
            raise DGLError(f"{what}: keys are canonical edge types (src_type, edge_type, dst_type) of str, "
                           f"got {key!r}")
        rels[key] = _uv(data, f"{what} {key!r}")
    return rels


def _counts(rels, given, side, what):
    """Per-type counts: given (checked to cover the ids) or max id + 1;
    side 0 counts src types, 1 dst types, None both."""
    need = {}
    for key, uv in rels.items():
        for i in ((0, 1) if side is None else (side,)):
            t = key[0] if i == 0 else key[2]
            ids = uv[i]
            need[t] = max(need.get(t, 0), int(ids.max()) + 1 if ids.numel() else 0)
    if given is None:
        return need
    if not isinstance(given, dict):
        raise DGLError(f"{what}: node counts of a typed graph are a dict {{ntype: count}}, got "
                       f"{type(given).__name__}")
    out = dict(need)
    for t, n in given.items():
        n = int(n)
        if n < 0:
            raise DGLError(f"{what}: node type {t!r} has a negative count {n}")
        if n < need.get(t, 0):
            raise DGLError(f"{what}: node type {t!r} has {n} nodes but the edges name node {need[t] - 1}")
        out[t] = n
    return out


def typed_graph(relations, num_src, num_dst, is_block, idtype=torch.int64, sort_etypes=True):
    """A TypedBlock (is_block) or TypedGraph over checked relations."""
    return (TypedBlock if is_block else TypedGraph)(relations, num_src, num_dst, idtype, sort_etypes)


def heterograph_relations(data_dict, num_nodes_dict, what):
    """DGL's heterograph arguments, checked: ({canonical etype: (src, dst)},
    {ntype: count})."""
    rels = _relations(data_dict, what)
    return rels, _counts(rels, num_nodes_dict, None, what)


def block_relations(data_dict, num_src_nodes, num_dst_nodes, what):
    """A typed create_block's arguments, checked: (relations, src counts,
    dst counts)."""
    rels = _relations(data_dict, what)
    return (rels, _counts(rels, num_src_nodes, 0, f"{what} num_src_nodes"),
            _counts(rels, num_dst_nodes, 1, f"{what} num_dst_nodes"))
