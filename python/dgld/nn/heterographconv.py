"""DGL's HeteroGraphConv: one module per relation of a typed graph or typed
block, each run on its relation graph, the results aggregated per
destination node type."""

import torch
from torch import nn

from .._errors import DGLError, InvalidArgument


def _stacked(fn):
    def agg(alist, dsttype):
        return fn(torch.stack(alist, dim=0))
    return agg


_AGGREGATES = {
    "sum": _stacked(lambda s: torch.sum(s, dim=0)),
    "max": _stacked(lambda s: torch.max(s, dim=0)[0]),
    "min": _stacked(lambda s: torch.min(s, dim=0)[0]),
    "mean": _stacked(lambda s: torch.mean(s, dim=0)),
    "stack": lambda alist, dsttype: torch.stack(alist, dim=1),
}


def get_aggregate_fn(agg):
    """DGL's aggregate: a name ('sum', 'max', 'min', 'mean', 'stack') or a
    callable fn(list of tensors, dst type)."""
    if callable(agg):
        return agg
    if agg not in _AGGREGATES:
        raise InvalidArgument(f"HeteroGraphConv: invalid aggregate {agg!r}: use 'sum', 'max', 'min', 'mean', "
                              f"'stack' or a callable")
    return _AGGREGATES[agg]


class HeteroGraphConv(nn.Module):
    """mods maps an edge type (its name, or its canonical triple) to the
    module run on that relation; forward(g, inputs, mod_args, mod_kwargs)
    returns {dst type: aggregated output} for the dst types some relation
    with edges reaches (DGL's semantics)."""

    def __init__(self, mods, aggregate="sum"):
        super().__init__()
        if not isinstance(mods, dict) or not mods:
            raise InvalidArgument("HeteroGraphConv: mods must be a non-empty dict {edge type: module}")
        self.mod_dict = nn.ModuleDict({str(k): v for k, v in mods.items()})
        self.mods = mods
        # Relations may leave dst nodes without in-edges (as DGL does).
        for v in mods.values():
            set_fn = getattr(v, "set_allow_zero_in_degree", None)
            if callable(set_fn):
                set_fn(True)
            elif hasattr(v, "_allow_zero_in_degree"):
                v._allow_zero_in_degree = True
        self.agg_fn = get_aggregate_fn(aggregate)

    def _get_module(self, canonical):
        key = str(canonical)
        if key in self.mod_dict:
            return self.mod_dict[key]
        if canonical[1] in self.mod_dict:
            return self.mod_dict[canonical[1]]
        raise DGLError(f"HeteroGraphConv: no module for edge type {canonical!r} (mods: {', '.join(self.mod_dict)})")

    def forward(self, g, inputs, mod_args=None, mod_kwargs=None):
        mod_args = mod_args or {}
        mod_kwargs = mod_kwargs or {}
        outputs = {t: [] for t in g.dsttypes}
        if isinstance(inputs, tuple):
            if len(inputs) != 2:
                raise DGLError("HeteroGraphConv: inputs are a dict {ntype: tensor} or a pair of them")
            src_inputs, dst_inputs = inputs
        elif g.is_block:
            src_inputs = inputs
            dst_inputs = {t: v[:g.num_dst_nodes(t)] for t, v in inputs.items() if t in g.dsttypes}
        else:
            src_inputs = dst_inputs = inputs
        for stype, etype, dtype in g.canonical_etypes:
            rel = g[(stype, etype, dtype)]
            if rel.num_edges() == 0:
                continue
            if stype not in src_inputs or dtype not in dst_inputs:
                continue
            mod = self._get_module((stype, etype, dtype))
            out = mod(rel, (src_inputs[stype], dst_inputs[dtype]), *mod_args.get(etype, ()),
                      **mod_kwargs.get(etype, {}))
            outputs[dtype].append(out)
        return {t: self.agg_fn(alist, t) for t, alist in outputs.items() if alist}
