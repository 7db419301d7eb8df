"""GAT as a TorchScript model for trainer-host --model-file: the same
architecture as trainer-host's built-in `gat` model (dgld.nn.GATConv with
num_heads heads in every layer, negative slope 0.2, no residual, no feature
or attention dropout, zero in-degree allowed; hidden layers concatenate
their heads and apply ELU then dropout, the last layer averages its heads
into raw logits).

Export it with export.py (README.md):

    PYTHONPATH=build/python /usr/bin/python3 examples/models/export.py \\
        --model gat --in-feats 8 --n-classes 4 --num-heads 2 --out gat.pt
"""

from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import dgld.nn as dglnn  # registers torch.classes.dgld.Block and torch.ops.dgld

Block = torch.classes.dgld.Block


class GAT(nn.Module):
    def __init__(self, in_feats: int, n_hidden: int, n_classes: int, num_layers: int = 2, num_heads: int = 2,
                 dropout: float = 0.5):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got {num_heads}")
        self.num_layers = int(num_layers)
        self.num_heads = int(num_heads)
        self.in_feats = int(in_feats)
        self.n_classes = int(n_classes)
        layers = []
        for i in range(num_layers):
            in_dim = in_feats if i == 0 else n_hidden * num_heads  # hidden layers concatenate their heads
            out_dim = n_classes if i == num_layers - 1 else n_hidden
            layers.append(dglnn.GATConv(in_dim, out_dim, num_heads, negative_slope=0.2, residual=False,
                                        allow_zero_in_degree=True))
        self.layers = nn.ModuleList(layers)
        self.dropout = nn.Dropout(dropout)

    def _after(self, i: int, h: Tensor) -> Tensor:
        """What follows layer i ([num_dst, num_heads, out]): heads concatenated,
        ELU and dropout; after the last layer, heads averaged."""
        if i == self.num_layers - 1:
            return h.mean(1)
        return self.dropout(F.elu(h.flatten(1)))

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
