"""Every name of DGL's backend interface (dgl/backend/backend.py), in its
order: the contract dgld.backend fills (pytorch/ implements what DGL's
PyTorch backend has; the rest raise as DGL's do), and the list each
implementing module's __all__ is drawn from."""

INTERFACE = (
    "data_type_dict", "cpu", "tensor", "as_scalar", "get_preferred_sparse_format", "sparse_matrix",
    "sparse_matrix_indices", "is_tensor", "shape", "dtype", "ndim", "context", "device_type", "device_id",
    "to_backend_ctx", "astype", "asnumpy", "copy_to", "is_pinned", "sum", "floor_div", "reduce_sum", "cumsum",
    "mean", "reduce_mean", "max", "reduce_max", "min", "reduce_min", "argsort", "topk", "argtopk", "exp",
    "inverse", "sqrt", "softmax", "cat", "stack", "split", "repeat", "gather_row", "slice_axis", "take",
    "narrow_row", "scatter_row", "index_add_inplace", "scatter_row_inplace", "squeeze", "unsqueeze", "reshape",
    "swapaxes", "empty", "zeros", "zeros_like", "ones", "uniform", "randint", "pad_packed_tensor",
    "pack_padded_tensor", "boolean_mask", "equal", "allclose", "logical_not", "logical_and", "clone", "clamp",
    "replace_inf_with_zero", "count_nonzero", "unique", "full_1d", "nonzero_1d", "sort_1d", "arange",
    "rand_shuffle", "zerocopy_to_dlpack", "zerocopy_from_dlpack", "zerocopy_to_numpy", "zerocopy_from_numpy",
    "zerocopy_to_dgl_ndarray", "zerocopy_to_dgl_ndarray_for_write", "zerocopy_from_dgl_ndarray",
    "binary_reduce", "copy_reduce", "gspmm", "gspmm_hetero", "gsddmm", "gsddmm_hetero", "edge_softmax",
    "edge_softmax_hetero", "segment_reduce", "scatter_add", "csrmm", "csrsum", "csrmask", "gather_mm",
    "segment_mm", "sync", "attach_grad", "backward", "grad", "is_no_grad", "is_recording", "record_grad",
    "no_grad", "NodeEmbedding",
)
