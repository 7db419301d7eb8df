"""dgld.data: what DGL's scripts and tests import from dgl.data.

- DGL's citation datasets (CoraGraphDataset, CiteseerGraphDataset,
  PubmedGraphDataset, CitationGraphDataset, load_cora, ...) read from a
  local copy, in DGL's download format or OGB's raw layout
  (citation_graph.py); dgld downloads nothing.
- DGL's dataset base classes DGLDataset and DGLBuiltinDataset
  (dgl_dataset.py).
- register_data_args (DGL's --dataset flag) and load_data, which gives
  the citation datasets and refuses any other name with a message saying
  what to do instead (a distributed job reads its graph from partitions:
  dgl-partition, DistGraph).
- DGL's knowledge-graph datasets (WN18Dataset, FB15kDataset,
  FB15k237Dataset) are names only: making one raises DGLError.
- dgld.data.utils: get_download_dir, generate_mask_tensor; DGL's binary
  graph files (load_graphs / save_graphs) are refused.
"""

from .._errors import DGLError
from . import utils
from .citation_graph import (CitationGraphDataset, CiteseerGraphDataset, CoraGraphDataset, PubmedGraphDataset,
                             load_citeseer, load_cora, load_pubmed)
from .dgl_dataset import DatasetNotFound, DGLBuiltinDataset, DGLDataset

__all__ = ["register_data_args", "load_data", "utils", "DGLDataset", "DGLBuiltinDataset", "DatasetNotFound",
           "CitationGraphDataset", "CoraGraphDataset", "CiteseerGraphDataset", "PubmedGraphDataset", "load_cora",
           "load_citeseer", "load_pubmed", "WN18Dataset", "FB15kDataset", "FB15k237Dataset"]


def register_data_args(parser):
    """DGL's --dataset flag (the distributed scripts parse it and read their
    graph from the partitions)."""
    parser.add_argument("--dataset", type=str, required=False,
                        help="The input dataset (DGL's flag; dgld's jobs read the partitioned graph)")
    return parser


def load_data(args):
    """DGL's load_data: the dataset named by args.dataset; dgld has the
    citation graphs (cora, citeseer, pubmed) from a local copy."""
    name = getattr(args, "dataset", None)
    loaders = {"cora": load_cora, "citeseer": load_citeseer, "pubmed": load_pubmed}
    if name in loaders:
        return loaders[name]()
    raise DGLError(f"load_data({name!r}): dgld has only the citation datasets (cora, citeseer, pubmed, from a local "
                   "copy) and downloads nothing; write the graph in OGB's raw layout (or DGL's chunked layout), cut "
                   "it with dgl-partition and open it with dgld.distributed.DistGraph")


def _not_supported(name):
    class _Dataset:
        def __init__(self, *args, **kwargs):
            raise DGLError(f"{name}: DGL's knowledge-graph datasets are not implemented by dgld (only the "
                           "citation graphs are: CoraGraphDataset, CiteseerGraphDataset, PubmedGraphDataset)")
    _Dataset.__name__ = _Dataset.__qualname__ = name
    _Dataset.__doc__ = f"DGL's {name}: not implemented by dgld (making one raises DGLError)."
    return _Dataset


WN18Dataset = _not_supported("WN18Dataset")
FB15kDataset = _not_supported("FB15kDataset")
FB15k237Dataset = _not_supported("FB15k237Dataset")
