"""dgld.data: what DGL's distributed scripts import from dgl.data.

DGL 0.5-0.7's examples import register_data_args, load_data and
dgl.data.utils.load_graphs at the top; a distributed job reads its graph
from the partitions (DistGraph), so only the import has to work.
register_data_args adds DGL's --dataset flag; load_data and the graph
files of dgl.data.utils are refused with a message saying what to do
instead (dgld downloads nothing: partition the data with dgl-partition).
"""

from .._errors import DGLError
from . import utils

__all__ = ["register_data_args", "load_data", "utils"]


def register_data_args(parser):
    """DGL's --dataset flag (the distributed scripts parse it and read their
    graph from the partitions)."""
    parser.add_argument("--dataset", type=str, required=False,
                        help="The input dataset (DGL's flag; dgld's jobs read the partitioned graph)")
    return parser


def load_data(args):
    name = getattr(args, "dataset", None)
    raise DGLError(f"load_data({name!r}): dgld has no built-in datasets and downloads nothing; write the graph in "
                   "OGB's raw layout (or DGL's chunked layout), cut it with dgl-partition and open it with "
                   "dgld.distributed.DistGraph")
