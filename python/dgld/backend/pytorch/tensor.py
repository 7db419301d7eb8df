"""DGL's tensor interface (dgl/backend/backend.py documents each function)
for PyTorch: creation, dtype and device queries, reductions, indexing and
scattering, NumPy and DLPack exchange, and the autograd helpers.

Each function takes and returns torch tensors and does what DGL's PyTorch
backend does, including its quirks that scripts and tests can see (a
Python scalar makes a one-element tensor, gather_row casts the index to
int64, unique counts booleans as int8, ...). The three conversions to and
from DGL's NDArray need DGL's C library, which dgld does not have: they
raise DGLError saying so."""

import builtins
import numbers

import torch
from torch.utils import dlpack as _dlpack

from ..._errors import DGLError
from .._interface import INTERFACE


# ---------------------------------------------------------------------------
# Data types and devices

_DTYPES = (("bfloat16", torch.bfloat16), ("float16", torch.float16), ("float32", torch.float32),
           ("float64", torch.float64), ("uint8", torch.uint8), ("int8", torch.int8), ("int16", torch.int16),
           ("int32", torch.int32), ("int64", torch.int64), ("bool", torch.bool))


def data_type_dict():
    """DGL's dtype names (float32, int64, bool, ...) to torch dtypes; the
    backend package makes each one of its attributes (F.float32)."""
    return dict(_DTYPES)


def cpu():
    return torch.device("cpu")


def is_tensor(obj):
    return isinstance(obj, torch.Tensor)


def shape(input):
    return input.shape


def dtype(input):
    return input.dtype


def ndim(input):
    return input.dim()


def context(input):
    return input.device


def device_type(ctx):
    """'cpu' or 'cuda' for a torch.device or a device string."""
    return torch.device(ctx).type


def device_id(ctx):
    """The device's index: 0 for the CPU, the current CUDA device for a
    'cuda' without an index."""
    dev = torch.device(ctx)
    if dev.index is not None:
        return dev.index
    return 0 if dev.type == "cpu" else torch.cuda.current_device()


def to_backend_ctx(dglctx):
    """The torch.device of a DGL context: any object with DGL's
    device_type (1 = CPU, 2 = CUDA) and device_id attributes."""
    kind = getattr(dglctx, "device_type", None)
    if kind == 1:
        return torch.device("cpu")
    if kind == 2:
        return torch.device("cuda", dglctx.device_id)
    raise ValueError(f"Unsupported DGL device context: {dglctx!r}")


def copy_to(input, ctx, **kwargs):
    """input on device ctx (CPU or CUDA; kwargs go to Tensor.cuda, e.g.
    non_blocking)."""
    dev = torch.device(ctx)
    if dev.type == "cpu":
        return input.cpu()
    if dev.type == "cuda":
        if dev.index is not None:
            torch.cuda.set_device(dev.index)
        return input.cuda(**kwargs)
    raise RuntimeError(f"Invalid context {dev}")


def is_pinned(input):
    return input.is_pinned()


# ---------------------------------------------------------------------------
# Creation and conversion


def tensor(data, dtype=None):
    """A tensor of `data` (a number, list, NumPy array or tensor). A number
    gives a one-element 1-D tensor (not a 0-d one); a list of 0-d tensors is
    stacked on their device; a tensor stays on its device and is returned
    as it is when the dtype already matches; a NumPy array shares its
    memory where torch.as_tensor can."""
    if isinstance(data, numbers.Number):
        data = [data]
    if isinstance(data, list) and data and isinstance(data[0], torch.Tensor) and data[0].dim() == 0:
        out = torch.stack(data)
        return out if dtype is None else out.to(dtype)
    if isinstance(data, torch.Tensor):
        return torch.as_tensor(data, dtype=dtype, device=data.device)
    return torch.as_tensor(data, dtype=dtype)


def as_scalar(data):
    return data.item()


def astype(input, ty):
    return input.type(ty)


def asnumpy(input):
    """A NumPy copy of input (a sparse tensor is made dense first)."""
    if input.is_sparse:
        input = input.to_dense()
    return input.detach().cpu().numpy()


def empty(shape, dtype, ctx):
    return torch.empty(shape, dtype=dtype, device=ctx)


def zeros(shape, dtype, ctx):
    return torch.zeros(shape, dtype=dtype, device=ctx)


def zeros_like(input):
    return torch.zeros_like(input)


def ones(shape, dtype, ctx):
    return torch.ones(shape, dtype=dtype, device=ctx)


def uniform(shape, dtype, ctx, low, high):
    """Uniform draws in [low, high) from torch's generator."""
    return torch.empty(shape, dtype=dtype, device=ctx).uniform_(low, high)


def randint(shape, dtype, ctx, low, high):
    """Integers drawn uniformly from [low, high)."""
    return torch.randint(low, high, shape, dtype=dtype, device=ctx)


def full_1d(length, fill_value, dtype, ctx):
    return torch.full((length,), fill_value, dtype=dtype, device=ctx)


def arange(start, stop, dtype=torch.int64, ctx=None):
    return torch.arange(start, stop, dtype=dtype, device=ctx)


