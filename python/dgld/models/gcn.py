"""GCN, trainer-host's `gcn`: GraphConv(norm='both') layers over each block
with a self loop per destination node (Kipf and Welling's renormalised
adjacency), ReLU then dropout between layers."""

import torch

from .. import nn as dglnn
from ._stack import LayerStack


class GCN(LayerStack):
    def __init__(self, in_feats: int, n_hidden: int, n_classes: int, num_layers: int = 2, dropout: float = 0.5):
        super().__init__([dglnn.GraphConv(1, 1, norm="both", self_loop=True, allow_zero_in_degree=True)
                          for _ in range(num_layers)], dropout)
        self.configure(in_feats, n_hidden, n_classes, dropout, 1, 0, 0)

    @torch.jit.export
    def configure(self, in_feats: int, n_hidden: int, n_classes: int, dropout: float, num_heads: int, num_rels: int,
                  num_bases: int):
        """Sizes the layers for a graph and draws every weight."""
        widths = self._widths(in_feats, n_hidden, n_classes)
        for i, layer in enumerate(self.layers):
            layer.resize(widths[i], widths[i + 1])
        self.in_feats, self.n_classes, self.dropout_p = in_feats, n_classes, dropout
