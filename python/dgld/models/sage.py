"""GraphSAGE, trainer-host's `sage`: SAGEConv('mean') layers, in_feats ->
n_hidden -> ... -> n_classes, ReLU then dropout between layers, raw logits
out of the last (DGL's train_dist.py model)."""

import torch
from torch import Tensor, nn

from .. import nn as dglnn
from ..nn._utils import Block
from ._stack import LayerStack


class SAGE(LayerStack):
    def __init__(self, in_feats: int, n_hidden: int, n_classes: int, num_layers: int = 2, dropout: float = 0.5):
        super().__init__([dglnn.SAGEConv(1, 1, "mean") for _ in range(num_layers)], dropout)
        self.dense_maps = 2  # fc_self and fc_neigh
        self.configure(in_feats, n_hidden, n_classes, dropout, 1, 0, 0)

    @torch.jit.export
    def configure(self, in_feats: int, n_hidden: int, n_classes: int, dropout: float, num_heads: int, num_rels: int,
                  num_bases: int):
        """Sizes the layers for a graph and draws every weight (trainer-host's
        built-in models call it on the file scripted at build time)."""
        widths = self._widths(in_feats, n_hidden, n_classes)
        for i, layer in enumerate(self.layers):
            layer.resize(widths[i], widths[i + 1])
        self.in_feats, self.n_classes, self.dropout_p = in_feats, n_classes, dropout

    def _layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        """Layer i and what follows it: between layers ReLU and dropout with
        the layer's bias added in the same pass
        (SAGEConv.forward_relu_dropout); the last layer alone."""
        out = h
        for j, layer in enumerate(self.layers):
            if j == i and j != self.num_layers - 1:
                out = layer.forward_relu_dropout(block, h, self.dropout_p, self.training)
            elif j == i:
                out = layer(block, h)
        return out
