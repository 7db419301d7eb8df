"""DGL's module path for the layers: `import dgld.nn.pytorch as dglnn`."""

from .conv import SAGEConv, GraphConv, GATConv  # noqa: F401
from . import functional  # noqa: F401,E402
