"""Scripts written the way DGL's distributed examples are written, run under
dgl-launch (2 machines x 1 trainer): the guide's NeighborSampler class with
sample_neighbors + to_block + DistDataLoader(collate_fn) and models on DGL's
graph API (built-ins, UDFs, dgld.nn), and unsupervised link prediction
scoring pair graphs with apply_edges(fn.u_dot_v), with both DGL 0.6-0.7's
collate sampler (compact_graphs, remove_edges) and DGL 1.x's
DistEdgeDataLoader. examples/python/guide_train.py and guide_link.py."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import BUILD, REPO, binary, free_port_block, generate_parts

GRAPH = "sbm:nodes=3000,avg_degree=10,classes=4,feat_dim=16,seed=5"


@pytest.fixture(scope="module")
def parts():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-style-") as d:
        d = Path(d)
        generate_parts(d / "parts", GRAPH)
        yield d


@pytest.fixture(scope="module")
def typed_parts():
    """A typed graph (papers, authors, venues, topics; reverse relations) in 2 partitions."""
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-style-typed-") as d:
        d = Path(d)
        generate_parts(d / "parts", "hsbm:papers=3000,authors=1500,venues=24,topics=60,feat_dim=16,seed=4",
                       flags=["--add-reverse"])
        yield d


def launch(d, script, args, num_samplers=0, timeout=240):
    base = free_port_block(910)
    (d / "ip_config.txt").write_text(f"127.0.0.1 {base}\n127.0.0.1 {base + 10}\n")
    metrics = d / "metrics.json"
    if metrics.exists():
        metrics.unlink()
    # DGL's R-GCN scripts spell their flags with dashes (--graph-name, --conf-path).
    names = ("--graph-name", "--ip-config", "--conf-path") if script == "rgcn_dist.py" else \
        ("--graph_name", "--ip_config", "--part_config")
    cmd = [binary("launcher/launch/dgl-launch"), "--local", "--no-copy", "--workspace", str(d), "--ip-config",
           "ip_config.txt", "--part-config", "parts/g.json", "--num-trainers", "1", "--num-samplers",
           str(num_samplers), "--extra-envs", f"PYTHONPATH={BUILD / 'python'}", "--", sys.executable,
           str(REPO / "examples/python" / script), names[0], "g", names[1], "ip_config.txt",
           names[2], "parts/g.json", "--metrics_out", "metrics.json", *args]
    r = subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-5000:]
    return json.loads(metrics.read_text()), r.stdout


@pytest.mark.parametrize("model", ["builtin", "udf", "dglnn"])
def test_guide_style_node_classification(parts, model):
    m, out = launch(parts, "guide_train.py", ["--model", model, "--n_classes", "4", "--num_epochs", "15",
                                              "--batch_size", "50", "--lr", "0.01", "--fan_out", "5,10"])
    losses = [e["loss"] for e in m["epochs"]]
    assert losses[-1] < losses[0], losses
    assert m["test_acc"] > 0.5, m  # 4 classes: chance is 0.25
    assert "Part 0" in out and "Part 1" in out


def test_builtin_and_udf_models_agree(parts):
    """The same seed gives the same run whether the mean is a fused built-in
    or a UDF over degree buckets (same sampling, same arithmetic up to
    rounding)."""
    args = ["--n_classes", "4", "--num_epochs", "2", "--batch_size", "300", "--fan_out", "5,10", "--seed", "3"]
    a, _ = launch(parts, "guide_train.py", ["--model", "builtin", *args])
    b, _ = launch(parts, "guide_train.py", ["--model", "udf", *args])
    for x, y in zip(a["epochs"], b["epochs"]):
        assert abs(x["loss"] - y["loss"]) < 1e-4 * max(1.0, abs(x["loss"])), (a, b)


@pytest.mark.parametrize("loader", ["collate", "edge"])
def test_unsupervised_link_prediction_scores_pair_graphs(parts, loader):
    m, out = launch(parts, "guide_link.py", ["--loader", loader, "--num_epochs", "3", "--batch_size", "500",
                                             "--fan_out", "5,5", "--remove_edge", "--lr", "0.01"])
    losses = [e["loss"] for e in m["epochs"]]
    assert losses[-1] < losses[0], losses
    assert m["test_acc"] > 0.3, m  # the embeddings carry the classes (chance 0.25)


@pytest.mark.parametrize("mode", [[], ["--sparse-embedding", "--dgl-sparse"]])
def test_rgcn_in_dgl_distributed_style(typed_parts, mode):
    """examples/python/rgcn_dist.py: R-GCN written against the calls DGL's
    distributed R-GCN scripts make (typed DistGraph, get_ntype_id,
    per-type node_split and partid2nids, 'feat' / 'labels', WeightBasis,
    HeteroGraphConv(GraphConv(weight=False)) with mod_kwargs, local_var,
    a 'results' DistTensor sized by the papers, DistEmbedding + SparseAdam)."""
    m, out = launch(typed_parts, "rgcn_dist.py", ["--fanout", "5,5", "--n-epochs", "3", "--use-self-loop", *mode])
    losses = [e["loss"] for e in m["epochs"]]
    assert losses[-1] < losses[0], losses
    assert m["test_acc"] > 0.25, m  # 8 classes: chance is 0.125
    assert "Val Acc" in out
