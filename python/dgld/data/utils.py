"""dgld.data.utils: DGL's graph-file functions, refused with a message (dgld
keeps graphs in its partition files; docs/python.md), and the helpers of
DGL's dataset classes (the download folder, mask tensors)."""

import os

import numpy as np
import torch

from .._errors import DGLError

__all__ = ["load_graphs", "save_graphs", "get_download_dir", "generate_mask_tensor"]


def get_download_dir():
    """The folder where DGL keeps its downloads and where dgld's dataset
    classes look for them: DGL_DOWNLOAD_DIR, else ~/.dgl. Unlike DGL it is
    not created (dgld writes nothing there)."""
    return os.environ.get("DGL_DOWNLOAD_DIR", os.path.join(os.path.expanduser("~"), ".dgl"))


def _get_dgl_url(file_url):
    """The URL DGL downloads file_url from: DGL_REPO (default
    https://data.dgl.ai/) followed by file_url. dgld only uses it to name
    DGL's folders (raw_path) and in its messages."""
    repo = os.environ.get("DGL_REPO", "https://data.dgl.ai/")
    if not repo.endswith("/"):
        repo += "/"
    return repo + file_url


def generate_mask_tensor(mask):
    """A NumPy mask as a bool tensor (DGL's PyTorch form of a mask)."""
    if not isinstance(mask, np.ndarray):
        raise DGLError("generate_mask_tensor takes a numpy ndarray")
    return torch.as_tensor(mask, dtype=torch.bool)


def _refuse(what):
    raise DGLError(f"{what}: DGL's binary graph files are not supported by dgld; partition the graph with "
                   "dgl-partition (or dgld.distributed.partition_graph) and open it with DistGraph")


def load_graphs(filename, idx_list=None):
    _refuse(f"load_graphs({filename!r})")


def save_graphs(filename, g_list, labels=None, formats=None):
    _refuse(f"save_graphs({filename!r})")