def clone(input):
    return input.clone()


# ---------------------------------------------------------------------------
# Sparse matrices (PyTorch's COO)


def get_preferred_sparse_format():
    return "coo"


def sparse_matrix(data, index, shape, force_format=False):
    """A torch sparse COO tensor from index = ('coo', [2, nnz] coordinates)
    and its values; (matrix, None) as DGL returns (no shuffle index)."""
    fmt, coords = index
    if fmt != "coo":
        raise TypeError(f"Pytorch backend only supports COO format. But got {fmt}.")
    return torch.sparse_coo_tensor(coords, data, shape), None


def sparse_matrix_indices(spmat):
    return "coo", spmat._indices()


# ---------------------------------------------------------------------------
# Reductions and element-wise math


def sum(input, dim, keepdims=False):
    return torch.sum(input, dim=dim, keepdim=keepdims)


def reduce_sum(input):
    return input.sum()


def floor_div(in1, in2):
    return in1 // in2


def cumsum(input, dim):
    return torch.cumsum(input, dim=dim)


def mean(input, dim):
    return torch.mean(input, dim=dim)


def reduce_mean(input):
    return input.mean()


def max(input, dim):
    """The maximum along dim (the values only, not the arg-max)."""
    return torch.max(input, dim=dim).values


def reduce_max(input):
    return input.max()


def min(input, dim):
    """The minimum along dim (the values only, not the arg-min)."""
    return torch.min(input, dim=dim).values


def reduce_min(input):
    return input.min()


def argsort(input, dim, descending):
    return torch.argsort(input, dim=dim, descending=descending)


def topk(input, k, dim, descending=True):
    """The k largest values along dim (the k smallest when descending is
    False)."""
    return torch.topk(input, k, dim=dim, largest=descending).values


def argtopk(input, k, dim, descending=True):
    return torch.topk(input, k, dim=dim, largest=descending).indices


def exp(input):
    return torch.exp(input)


def inverse(input):
    return torch.inverse(input)


def sqrt(input):
    return torch.sqrt(input)


def softmax(input, dim=-1):
    return torch.softmax(input, dim=dim)


def equal(x, y):
    """Element-wise x == y (a bool tensor, not one bool)."""
    return x == y


def allclose(x, y, rtol=1e-4, atol=1e-4):
    return torch.allclose(x, y, rtol=rtol, atol=atol)


def logical_not(input):
    return ~input


def logical_and(input1, input2):
    return input1 & input2


def clamp(data, min_val, max_val):
    return torch.clamp(data, min_val, max_val)


def replace_inf_with_zero(x):
    return x.masked_fill(torch.isinf(x), 0)


def count_nonzero(input):
    """The number of non-zero elements, as a Python int."""
    return int(torch.count_nonzero(input))


# ---------------------------------------------------------------------------
# Shapes, joining and indexing


def cat(seq, dim):
    return torch.cat(seq, dim=dim)


def stack(seq, dim):
    return torch.stack(seq, dim=dim)


def split(input, sizes_or_sections, dim):
    """Pieces of input along dim: of size sizes_or_sections (an int; the
    last may be smaller) or of the listed sizes."""
    return torch.split(input, sizes_or_sections, dim)


def repeat(input, repeats, dim):
    """Each slice along dim repeated `repeats` times (an int, or one count
    per slice), the copies next to each other."""
    return torch.repeat_interleave(input, repeats, dim)


def squeeze(input, dim):
    return torch.squeeze(input, dim)


def unsqueeze(input, dim):
    return torch.unsqueeze(input, dim)


def reshape(input, shape):
    return torch.reshape(input, shape)


def swapaxes(input, axis1, axis2):
    return torch.transpose(input, axis1, axis2)


def gather_row(data, row_index):
    """data's rows at row_index (any integer dtype), in that order."""
    return torch.index_select(data, 0, row_index.long())


def slice_axis(data, axis, begin, end):
    return torch.narrow(data, axis, begin, end - begin)


def take(data, indices, dim):
    """data indexed along dim by indices of any shape: the result's shape is
    data's with dimension dim replaced by indices' shape."""
    picked = torch.index_select(data, dim, indices.reshape(-1))
    return picked.reshape(data.shape[:dim] + indices.shape + data.shape[dim + 1:])


def narrow_row(x, start, stop):
    """Rows start..stop-1 of x (a view)."""
    return x[start:stop]


def scatter_row(data, row_index, value):
    """A copy of data whose rows at row_index are value's (out of place, so
    autograd sees it)."""
    return data.index_copy(0, row_index.long(), value)


def index_add_inplace(data, row_idx, value):
    """data[row_idx[i]] += value[i] in place, repeated indices summing."""
    data.index_add_(0, row_idx, value)


def scatter_row_inplace(data, row_index, value):
    """data[row_index] = value in place (breaks autograd, as DGL says)."""
    data[row_index.long()] = value


def boolean_mask(input, mask):
    """input's rows where mask is true (a non-bool mask is read as bool)."""
    if mask.dtype != torch.bool:
        mask = torch.as_tensor(mask, dtype=torch.bool)
    return input[mask]


