"""dgld.nn: DGL's graph neural network modules (also reachable as
dgld.nn.pytorch, DGL's module path), with DGL's constructor signatures,
parameter names, initialisation and formulas, on dgld's fused kernels
(torch.ops.dgld.*). Each takes a graph (dgld.DGLGraph or DGLBlock; a
block's first num_dst_nodes source nodes are its destination nodes) and
DGL's input forms (a tensor, or an (h_src, h_dst) pair). SAGEConv,
GraphConv, GATConv, GATv2Conv and GINConv also script with
torch.jit.script (then taking torch.classes.dgld.Block), so a model made of
them runs under trainer-host --model-file."""

from . import functional
from ._utils import project_before_aggregating
from .gatconv import GATConv
from .gatv2conv import GATv2Conv
from .ginconv import GINConv
from .heterographconv import HeteroGraphConv
from .graphconv import EdgeWeightNorm, GraphConv
from .relgraphconv import RelGraphConv, TypedLinear
from .sageconv import SAGEConv
from .weightbasis import WeightBasis

__all__ = ["SAGEConv", "GraphConv", "EdgeWeightNorm", "GATConv", "GATv2Conv", "GINConv", "RelGraphConv",
           "TypedLinear", "HeteroGraphConv", "WeightBasis", "project_before_aggregating", "functional"]
