"""GAT, trainer-host's `gat`: GATConv layers of num_heads heads (no
feature or attention dropout, no residual: see docs/models.md), the
hidden layers' heads concatenated, ELU then dropout between layers, the
last layer's heads averaged."""

from typing import List

import torch
from torch import Tensor

from .. import nn as dglnn
from ._stack import LayerStack


class GAT(LayerStack):
    def __init__(self, in_feats: int, n_hidden: int, n_classes: int, num_layers: int = 2, num_heads: int = 2,
                 dropout: float = 0.5):
        super().__init__([dglnn.GATConv(1, 1, num_heads, negative_slope=0.2, allow_zero_in_degree=True)
                          for _ in range(num_layers)], dropout)
        self.num_heads = int(num_heads)
        self.configure(in_feats, n_hidden, n_classes, dropout, num_heads, 0, 0)

    @torch.jit.export
    def configure(self, in_feats: int, n_hidden: int, n_classes: int, dropout: float, num_heads: int, num_rels: int,
                  num_bases: int):
        """Sizes the layers for a graph (a hidden layer's input is the
        previous layer's heads concatenated) and draws every weight."""
        self.num_heads = num_heads
        widths = self._widths(in_feats, n_hidden, n_classes)
        for i, layer in enumerate(self.layers):
            layer.resize(widths[i] * (num_heads if i > 0 else 1), widths[i + 1], num_heads)
        self.in_feats, self.n_classes, self.dropout_p = in_feats, n_classes, dropout

    def _after(self, i: int, h: Tensor) -> Tensor:
        """What follows layer i ([num_dst, num_heads, out]): heads concatenated,
        ELU and dropout; after the last layer, heads averaged."""
        if i == self.num_layers - 1:
            return h.mean(1)
        return self._dropout(torch.nn.functional.elu(h.flatten(1)))