def unique(input, return_inverse=False, return_counts=False):
    """The sorted distinct values of input (booleans as int8, as DGL
    does), with the inverse index and the counts when asked for."""
    if input.dtype == torch.bool:
        input = input.to(torch.int8)
    return torch.unique(input, return_inverse=return_inverse, return_counts=return_counts)


def nonzero_1d(input):
    """The positions of input's non-zero elements (a 1-D int64 tensor)."""
    return torch.nonzero(input, as_tuple=False).reshape(-1)


def sort_1d(input):
    """(sorted values, their positions in input), ascending."""
    out = torch.sort(input)
    return out.values, out.indices


def rand_shuffle(arr):
    """A copy of arr with its rows in a random order (torch's generator)."""
    return arr[torch.randperm(len(arr))]


def _offsets(lengths, device):
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.tensor(lengths, dtype=torch.int64, device=device)
    lengths = lengths.to(device=device, dtype=torch.int64)
    return lengths, torch.cumsum(lengths, 0) - lengths


def _padded_positions(lengths, starts, max_len):
    """For each row of a packed tensor, its row in the padded
    [batch * max_len, ...] layout."""
    seg = torch.repeat_interleave(torch.arange(lengths.numel(), device=lengths.device), lengths)
    within = torch.arange(seg.numel(), device=lengths.device) - starts[seg]
    return seg * max_len + within


def pad_packed_tensor(input, lengths, value, l_min=None):
    """Packed rows [sum(lengths), ...] (segment i of lengths[i] rows after
    segment i-1) as a padded [batch, max_len, ...] tensor filled with value
    past each segment's end; max_len is the longest segment, at least
    l_min."""
    lengths, starts = _offsets(lengths, input.device)
    max_len = int(lengths.max()) if lengths.numel() else 0
    if l_min is not None:
        max_len = builtins.max(max_len, l_min)
    out = input.new_full((lengths.numel() * max_len,) + tuple(input.shape[1:]), value)
    out[_padded_positions(lengths, starts, max_len)] = input
    return out.view((lengths.numel(), max_len) + tuple(input.shape[1:]))


def pack_padded_tensor(input, lengths):
    """The inverse of pad_packed_tensor: the first lengths[i] rows of each
    input[i], one after the other."""
    lengths, starts = _offsets(lengths, input.device)
    max_len = input.shape[1]
    flat = input.reshape((-1,) + tuple(input.shape[2:]))
    return flat[_padded_positions(lengths, starts, max_len)]


# ---------------------------------------------------------------------------
# NumPy, DLPack and DGL's NDArray


def zerocopy_to_dlpack(input):
    return _dlpack.to_dlpack(input.contiguous())


def zerocopy_from_dlpack(dlpack_tensor):
    return _dlpack.from_dlpack(dlpack_tensor)


def zerocopy_to_numpy(input):
    """input as a NumPy array (shared memory for a CPU tensor, a copy
    otherwise)."""
    return asnumpy(input)


def zerocopy_from_numpy(np_array):
    return torch.as_tensor(np_array)


def _no_ndarray(what):
    raise DGLError(f"{what}: DGL's NDArray (dgl.ndarray) belongs to DGL's C library, which dgld does not have; "
                   "dgld's functions take and return torch tensors (exchange data with other libraries "
                   "through zerocopy_to_dlpack / zerocopy_from_dlpack or NumPy)")


def zerocopy_to_dgl_ndarray(input):
    _no_ndarray("zerocopy_to_dgl_ndarray")


def zerocopy_to_dgl_ndarray_for_write(input):
    _no_ndarray("zerocopy_to_dgl_ndarray_for_write")


def zerocopy_from_dgl_ndarray(input):
    _no_ndarray("zerocopy_from_dgl_ndarray")


# ---------------------------------------------------------------------------
# Autograd


def sync():
    """Nothing to wait for: PyTorch runs operators synchronously (on the
    CPU; CUDA streams are synchronised by the operators that need it)."""


def attach_grad(x):
    """x, recording its gradient (an existing gradient is zeroed)."""
    if x.grad is None:
        return x.requires_grad_()
    x.grad.zero_()
    return x


def backward(x, head_gradient=None):
    """x.backward(head_gradient); a one-element 1-D head gradient is
    passed as a 0-d one, as DGL does for a scalar x."""
    if head_gradient is not None and head_gradient.dim() == 1 and head_gradient.shape[0] == 1:
        head_gradient = head_gradient.reshape(())
    x.backward(head_gradient)


def grad(x):
    return x.grad


def is_no_grad(x):
    """True when x has no gradient or an all-zero one."""
    return x.grad is None or bool((x.grad == 0).all())


def is_recording():
    return torch.is_grad_enabled()


class record_grad:
    """DGL's context for recording gradients: PyTorch always records them
    (outside no_grad), so it does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, exc_traceback):
        return False


no_grad = torch.no_grad


# The interface's names this module defines (the list is written once, in
# dgld/backend/_interface.py).
__all__ = [name for name in INTERFACE if name in globals()]
