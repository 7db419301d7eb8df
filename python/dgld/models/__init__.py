"""trainer-host's built-in models, written once (docs/models.md): the same
modules run in Python, scripted, and inside trainer-host, which loads them
from the files scripted at build time (dgld.models.script) and sizes them
with configure().

A new model kind is one module file here (a LayerStack subclass with a
constructor (in_feats, n_hidden, n_classes, num_layers, ...) and an exported
configure(in_feats, n_hidden, n_classes, dropout, num_heads, num_rels,
num_bases) that resizes its layers) plus its line in KINDS; trainer-host
then takes `--model <name>`."""

from .gat import GAT
from .gcn import GCN
from .rgcn import RGCN
from .sage import SAGE

# name -> class: what `trainer-host --model NAME` loads (scripted per depth, 1 to MAX_LAYERS layers).
KINDS = {
    "sage": SAGE,
    "gcn": GCN,
    "gat": GAT,
    "rgcn": RGCN,
}
MAX_LAYERS = 4

__all__ = ["SAGE", "GCN", "GAT", "RGCN", "KINDS", "MAX_LAYERS"]
