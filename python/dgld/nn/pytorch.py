"""DGL's module path for the layers: `import dgld.nn.pytorch as dglnn`."""

from . import functional  # noqa: F401
from .gatconv import GATConv  # noqa: F401
from .gatv2conv import GATv2Conv  # noqa: F401
from .ginconv import GINConv  # noqa: F401
from .heterographconv import HeteroGraphConv  # noqa: F401
from .graphconv import EdgeWeightNorm, GraphConv  # noqa: F401
from .relgraphconv import RelGraphConv, TypedLinear  # noqa: F401
from .sageconv import SAGEConv  # noqa: F401
from .weightbasis import WeightBasis  # noqa: F401
