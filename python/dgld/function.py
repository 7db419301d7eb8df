"""dgld.function: DGL's built-in message and reduce functions (dgl.function).

A built-in names where its operands come from and where its result goes;
the graph's update_all / apply_edges / send_and_recv / pull run it as one of
dgld's fused kernels (torch.ops.dgld.gspmm for a message followed by a
reducer, torch.ops.dgld.gsddmm for a message alone), so a built-in message
with a built-in reducer never makes an edge-sized tensor.

Message functions (lhs and rhs are field names, out the message's name):
    copy_u(u, out), copy_e(e, out), copy_v(v, out)   and DGL 0.4's
    copy_src(src, out), copy_edge(edge, out)
    {u,v,e}_{add,sub,mul,div,dot}_{u,v,e}(lhs, rhs, out) for two different
    targets, e.g. u_mul_e('h', 'w', 'm'), u_dot_v('h', 'h', 'score'), and
    DGL 0.4's src_mul_edge etc.
Reduce functions (msg the message's name, out the result's name):
    sum, mean, max, min (DGL 0.4's names too).

Feature shapes broadcast as in DGL: the shorter shape is padded with leading
ones, then each dimension must be equal or 1; dot sums over the last
dimension and keeps it as size 1.
"""

__all__ = ["BuiltinFunction", "MessageFunction", "ReduceFunction", "copy_u", "copy_e", "copy_v", "copy_src",
           "copy_edge", "sum", "mean", "max", "min"]

_TARGET_NAMES = {"u": "source node", "v": "destination node", "e": "edge"}
BINARY_OPS = ("add", "sub", "mul", "div", "dot")
REDUCERS = ("sum", "mean", "max", "min")


class BuiltinFunction:
    """Base of DGL's built-in functions: graph methods recognise these and
    run them as fused kernels instead of calling them."""

    name = ""


class MessageFunction(BuiltinFunction):
    """A built-in message: `op` ('copy_lhs' or a binary op) of the lhs field
    of the lhs target and the rhs field of the rhs target ('u', 'v', 'e')."""

    def __init__(self, name, op, lhs_target, lhs_field, rhs_target=None, rhs_field=None, out=None):
        for what, field in (("lhs", lhs_field), ("rhs", rhs_field), ("out", out)):
            if field is not None and not isinstance(field, str):
                raise TypeError(f"dgld.function.{name}: the {what} field must be a name (str), got "
                                f"{type(field).__name__}")
        if out is None:
            raise TypeError(f"dgld.function.{name}: the output field name is missing")
        self.name = name
        self.op = op
        self.lhs_target, self.lhs_field = lhs_target, lhs_field
        self.rhs_target, self.rhs_field = rhs_target, rhs_field
        self.out_field = out

    @property
    def is_copy(self):
        return self.op == "copy_lhs"

    def operands(self):
        """(target, field) of each operand: one for a copy, two otherwise."""
        if self.is_copy:
            return [(self.lhs_target, self.lhs_field)]
        return [(self.lhs_target, self.lhs_field), (self.rhs_target, self.rhs_field)]

    def __repr__(self):
        fields = ", ".join(repr(f) for _, f in self.operands())
        return f"dgld.function.{self.name}({fields}, {self.out_field!r})"


class ReduceFunction(BuiltinFunction):
    """A built-in reducer over each destination node's incoming messages."""

    def __init__(self, name, msg, out):
        if name not in REDUCERS:
            raise ValueError(f"unknown reducer {name!r}: dgld has {', '.join(REDUCERS)}")
        for what, field in (("message", msg), ("out", out)):
            if not isinstance(field, str):
                raise TypeError(f"dgld.function.{name}: the {what} field must be a name (str), got "
                                f"{type(field).__name__}")
        self.name = name
        self.msg_field = msg
        self.out_field = out

    def __repr__(self):
        return f"dgld.function.{self.name}({self.msg_field!r}, {self.out_field!r})"


def _copy(target, name):
    def make(field, out):
        return MessageFunction(name, "copy_lhs", target, field, out=out)

    make.__name__ = name
    make.__doc__ = f"Message: the {_TARGET_NAMES[target]} field `{target}` copied (DGL's {name})."
    return make


def _binary(lhs, op, rhs, name):
    def make(lhs_field, rhs_field, out):
        return MessageFunction(name, op, lhs, lhs_field, rhs, rhs_field, out)

    make.__name__ = name
    make.__doc__ = (f"Message: {_TARGET_NAMES[lhs]} field `lhs` {op} {_TARGET_NAMES[rhs]} field `rhs` "
                    f"(DGL's {name}).")
    return make


def _reducer(name):
    def make(msg, out):
        return ReduceFunction(name, msg, out)

    make.__name__ = name
    make.__doc__ = f"Reduce: the {name} of each destination node's messages `msg` (0 for a node with none)."
    return make


copy_u = _copy("u", "copy_u")
copy_e = _copy("e", "copy_e")
copy_v = _copy("v", "copy_v")
copy_src = _copy("u", "copy_src")
copy_edge = _copy("e", "copy_edge")

_OLD_TARGET = {"u": "src", "v": "dst", "e": "edge"}
for _op in BINARY_OPS:
    for _lhs in "uve":
        for _rhs in "uve":
            if _lhs == _rhs:
                continue
            _name = f"{_lhs}_{_op}_{_rhs}"
            globals()[_name] = _binary(_lhs, _op, _rhs, _name)
            __all__.append(_name)
            # DGL 0.4's names: src_mul_edge, src_add_dst, ...
            _old = f"{_OLD_TARGET[_lhs]}_{_op}_{_OLD_TARGET[_rhs]}"
            globals()[_old] = _binary(_lhs, _op, _rhs, _old)
            __all__.append(_old)

for _r in REDUCERS:
    globals()[_r] = _reducer(_r)

del _op, _lhs, _rhs, _name, _old, _r
