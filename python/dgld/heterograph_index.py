"""dgld.heterograph_index (DGL's dgl.heterograph_index): the graph-index
constructors DGL's code imports from there. dgld keeps no index object
apart from its graphs, so each returns the dgld graph the index would
describe (a DGLGraph), made by convert.py."""

from ._errors import DGLError
from .base import as_ids
from .convert import graph, heterograph

__all__ = ["create_unitgraph_from_coo"]

_FORMATS = ("coo", "csr", "csc", "any")


def create_unitgraph_from_coo(num_ntypes, num_src, num_dst, row, col, formats, row_sorted=False, col_sorted=False):
    """The graph of one relation from COO (DGL's create_unitgraph_from_coo):
    edge i goes from row[i] to col[i]. num_ntypes 1: a graph of num_src
    (== num_dst) nodes; 2: a bipartite graph from num_src '_U' nodes to
    num_dst '_V' nodes (DGL's default names of a unit graph's two types).
    formats ('coo', 'csr', 'csc', 'any', or a list of them) is checked and
    otherwise unused (dgld makes each format on first need); row_sorted and
    col_sorted are hints DGL may use and dgld does not need."""
    formats = [formats] if isinstance(formats, str) else list(formats)
    bad = [f for f in formats if f not in _FORMATS]
    if bad or not formats:
        raise DGLError(f"create_unitgraph_from_coo: formats must be among {', '.join(_FORMATS)}, got {formats!r}")
    num_src, num_dst = int(num_src), int(num_dst)
    src = as_ids(row, "create_unitgraph_from_coo row", num_src)
    dst = as_ids(col, "create_unitgraph_from_coo col", num_dst)
    if src.numel() != dst.numel():
        raise DGLError(f"create_unitgraph_from_coo: row and col must be as long, got {src.numel()} and {dst.numel()}")
    if int(num_ntypes) == 1:
        if num_src != num_dst:
            raise DGLError(f"create_unitgraph_from_coo: one node type needs num_src == num_dst, got {num_src} and "
                           f"{num_dst}")
        return graph((src, dst), num_nodes=num_src)
    if int(num_ntypes) == 2:
        return heterograph({("_U", "_E", "_V"): (src, dst)}, {"_U": num_src, "_V": num_dst})
    raise DGLError(f"create_unitgraph_from_coo: num_ntypes must be 1 or 2, got {num_ntypes}")
