"""Frames: the named columns of a graph's nodes or edges (DGL's ndata,
edata, srcdata, dstdata), and the views graphs hand out over them.

A Frame is a dict of tensors whose first dimension is the number of rows
(nodes or edges). Writes are checked: a column must be a tensor with one
row per node (or edge), and the error names the frame and the key. Reading
a missing key raises KeyError naming the key and the frame's columns.
"""

from collections.abc import MutableMapping

import torch

from ._errors import DGLError


class Frame(MutableMapping):
    """Columns of `num_rows` rows each. `what` names the frame in errors
    ("node data", "source node data", "edge data")."""

    def __init__(self, num_rows, what, columns=None):
        self._num_rows = int(num_rows)
        self._what = what
        self._columns = {}
        if columns:
            for k, v in columns.items():
                self[k] = v

    @property
    def num_rows(self):
        return self._num_rows

    def _check(self, key, value):
        if not isinstance(key, str):
            raise DGLError(f"{self._what}: keys are field names (str), got {type(key).__name__}")
        if not isinstance(value, torch.Tensor):
            raise DGLError(f"{self._what}[{key!r}]: expected a tensor, got {type(value).__name__}")
        if value.dim() == 0 or value.shape[0] != self._num_rows:
            got = value.shape[0] if value.dim() else "a scalar"
            raise DGLError(f"{self._what}[{key!r}]: expected data to have {self._num_rows} rows, got {got}.")

    def __getitem__(self, key):
        try:
            return self._columns[key]
        except KeyError:
            have = ", ".join(repr(k) for k in self._columns) or "none"
            raise KeyError(f"{self._what} has no field {key!r} (it has: {have})") from None

    def __setitem__(self, key, value):
        self._check(key, value)
        self._columns[key] = value

    def __delitem__(self, key):
        if key not in self._columns:
            raise KeyError(f"{self._what} has no field {key!r}")
        del self._columns[key]

    def __iter__(self):
        return iter(self._columns)

    def __len__(self):
        return len(self._columns)

    def __contains__(self, key):
        return key in self._columns

    def __repr__(self):
        cols = ", ".join(f"{k!r}: {tuple(v.shape)}" for k, v in self._columns.items())
        return f"<{self._what} of {self._num_rows} rows: {{{cols}}}>"

    def grow(self, n, data=None):
        """n more rows: every column's new rows are zeros, or data[key]'s
        rows (DGL's add_nodes / add_edges with data); a key of data the
        frame lacks becomes a column, zeros in the old rows."""
        data = dict(data or {})
        for k, v in data.items():
            if not isinstance(v, torch.Tensor) or v.dim() == 0 or v.shape[0] != n:
                raise DGLError(f"{self._what}[{k!r}]: the data of {n} new rows must be a tensor of {n} rows")
        old = self._num_rows
        for k in list(self._columns) + [k for k in data if k not in self._columns]:
            col = self._columns.get(k)
            like = col if col is not None else data[k]
            new = data[k].to(like.dtype) if k in data else torch.zeros((n,) + tuple(like.shape[1:]), dtype=like.dtype)
            head = col if col is not None else torch.zeros((old,) + tuple(like.shape[1:]), dtype=like.dtype)
            self._columns[k] = torch.cat([head, new])
        self._num_rows = old + n

    def set_rows(self, key, rows, value):
        """Writes value into rows `rows` of column key, creating the column
        (zeros elsewhere) when it does not exist (DGL's partial update)."""
        if key in self._columns:
            col = self._columns[key]
            if col.shape[1:] != value.shape[1:] or col.dtype != value.dtype:
                col = torch.zeros((self._num_rows,) + tuple(value.shape[1:]), dtype=value.dtype)
            else:
                col = col.clone()
        else:
            col = torch.zeros((self._num_rows,) + tuple(value.shape[1:]), dtype=value.dtype)
        col[rows] = value
        self._columns[key] = col

    def snapshot(self):
        return dict(self._columns)

    def copy(self):
        """A frame of its own over the same column tensors."""
        f = Frame(self._num_rows, self._what)
        f._columns = dict(self._columns)
        return f

    def restore(self, columns):
        self._columns = dict(columns)

    def subframe(self, rows, what=None):
        """The rows `rows` of every column, as a new frame."""
        n = int(rows.numel())
        return Frame(n, what or self._what, {k: v[rows] for k, v in self._columns.items()})


class RowView(MutableMapping):
    """The rows `rows` of a frame (g.nodes[ids].data, g.edges[ids].data):
    reads gather them, writes update them in place of the frame's column."""

    def __init__(self, frame, rows):
        self._frame = frame
        self._rows = rows

    def __getitem__(self, key):
        return self._frame[key][self._rows]

    def __setitem__(self, key, value):
        value = torch.as_tensor(value)
        if value.dim() == 0 or value.shape[0] != self._rows.numel():
            raise DGLError(f"{self._frame._what}[{key!r}]: expected data to have {self._rows.numel()} rows, got "
                           f"{value.shape[0] if value.dim() else 'a scalar'}.")
        self._frame.set_rows(key, self._rows, value)

    def __delitem__(self, key):
        raise DGLError("delete a column from the whole frame (g.ndata / g.edata), not from some of its rows")

    def __iter__(self):
        return iter(self._frame)

    def __len__(self):
        return len(self._frame)


class SpaceView:
    """What g.nodes / g.edges / g.srcnodes / g.dstnodes are: called, the ids
    (g.nodes() -> node ids, g.edges() -> (src, dst)); indexed, a view whose
    .data is the frame (g.nodes[ntype].data) or some of its rows
    (g.nodes[ids].data)."""

    def __init__(self, graph, frame_of, ids_of, types, call):
        self._g = graph
        self._frame_of = frame_of
        self._ids_of = ids_of
        self._types = types
        self._call = call

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getitem__(self, key):
        view = _DataHolder()
        if isinstance(key, (str, tuple)) or key is None:
            if isinstance(key, str) and key not in self._types():
                raise DGLError(f"{key!r} is not a type of this graph (it has: {', '.join(self._types())})")
            view.data = self._frame_of()
        elif isinstance(key, slice) and key == slice(None):
            view.data = self._frame_of()
        else:
            view.data = RowView(self._frame_of(), self._ids_of(key))
        return view

    def __len__(self):
        return self._frame_of().num_rows


class _DataHolder:
    data = None
