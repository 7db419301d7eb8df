"""dgld.backend: DGL's tensor backend interface (dgl.backend, imported in
DGL's code and tests as `F`), for PyTorch, the one framework dgld runs on.

As in DGL, the module holds `backend_name` ("pytorch"), `data_type_dict`
(DGL's dtype names to torch dtypes) and each dtype as an attribute
(F.float32, F.int64, F.bool, ...), `reverse_data_type_dict`, and every
function of DGL's interface (dgl/backend/backend.py) under its name: the
tensor functions of pytorch/tensor.py and the graph operators of
pytorch/sparse.py. `is_enabled(api)` says whether one is implemented;
those DGL's PyTorch backend lacks too (binary_reduce, copy_reduce,
NodeEmbedding) raise ImportError when called, as in DGL. Functions that
need DGL's C library (its NDArray, its HeteroGraphIndex) raise DGLError
saying so (docs/python.md).

DGL picks its framework from DGLBACKEND (or ~/.dgl/config.json); dgld
always uses PyTorch and warns when either names another framework."""

import json
import os
import warnings

from ._interface import INTERFACE
from . import pytorch
from .pytorch import *  # noqa: F401,F403

backend_name = "pytorch"


_enabled = frozenset(name for name in INTERFACE if name in pytorch.__all__)


def _missing(api):
    def missing(*args, **kwargs):
        raise ImportError(f'API "{api}" is not supported by backend "pytorch" (nor by DGL\'s PyTorch backend)')
    missing.__name__ = api
    return missing


for _api in INTERFACE:
    if _api not in _enabled:
        globals()[_api] = _missing(_api)

# As DGL's load_backend does: the dict replaces the function, each dtype
# becomes an attribute, and the reverse map keeps the first name of each.
data_type_dict = pytorch.data_type_dict()
globals().update(data_type_dict)
reverse_data_type_dict = {}
for _name, _dt in data_type_dict.items():
    reverse_data_type_dict.setdefault(_dt, _name)


def is_enabled(api):
    """True if `api` is a function of DGL's backend interface that dgld's
    PyTorch backend implements."""
    return api in _enabled


def to_dgl_nd(data):
    """DGL's tensor -> dgl.ndarray conversion: needs DGL's C library (raises
    DGLError)."""
    return pytorch.zerocopy_to_dgl_ndarray(data)


def from_dgl_nd(data):
    """DGL's dgl.ndarray -> tensor conversion: needs DGL's C library (raises
    DGLError)."""
    return pytorch.zerocopy_from_dgl_ndarray(data)


def get_preferred_backend():
    """The framework DGL would load: DGLBACKEND, else the "backend" of
    $DGLDEFAULTDIR/config.json (default ~/.dgl), else pytorch. Unlike DGL
    this writes no config file."""
    name = os.environ.get("DGLBACKEND")
    if not name:
        config = os.path.join(os.environ.get("DGLDEFAULTDIR", os.path.join(os.path.expanduser("~"), ".dgl")),
                              "config.json")
        try:
            with open(config) as f:
                name = str(json.load(f).get("backend", "")).lower()
        except (OSError, ValueError, AttributeError):
            name = None
    return name if name in ("pytorch", "mxnet", "tensorflow") else "pytorch"


def load_backend(mod_name):
    """DGL's backend switch: dgld runs on PyTorch only, so "pytorch" is
    accepted (nothing to do) and anything else refused."""
    if mod_name != "pytorch":
        raise NotImplementedError(f"Unsupported backend: {mod_name} (dgld runs on PyTorch only)")


if get_preferred_backend() != "pytorch":
    warnings.warn(f"DGLBACKEND / DGL's config names {get_preferred_backend()!r}; dgld runs on PyTorch only and "
                  "uses it", RuntimeWarning, stacklevel=2)

__all__ = (["backend_name", "data_type_dict", "reverse_data_type_dict", "is_enabled", "to_dgl_nd", "from_dgl_nd",
            "get_preferred_backend", "load_backend", "pytorch"]
           + list(data_type_dict) + list(INTERFACE))

del _api, _name, _dt
