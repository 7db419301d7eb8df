"""dgld.dataloading.negative_sampler (DGL's): Uniform(k), and
LocalUniform(k) (negatives among the nodes of the machine that makes the
batch, as GraphStorm's localuniform). The edge loader draws the negatives in
C++; these say which kind and how many."""

from .._errors import InvalidArgument

__all__ = ["Uniform", "LocalUniform"]


class Uniform:
    """k negatives per edge, destinations drawn uniformly over the graph's nodes."""

    kind = "uniform"

    def __init__(self, k):
        self.k = int(k)
        if self.k < 1:
            raise InvalidArgument(f"a negative sampler draws k >= 1 negatives per edge, got {k}")


class LocalUniform(Uniform):
    """k negatives per edge among the nodes of the machine that makes the batch."""

    kind = "local-uniform"
