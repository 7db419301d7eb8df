"""dgld.distributed: DGL's dgl.distributed over dgld's graph-servers, module
for module as DGL lays it out:

    dist_context.py          initialize, exit_client (joining and leaving the job)
    dist_graph.py            DistGraph, node_split, edge_split
    dist_graph_server.py     DistGraphServer (a graph-server in this process, for custom launchers)
    dist_tensor.py           DistTensor
    graph_partition_book.py  GraphPartitionBook and the partition policies
    graph_services.py        sample_neighbors, sample_etype_neighbors, in_subgraph, find_edges
    role.py                  the job's trainers and this process's rank (node_split's defaults)
    partition.py             partition_graph, load_partition, load_partition_book
    dist_dataloader.py       DistDataLoader, DistNodeDataLoader, DistEdgeDataLoader
    nn/pytorch/sparse_emb.py DistEmbedding
    optim/                   SparseAdagrad, SparseAdam (dgld.distributed.optim)
    checkpoint.py            Checkpointer (dgld addition: save, restore, resume mid-epoch)
    rendezvous.py            init_process_group's env:// through dgld's authenticated store (dgld jobs)

Every call that waits (a pull, a barrier, the next batch) runs in C++
without the GIL and has a deadline; an error is a dgld.DGLError carrying the
library's message. Processes started by dgl-launch find everything in their
environment (DGL_IP_CONFIG, DGL_CONF_PATH, DGLD_MACHINE_ID,
DGLD_TRAINER_RANK, ...); a script started by hand passes ip_config to
initialize() and part_config to DistGraph(), and sets DGLD_MACHINE_ID when
one host plays several machines.
"""

from ..dataloading.neighbor_sampler import NeighborSampler
from . import optim, role
from .checkpoint import Checkpointer
from .dist_context import exit_client, initialize, is_initialized
from .dist_dataloader import DistDataLoader, DistEdgeDataLoader, DistNodeDataLoader
from .dist_graph import DistGraph, edge_split, node_split
from .dist_graph_server import DistGraphServer
from .dist_tensor import DistTensor
from .graph_partition_book import EdgePartitionPolicy, GraphPartitionBook, NodePartitionPolicy, PartitionPolicy
from .graph_services import find_edges, in_subgraph, sample_etype_neighbors, sample_neighbors
from .nn.pytorch import DistEmbedding
from .optim import SparseAdagrad, SparseAdam
from .partition import load_partition, load_partition_book, load_partition_feats, partition_graph
from .rendezvous import install as _install_rendezvous

_install_rendezvous()

__all__ = [
    "initialize", "exit_client", "is_initialized", "DistGraph", "DistGraphServer", "DistTensor", "GraphPartitionBook",
    "PartitionPolicy", "NodePartitionPolicy", "EdgePartitionPolicy", "node_split", "edge_split", "sample_neighbors",
    "sample_etype_neighbors", "in_subgraph", "find_edges", "role",
    "DistEmbedding", "SparseAdagrad", "SparseAdam", "NeighborSampler", "DistNodeDataLoader", "DistEdgeDataLoader",
    "DistDataLoader", "optim", "Checkpointer", "partition_graph", "load_partition", "load_partition_book", "load_partition_feats",
]
