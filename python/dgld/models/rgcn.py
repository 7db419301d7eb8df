"""R-GCN, trainer-host's `rgcn` (Schlichtkrull et al.): RelGraphConv layers
over the blocks of a heterogeneous graph, each relation's mean over a
node's in-edges (aggregate='mean'), a self loop, a bias; W_r a combination
of num_bases bases (DGL's regularizer='basis'; num_bases 0: as many as
relations); ReLU then dropout between layers. The input rows are the node
types' embeddings (trainer-host's input layer, docs/heterogeneous.md)."""

import torch

from .. import nn as dglnn
from ._stack import LayerStack


class RGCN(LayerStack):
    def __init__(self, in_feats: int, n_hidden: int, n_classes: int, num_layers: int = 2, dropout: float = 0.5,
                 num_rels: int = 1, num_bases: int = 0):
        super().__init__([dglnn.RelGraphConv(1, 1, 1, regularizer="basis", num_bases=1, self_loop=True,
                                             aggregate="mean") for _ in range(num_layers)], dropout)
        self.num_rels = 0
        self.uses_edge_types = True
        self.configure(in_feats, n_hidden, n_classes, dropout, 1, num_rels, num_bases)

    @torch.jit.export
    def configure(self, in_feats: int, n_hidden: int, n_classes: int, dropout: float, num_heads: int, num_rels: int,
                  num_bases: int):
        """Sizes the layers for a graph of num_rels relations and draws every weight."""
        if num_rels < 1:
            raise ValueError("rgcn: num_rels must be >= 1, got " + str(num_rels))
        bases = num_bases if 0 < num_bases < num_rels else num_rels
        self.num_rels = num_rels
        widths = self._widths(in_feats, n_hidden, n_classes)
        for i, layer in enumerate(self.layers):
            layer.resize(widths[i], widths[i + 1], num_rels, bases)
        self.in_feats, self.n_classes, self.dropout_p = in_feats, n_classes, dropout
