"""dgld.backend.pytorch (DGL's dgl.backend.pytorch): the PyTorch
implementation of DGL's backend interface, tensor functions in tensor.py
and graph operators in sparse.py. dgld.backend exports them with DGL's
module-level names (backend_name, the dtypes, ...). As in DGL, the
function `tensor` hides the submodule of that name here: reach the module
as sys.modules["dgld.backend.pytorch.tensor"] if ever needed."""

from . import sparse as _sparse_module
from . import tensor as _tensor_module
from .sparse import *  # noqa: F401,F403
from .tensor import *  # noqa: F401,F403

__all__ = list(_tensor_module.__all__) + list(_sparse_module.__all__)
