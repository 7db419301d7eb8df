"""Process roles (DGL's dgl.distributed.role): how many trainers the job
has and which one this process is, as node_split / edge_split and
DistGraph.rank() ask.

A process connected to a job answers from its connection (the launcher's
and the servers' view). A process that joined no job answers from DGL's
role tables, which a caller may fill to split for trainers it simulates
(DGL's own tests do):

    CUR_ROLE = "default"                        # this process is a trainer
    GLOBAL_RANK = {0: 0, 1: 1}                  # client id -> global rank
    PER_ROLE_RANK = {"default": {0: 0, 1: 1}}   # role -> {client id -> rank}
"""

from .._errors import DGLError
from .dist_context import _state, trainer_rank

__all__ = ["get_role", "get_global_rank", "get_trainer_rank", "get_num_trainers", "CUR_ROLE", "GLOBAL_RANK",
           "PER_ROLE_RANK"]

CUR_ROLE = "default"
GLOBAL_RANK = {}
PER_ROLE_RANK = {}


def _connected():
    return _state["client"] is not None


def get_role():
    """'default' for a trainer (DGL's name), 'sampler' for a trainer's
    sampler process."""
    if _connected():
        return "sampler" if _state["role"] == "sampler" else "default"
    return CUR_ROLE


def get_num_trainers():
    """The job's number of trainers; with no job, the size of
    PER_ROLE_RANK['default']."""
    if _connected():
        return _state["client"].num_trainers
    trainers = PER_ROLE_RANK.get("default")
    if not trainers:
        raise DGLError("the number of trainers is unknown: this process joined no job (call "
                       "dgld.distributed.initialize and create a DistGraph), and dgld.distributed.role."
                       "PER_ROLE_RANK['default'] is empty")
    return len(trainers)


def get_trainer_rank():
    """This trainer's rank (in a sampler process, its trainer's)."""
    if _connected():
        return trainer_rank()
    raise DGLError("this process joined no job, so it has no trainer rank: pass rank= (node_split, edge_split) "
                   "or call dgld.distributed.initialize and create a DistGraph first")


def get_global_rank():
    """The rank that identifies this process among the job's trainers."""
    return get_trainer_rank()
