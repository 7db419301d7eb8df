"""dgld.nn: DGL's graph convolution layers on dgld's blocks (also reachable as
dgld.nn.pytorch, DGL's module path). They take a torch.classes.dgld.Block
and aggregate with dgld's fused kernels (torch.ops.dgld.*), so a model made
of them runs eagerly in Python, scripted with torch.jit.script, and under
trainer-host --model-file, with the same results."""

from .conv import SAGEConv, GraphConv, GATConv, project_before_aggregating
from . import functional

__all__ = ["SAGEConv", "GraphConv", "GATConv", "project_before_aggregating", "functional"]
