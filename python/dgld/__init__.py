"""dgld: DGL's distributed training API over dgld's servers.

A training script written for DGL's distributed mode runs on dgld with its
imports changed:

    import dgld as dgl                  # was: import dgl
    import dgld.nn.pytorch as dglnn     # was: import dgl.nn.pytorch as dglnn

Python runs the model step; C++ threads (or sampler-worker processes) do the
sampling, the feature fetching and the prefetching, without the GIL.
docs/python.md lists what is there and how it differs from DGL.
"""

import torch  # noqa: F401 - loads libtorch before the extension

from . import _errors
from ._errors import DGLError
from . import _C

NID = "_ID"
EID = "_ID"
ETYPE = "_TYPE"
NTYPE = "_TYPE"

from . import distributed  # noqa: E402
from . import dataloading  # noqa: E402
from . import nn  # noqa: E402

__all__ = ["DGLError", "NID", "EID", "distributed", "dataloading", "nn"]
