"""dgld.data.utils: DGL's graph-file functions, refused with a message (dgld
keeps graphs in its partition files; docs/python.md)."""

from .._errors import DGLError

__all__ = ["load_graphs", "save_graphs"]


def _refuse(what):
    raise DGLError(f"{what}: DGL's binary graph files are not supported by dgld; partition the graph with "
                   "dgl-partition (or dgld.distributed.partition_graph) and open it with DistGraph")


def load_graphs(filename, idx_list=None):
    _refuse(f"load_graphs({filename!r})")


def save_graphs(filename, g_list, labels=None, formats=None):
    _refuse(f"save_graphs({filename!r})")
