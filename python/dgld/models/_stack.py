"""What every built-in model shares (docs/models.md): num_layers layers of
one dgld.nn kind, what follows each layer (the kind's _after: activation,
dropout, heads merged), and trainer-host's model contract: forward(blocks,
x), forward_layer(i, block, h), the int attribute num_layers, dropout that
follows self.training. configure() sizes a model scripted at build time for
a graph: trainer-host calls it once with the run's widths."""

from typing import List

import torch
from torch import Tensor, nn

from ..nn._utils import Block


class LayerStack(nn.Module):
    def __init__(self, layers: List[nn.Module], dropout: float):
        super().__init__()
        if len(layers) < 1:
            raise ValueError("a model needs at least one layer")
        self.layers = nn.ModuleList(layers)
        self.num_layers = len(layers)
        self.dropout_p = float(dropout)
        self.in_feats = 0
        self.n_classes = 0
        # What trainer-host reads of a model: whether its layers read the
        # blocks' edge types (a heterogeneous graph's), and how many dense
        # maps of a destination row a layer makes (FLOP estimates).
        self.uses_edge_types = False
        self.dense_maps = 1

    def _widths(self, in_feats: int, hidden: int, n_classes: int) -> List[int]:
        """Layer l maps widths[l] to widths[l + 1] wide rows (hidden between)."""
        return [in_feats] + [hidden] * (self.num_layers - 1) + [n_classes]

    def _dropout(self, h: Tensor) -> Tensor:
        """Dropout in one pass with no mask kept (torch.ops.dgld.dropout)."""
        return torch.ops.dgld.dropout(h, self.dropout_p, self.training, False)

    def _after(self, i: int, h: Tensor) -> Tensor:
        """What follows layer i: ReLU and dropout (one fused pass), except
        after the last."""
        if i != self.num_layers - 1:
            h = torch.ops.dgld.dropout(h, self.dropout_p, self.training, True)
        return h

    def _layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        """Layer i on h, with what follows it (_after)."""
        out = h
        for j, layer in enumerate(self.layers):  # a ModuleList cannot be indexed with a runtime int
            if j == i:
                out = self._after(i, layer(block, h))
        return out

    @torch.jit.export
    def forward_layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        """Layer i alone, with what forward applies after it."""
        if i < 0 or i >= self.num_layers:
            raise IndexError("forward_layer: no layer " + str(i) + " in a " + str(self.num_layers) + "-layer model")
        return self._layer(i, block, h)

    def forward(self, blocks: List[Block], x: Tensor) -> Tensor:
        if len(blocks) != self.num_layers:
            raise ValueError("forward: " + str(len(blocks)) + " blocks for a " + str(self.num_layers)
                             + "-layer model")
        h = x
        for i in range(self.num_layers):
            h = self._layer(i, blocks[i], h)
        return h
