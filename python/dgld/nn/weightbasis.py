"""DGL's WeightBasis (dgl.nn.pytorch.utils): num_outputs weight tensors of
one shape, each a learned combination of num_bases shared bases,

    W_r = sum_b w_comp[r, b] V_b

as R-GCN's basis decomposition builds its relation weights. forward()
takes no input and returns all of them, [num_outputs, *shape]."""

import warnings

import torch
from torch import nn

from .._errors import InvalidArgument


class WeightBasis(nn.Module):
    """See the module doc. Both parameters are initialised as DGL's:
    xavier_uniform_ with the ReLU gain."""

    def __init__(self, shape, num_bases, num_outputs):
        super().__init__()
        self.shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        self.num_bases, self.num_outputs = int(num_bases), int(num_outputs)
        if self.num_bases < 1 or self.num_outputs < 1 or any(s < 1 for s in self.shape):
            raise InvalidArgument(f"WeightBasis: shape {shape!r}, num_bases {num_bases} and num_outputs "
                                  f"{num_outputs} must all be positive")
        if self.num_outputs <= self.num_bases:
            warnings.warn(f"WeightBasis: {self.num_outputs} outputs from {self.num_bases} bases is no saving; "
                          f"use fewer bases")
        self.weight = nn.Parameter(torch.empty(self.num_bases, *self.shape))
        self.w_comp = nn.Parameter(torch.empty(self.num_outputs, self.num_bases))
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_uniform_(self.weight, gain=gain)
        nn.init.xavier_uniform_(self.w_comp, gain=gain)

    def forward(self):
        return (self.w_comp @ self.weight.reshape(self.num_bases, -1)).reshape(self.num_outputs, *self.shape)
