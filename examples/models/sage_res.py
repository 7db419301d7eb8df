"""GraphSAGE with residual connections, as a TorchScript model for
trainer-host --model-file (not one of trainer-host's built-in models): each
layer computes

    h_dst' = SAGEConv(block, h) + res(h_dst)

with res a bias-free linear projection where the layer changes the width
and the identity where it keeps it, then ReLU and dropout between layers
(raw logits out of the last). Three layers unless told otherwise.

Export it with export.py (README.md):

    PYTHONPATH=build/python /usr/bin/python3 examples/models/export.py \\
        --model sage_res --in-feats 8 --n-classes 4 --num-layers 3 --out sage_res.pt
"""

from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import dgld.nn as dglnn  # registers torch.classes.dgld.Block and torch.ops.dgld

Block = torch.classes.dgld.Block


class SAGERes(nn.Module):
    def __init__(self, in_feats: int, n_hidden: int, n_classes: int, num_layers: int = 3, dropout: float = 0.5):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.num_layers = int(num_layers)
        self.in_feats = int(in_feats)
        self.n_classes = int(n_classes)
        sizes = [in_feats] + [n_hidden] * (num_layers - 1) + [n_classes]
        self.layers = nn.ModuleList(dglnn.SAGEConv(sizes[i], sizes[i + 1], "mean") for i in range(num_layers))
        self.res = nn.ModuleList(nn.Linear(sizes[i], sizes[i + 1], bias=False) if sizes[i] != sizes[i + 1]
                                 else nn.Identity() for i in range(num_layers))
        self.dropout = nn.Dropout(dropout)

    def _after(self, i: int, h: Tensor) -> Tensor:
        """What follows layer i (and its residual): ReLU and dropout, except
        after the last."""
        if i != self.num_layers - 1:
            h = self.dropout(F.relu(h))
        return h

    @torch.jit.export
    def forward_layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        """Layer i alone (with its residual and what forward applies after it)."""
        if i < 0 or i >= self.num_layers:
            raise IndexError("forward_layer: no layer " + str(i) + " in a " + str(self.num_layers) + "-layer model")
        out = h
        # A ModuleList cannot be indexed with a runtime int in TorchScript.
        for j, (layer, res) in enumerate(zip(self.layers, self.res)):
            if j == i:
                out = layer(block, h) + res(h[:block.num_dst_nodes()])
        return self._after(i, out)

    def forward(self, blocks: List[Block], x: Tensor) -> Tensor:
        if len(blocks) != self.num_layers:
            raise ValueError("forward: " + str(len(blocks)) + " blocks for a " + str(self.num_layers)
                             + "-layer model")
        h = x
        for i, (layer, res) in enumerate(zip(self.layers, self.res)):
            block = blocks[i]
            h = self._after(i, layer(block, h) + res(h[:block.num_dst_nodes()]))
        return h
