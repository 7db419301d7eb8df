"""What dgld.nn's layers share: the native block a layer's kernels run on,
DGL's checks (zero in-degree nodes, feature widths) and the choice of
projecting before or after aggregating. Written to be scripted: a scripted
layer takes a torch.classes.dgld.Block, an eager one also a DGLGraph or
DGLBlock (converted by native_block)."""

from typing import List, Tuple

import torch
from torch import Tensor

from .._errors import DGLError, InvalidArgument
from ..base import Block
from ..graph import HomoGraph

def zero_in_degree_message() -> str:
    return ("There are 0-in-degree nodes in the graph, output for those nodes will be invalid. This is "
            "harmful for some applications, causing silent performance regression. Adding self-loop on the "
            "input graph by calling `g = dgl.add_self_loop(g)` will resolve the issue. Setting "
            "``allow_zero_in_degree`` to be `True` when constructing this module will suppress the check "
            "and let the code run.")


def native_block(graph):
    """The torch.classes.dgld.Block a layer's kernels run on: a DGLGraph's
    or DGLBlock's CSR (made once per graph), or the Block itself. Eager
    mode only: a scripted layer takes Blocks."""
    if isinstance(graph, HomoGraph):
        return graph._csr()
    return graph


def _raise_eager(exc_type: str, message: str):
    if exc_type == "width":
        raise InvalidArgument(message)
    raise DGLError(message)


def check_zero_in_degree(graph: Block, allow_zero_in_degree: bool):
    """DGL's refusal of destination nodes without in-edges."""
    if not allow_zero_in_degree and graph.num_dst_nodes() > 0:
        if bool((graph.in_degrees() == 0).any()):
            if not torch.jit.is_scripting():
                _raise_eager("degree", zero_in_degree_message())
            raise RuntimeError(zero_in_degree_message())


def check_width(layer: str, what: str, feat: Tensor, want: int):
    """A feature of the wrong width: an error naming the layer and both widths."""
    if feat.dim() < 2 or feat.shape[-1] != want:
        got = feat.shape[-1] if feat.dim() >= 2 else 1
        msg = "{}: {} features have width {}, but the layer was built for {}".format(layer, what, got, want)
        if not torch.jit.is_scripting():
            _raise_eager("width", msg)
        raise RuntimeError(msg)


def pair_sizes(in_feats) -> Tuple[int, int]:
    """DGL's in_feats: one width, or (source width, destination width)."""
    if isinstance(in_feats, (tuple, list)):
        if len(in_feats) != 2:
            raise InvalidArgument(f"in_feats must be an int or a pair of ints, got {in_feats!r}")
        return int(in_feats[0]), int(in_feats[1])
    return int(in_feats), int(in_feats)


def relu_gain() -> float:
    """nn.init.calculate_gain("relu"), which TorchScript cannot compile: the
    layers' reset_parameters run scripted too (resize, dgld.models)."""
    return 1.4142135623730951


def project_before_aggregating(graph: Block, in_dim: int, out_dim: int, input_needs_grad: bool,
                               self_loop: bool = False) -> bool:
    """Whether projecting in_dim-wide rows to out_dim before aggregating them
    costs less than aggregating first (DGL's lin_before_mp, decided by cost):
    common/ops' rule, the one every layer and trainer-host use."""
    return torch.ops.dgld.project_before_aggregating(graph, in_dim, out_dim, input_needs_grad, self_loop)


def set_shape(p: Tensor, shape: List[int]):
    """Gives parameter p a new shape (its values undefined until a
    reset_parameters): how a layer scripted at one width is resized."""
    with torch.no_grad():
        p.set_(torch.empty(shape, dtype=p.dtype))


def aggregate(graph: Block, h: Tensor, reduce: str, edge_weight: Tensor) -> Tensor:
    """reduce over each dst's in-edges of h[src] (times the edge's weight
    when edge_weight has one value per edge; an empty edge_weight: none)."""
    if edge_weight.numel() == 0:
        if reduce == "sum" or reduce == "mean":
            return torch.ops.dgld.copy_u_reduce(graph, h, reduce, False)
        return torch.ops.dgld.gspmm(graph, "copy_lhs", reduce, h, None, "u", "e")
    w = edge_weight.reshape(-1, 1) if edge_weight.dim() == 1 else edge_weight
    return torch.ops.dgld.gspmm(graph, "mul", reduce, h, w.to(h.dtype), "u", "e")


def no_weight() -> Tensor:
    return torch.empty(0)


def src_dst(graph: Block, feat: Tensor) -> Tuple[Tensor, Tensor]:
    """A single input as DGL reads it on a block: the first num_dst rows
    are the destination nodes'."""
    return feat, feat[:graph.num_dst_nodes()]

