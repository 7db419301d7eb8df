"""GCN as a TorchScript model for trainer-host --model-file: the same
architecture as trainer-host's built-in `gcn` model (dgld.nn.GraphConv with
norm='both' and one self loop per dst node, in_feats -> n_hidden -> ... ->
n_classes, ReLU then dropout between layers, raw logits out of the last).

Export it with export.py (README.md):

    PYTHONPATH=build/python /usr/bin/python3 examples/models/export.py \\
        --model gcn --in-feats 8 --n-classes 4 --out gcn.pt
"""

from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import dgld.nn as dglnn  # registers torch.classes.dgld.Block and torch.ops.dgld

Block = torch.classes.dgld.Block


class GCN(nn.Module):
    def __init__(self, in_feats: int, n_hidden: int, n_classes: int, num_layers: int = 2, dropout: float = 0.5):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.num_layers = int(num_layers)
        self.in_feats = int(in_feats)
        self.n_classes = int(n_classes)
        sizes = [in_feats] + [n_hidden] * (num_layers - 1) + [n_classes]
        # self_loop=True: dst v also aggregates its own src row (dgl.add_self_loop
        # on a block), so no dst node has zero in-degree.
        self.layers = nn.ModuleList(dglnn.GraphConv(sizes[i], sizes[i + 1], norm="both", self_loop=True)
                                    for i in range(num_layers))
        self.dropout = nn.Dropout(dropout)

    def _after(self, i: int, h: Tensor) -> Tensor:
        """What follows layer i: ReLU and dropout, except after the last."""
        if i != self.num_layers - 1:
            h = self.dropout(F.relu(h))
        return h

    @torch.jit.export
    def forward_layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        """Layer i alone (with what forward applies after it)."""
        if i < 0 or i >= self.num_layers:
            raise IndexError("forward_layer: no layer " + str(i) + " in a " + str(self.num_layers) + "-layer model")
        out = h
        # A ModuleList cannot be indexed with a runtime int in TorchScript.
        for j, layer in enumerate(self.layers):
            if j == i:
                out = layer(block, h)
        return self._after(i, out)

    def forward(self, blocks: List[Block], x: Tensor) -> Tensor:
        if len(blocks) != self.num_layers:
            raise ValueError("forward: " + str(len(blocks)) + " blocks for a " + str(self.num_layers)
                             + "-layer model")
        h = x
        for i, layer in enumerate(self.layers):
            h = self._after(i, layer(blocks[i], h))
        return h
