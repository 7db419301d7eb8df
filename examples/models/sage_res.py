"""GraphSAGE with residual connections, as a TorchScript model for
trainer-host --model-file (not one of trainer-host's built-in models): each
layer computes

    h_dst' = SAGEConv(block, h) + res(h_dst)

with res a bias-free linear projection where the layer changes the width
and the identity where it keeps it, then ReLU and dropout between layers
(raw logits out of the last). Three layers unless told otherwise.

The model is a dgld.models LayerStack (which gives forward, forward_layer
and num_layers, the contract of docs/models.md) of a layer written here;
the same two pieces make a new built-in kind.

Export it with export.py (README.md):

    PYTHONPATH=build/python /usr/bin/python3 examples/models/export.py \\
        --model sage_res --in-feats 8 --n-classes 4 --num-layers 3 --out sage_res.pt
"""

from torch import Tensor, nn

import dgld.nn as dglnn  # registers torch.classes.dgld.Block and torch.ops.dgld
from dgld.models._stack import LayerStack

import torch

Block = torch.classes.dgld.Block


class ResidualSAGEConv(nn.Module):
    """SAGEConv(mean) plus a projection of the destination nodes' input."""

    def __init__(self, in_feats: int, out_feats: int):
        super().__init__()
        self.conv = dglnn.SAGEConv(in_feats, out_feats, "mean")
        self.res = nn.Linear(in_feats, out_feats, bias=False) if in_feats != out_feats else nn.Identity()

    def forward(self, block: Block, h: Tensor) -> Tensor:
        return self.conv(block, h) + self.res(h[:block.num_dst_nodes()])


class SAGERes(LayerStack):
    def __init__(self, in_feats: int, n_hidden: int, n_classes: int, num_layers: int = 3, dropout: float = 0.5):
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        sizes = [in_feats] + [n_hidden] * (num_layers - 1) + [n_classes]
        super().__init__([ResidualSAGEConv(sizes[i], sizes[i + 1]) for i in range(num_layers)], dropout)
        self.in_feats = int(in_feats)
        self.n_classes = int(n_classes)
