"""The dgld package against a live 2-machine job: shapes and dtypes of DGL's
API, DistTensor pulls against the partition files and push round trips,
node_split, sample_neighbors and the data loader against the C++ sampler,
and the errors a script gets."""

import numpy as np
import pytest
import torch

import dgld
import dgld.distributed as dist
from dgld import _C, _test_hooks


def all_rows(job, name):
    """Every node's row of `name` read from the partition files."""
    out = {}
    for p in range(2):
        ids, rows = _test_hooks.partition_node_tensor(job.part_config, p, "_N/" + name)
        for i, r in zip(ids.tolist(), rows):
            out[i] = r
    return torch.stack([out[i] for i in range(len(out))])


def test_graph_shapes_and_data(g, job):
    assert g.num_nodes() == 3000 and g.number_of_nodes() == 3000
    assert g.num_edges() > 0
    assert g.rank() == 0
    assert {"features", "labels", "train_mask", "val_mask", "test_mask"} <= set(g.ndata.keys())
    assert "features" in g.ndata and "nope" not in g.ndata
    feat = g.ndata["features"]
    assert feat.shape == (3000, 8) and feat.dtype == torch.float32 and len(feat) == 3000
    assert g.ndata["labels"].dtype == torch.int64 and g.ndata["labels"].shape == (3000,)
    assert g.ndata["train_mask"].dtype == torch.uint8
    pb = g.get_partition_book()
    assert pb.num_partitions() == 2 and pb.partid == 0
    owned = pb.partid2nids(0)
    assert torch.equal(pb.nid2partid(owned), torch.zeros(len(owned), dtype=torch.int64))
    assert torch.equal(pb.nid2partid(pb.partid2nids(1)), torch.ones(3000 - len(owned), dtype=torch.int64))
    deg = g.in_degrees()
    assert deg.shape == (3000,) and int(deg.sum()) == g.num_edges()
    assert g.in_degrees(5) == int(deg[5])
    with pytest.raises(KeyError, match="has no node data 'nope'"):
        g.ndata["nope"]


def test_pulls_match_the_partition_files(g, job):
    want = all_rows(job, "features")
    feat = g.ndata["features"]
    assert torch.equal(feat[torch.arange(3000)], want)
    ids = torch.tensor([2999, 0, 17, 17, 1500])  # repeated, both machines
    assert torch.equal(feat[ids], want[ids])
    assert torch.equal(feat[np.array([3, 4])], want[[3, 4]])
    assert torch.equal(feat[10:20], want[10:20])
    assert torch.equal(feat[7], want[7])
    labels = all_rows(job, "labels")
    assert torch.equal(g.ndata["labels"][0:3000], labels)


def test_dist_tensor_push_pull_round_trip(g):
    t = dist.DistTensor((g.num_nodes(), 3), torch.float32, "pytest.rt", init_func=lambda shape, dt: torch.ones(shape, dtype=dt))
    assert t.shape == (3000, 3) and t.dtype == torch.float32 and t.name == "pytest.rt"
    assert torch.equal(t[[0, 2999]], torch.ones(2, 3))  # both machines initialised
    ids = torch.tensor([1, 2998, 50])
    t[ids] = torch.arange(9, dtype=torch.float32).view(3, 3)
    assert torch.equal(t[ids], torch.arange(9, dtype=torch.float32).view(3, 3))
    t[torch.tensor([4])] = torch.tensor([7.0, 8.0, 9.0])  # a single row broadcasts
    assert torch.equal(t[4], torch.tensor([7.0, 8.0, 9.0]))
    same = dist.DistTensor((g.num_nodes(), 3), torch.float32, "pytest.rt", persistent=True)
    assert torch.equal(same[ids], t[ids])  # the same name attaches
    i64 = dist.DistTensor((g.num_nodes(),), torch.int64, "pytest.i64")
    i64[torch.tensor([3, 2000])] = torch.tensor([-5, 1 << 40])
    assert i64[torch.tensor([3, 2000])].tolist() == [-5, 1 << 40]
    with pytest.raises(dgld.DGLError, match="rows"):
        dist.DistTensor((123, 2), torch.float32, "pytest.bad")


def split(g, mask, rank, num_trainers=2, **kw):
    return dist.node_split(mask, g.get_partition_book(), rank=rank, num_trainers=num_trainers, **kw)


def test_node_split_follows_dgls_rules(g):
    mask = g.ndata["train_mask"][0:3000].bool()
    true_ids = torch.nonzero(mask).reshape(-1)
    # Two trainers, one per machine: DGL's force_even cuts the sorted true
    # ids in two, the first piece one longer when the count is odd.
    first = split(g, g.ndata["train_mask"], 0)
    second = split(g, mask, 1)  # a tensor mask works the same
    half = (len(true_ids) + 1) // 2
    assert torch.equal(first, true_ids[:half]) and torch.equal(second, true_ids[half:])
    # Four trainers, two per machine: a machine's piece split between them, disjoint, complete.
    four = [split(g, mask, r, 4) for r in range(4)]
    assert torch.equal(torch.sort(torch.cat(four)).values, true_ids)
    assert sum(len(p) for p in four) == len(true_ids)
    # Without force_even each machine's trainers take the true ids it owns.
    owned = split(g, mask, 0, force_even=False)
    assert torch.equal(owned, true_ids[true_ids < g.get_partition_book().partid2nids(0)[-1] + 1])
    with pytest.raises(ValueError, match="one value per id"):
        dist.node_split(torch.ones(5, dtype=torch.bool), g.get_partition_book())
    with pytest.raises(ValueError, match="not a positive multiple"):
        dist.node_split(mask, g.get_partition_book())  # this test process is 1 trainer for 2 machines


def test_sample_neighbors_respects_the_fanout_and_returns_real_edges(g):
    seeds = torch.tensor([0, 1, 2, 1600, 2999])
    sg = dist.sample_neighbors(g, seeds, 3)
    src, dst = sg.edges()
    deg = g.in_degrees(seeds)
    for s, d in zip(seeds.tolist(), deg.tolist()):
        assert int((dst == s).sum()) == min(d, 3)
    esrc, edst = g.find_edges(sg.edata[dgld.EID])
    assert torch.equal(esrc, src) and torch.equal(edst, dst)
    full = dist.sample_neighbors(g, seeds, -1)
    assert full.num_edges() == int(deg.sum())


def check_block(g, block):
    src, dst = block.edges()
    src_ids, dst_ids = block.srcdata[dgld.NID], block.dstdata[dgld.NID]
    assert torch.equal(src_ids[: block.num_dst_nodes()], dst_ids)
    esrc, edst = g.find_edges(block.edata[dgld.EID])
    assert torch.equal(esrc, src_ids[src]) and torch.equal(edst, dst_ids[dst])


def test_loader_epoch_blocks_and_features(g):
    ids = split(g, g.ndata["train_mask"], 0)
    sampler = dgld.dataloading.NeighborSampler([4, 6])
    loader = dgld.dataloading.DistNodeDataLoader(g, ids, sampler, batch_size=64, shuffle=True, drop_last=False)
    assert len(loader) == (len(ids) + 63) // 64
    feat, labels = g.ndata["features"], g.ndata["labels"]
    for epoch in range(2):
        seen = []
        for input_nodes, seeds, blocks in loader:
            assert len(blocks) == 2
            assert blocks[0].num_dst_nodes() == blocks[1].num_src_nodes()
            assert torch.equal(blocks[0].srcdata[dgld.NID], input_nodes)
            assert torch.equal(blocks[-1].dstdata[dgld.NID], seeds)
            for b in blocks:
                check_block(g, b)
            fetched = blocks[0].srcdata["features"]
            assert torch.equal(feat[input_nodes], fetched)  # the rows fetched with the batch
            assert torch.equal(feat[input_nodes.clone()], fetched)  # a real pull gives the same
            assert torch.equal(labels[seeds.clone()], blocks[-1].dstdata["labels"])
            seen.append(seeds)
        seen = torch.cat(seen)
        assert torch.equal(torch.sort(seen).values, torch.sort(ids).values)  # every seed once


def test_loaders_share_the_feature_cache_and_an_idle_loader_frees_its_buffers(g):
    """A second loader over the same features reads through the first one's
    halo cache (a script makes a new loader for each evaluation); when one
    loader starts an epoch, the others' idle feature buffers are freed."""
    ids = split(g, g.ndata["train_mask"], 0)
    sampler = dgld.dataloading.NeighborSampler([4, 6])
    train = dgld.dataloading.DistNodeDataLoader(g, ids, sampler, batch_size=32, shuffle=True)
    for batch in train:
        pass
    batch = None
    held = train._loader.memory()
    assert held["feature_cache"] > 0 and held["idle_buffers"] > 0
    every = torch.arange(g.num_nodes())
    full = dgld.dataloading.DistNodeDataLoader(g, every, dgld.dataloading.NeighborSampler([-1]), batch_size=500)
    assert full._loader.memory()["feature_cache"] == held["feature_cache"]
    hits_before = train._loader.memory()["feature_cache_hits"]
    for batch in full:
        assert train._loader.memory()["idle_buffers"] == 0  # freed when `full` started its epoch
    batch = None  # `full`'s last batch goes back to its buffers
    assert train._loader.memory()["feature_cache_hits"] > hits_before  # `full`'s hits, in the one cache
    assert full._loader.memory()["feature_cache_hits"] == train._loader.memory()["feature_cache_hits"]
    assert full._loader.memory()["idle_buffers"] > 0
    for batch in train:  # and back: the other way round
        assert full._loader.memory()["idle_buffers"] == 0


def test_loader_blocks_are_the_cpp_samplers(g):
    ids = split(g, g.ndata["train_mask"], 0)
    # The loader draws its seed from torch's generator when it is made.
    torch.manual_seed(123)
    loader = dgld.dataloading.DistNodeDataLoader(g, ids, dgld.dataloading.NeighborSampler([3, 5]), batch_size=50,
                                                 shuffle=False)
    torch.manual_seed(123)
    seed = int(torch.randint(0, 2**62, (1,)).item())
    for b, (input_nodes, seeds, blocks) in enumerate(loader):
        assert torch.equal(seeds, ids[b * 50:(b + 1) * 50])
        want = _C._sample_blocks(g._client, seeds, [3, 5], _C._batch_rng_seed(seed, 0, b))
        for got, ref in zip(blocks, want):
            (gs, gd), (rs, rd) = got.edges(), ref.edges()
            assert torch.equal(gs, rs) and torch.equal(gd, rd) and got.num_dst_nodes() == ref.num_dst_nodes()
            assert torch.equal(got.srcdata[dgld.NID], ref.srcdata[dgld.NID])
            assert torch.equal(got.edata[dgld.EID], ref.edata[dgld.EID])
        if b == 3:
            break


def test_loader_samples_by_edge_weight(g):
    # DGL's prob=: an edge of weight 0 is never sampled; the weights are a
    # DistTensor of the job, found by its own name or by g.edata's key.
    num_edges = g.num_edges()
    w = dist.DistTensor((num_edges,), torch.float32, "pytest.prob", part_policy="edge",
                        init_func=lambda shape, dt: torch.ones(shape, dtype=dt))
    even = torch.arange(0, num_edges, 2)
    w[even] = torch.zeros(len(even))
    ids = split(g, g.ndata["train_mask"], 0)
    loader = dgld.dataloading.DistNodeDataLoader(g, ids, dgld.dataloading.NeighborSampler([4, 4], prob="pytest.prob"),
                                                 batch_size=100)
    sampled = 0
    for _, _, blocks in loader:
        for b in blocks:
            check_block(g, b)
            eids = b.edata[dgld.EID]
            assert torch.all(eids % 2 == 1), "an edge of weight 0 was sampled"
            sampled += len(eids)
    assert sampled > 0
    with pytest.raises(ValueError, match="must be a numeric edge tensor"):
        dgld.dataloading.DistNodeDataLoader(g, ids, dgld.dataloading.NeighborSampler([4], prob="_N/features"),
                                            batch_size=100)
    with pytest.raises(dgld.DGLError, match="sampling prob 'nope'.*does not exist"):
        dgld.dataloading.DistNodeDataLoader(g, ids, dgld.dataloading.NeighborSampler([4], prob="nope"),
                                            batch_size=100)


def test_errors_are_dgld_exceptions_with_the_librarys_message(g):
    feat = g.ndata["features"]
    with pytest.raises(dgld.DGLError, match="id 3000 is not in") as e:
        feat[torch.tensor([1, 3000])]
    assert isinstance(e.value, ValueError)
    with pytest.raises(ValueError, match="integers"):
        feat[torch.tensor([1.5])]
    with pytest.raises(dgld.DGLError, match="does not exist on machine 0"):
        dist.DistTensor(None, None, _from=_C.DistTensor.open(g._client, "_N/no_such_tensor"))
    other = dist.DistGraph("other")  # the job's graph under the caller's name, as DGL's DistGraph
    assert other.num_nodes() == g.num_nodes() and other._client is g._client
    with pytest.raises(ValueError, match="fanouts"):
        dgld.dataloading.NeighborSampler([-3])


def test_dgl_style_unnamed_client_barrier(g):
    """DGL's unsupervised scripts end with g._client.barrier() (no name)."""
    g._client.barrier()
    g._client.barrier(timeout_s=5.0)
    g.barrier()


def test_dgl_data_loads_only_local_copies(tmp_path, monkeypatch):
    import argparse
    from dgld.data import load_data, register_data_args
    from dgld.data.utils import load_graphs
    args = register_data_args(argparse.ArgumentParser()).parse_args(["--dataset", "cora"])
    assert args.dataset == "cora"
    # No copy where DGL keeps its downloads: an error naming where it looked
    # (dgld downloads nothing; tests/python/test_dgl_data.py loads copies).
    monkeypatch.setenv("DGL_DOWNLOAD_DIR", str(tmp_path))
    with pytest.raises(dgld.DGLError, match=f"no local copy of the dataset; looked in {tmp_path}.*dgld downloads "
                                            "nothing"):
        load_data(args)
    with pytest.raises(dgld.DGLError, match="binary graph files are not supported"):
        load_graphs("graph.bin")


def test_a_restarted_attempt_reads_the_launchers_ip_config(monkeypatch, tmp_path):
    """After a spare took a lost machine's place, dgl-launch hands the new
    attempt its own ip_config ($DGL_IP_CONFIG); a script that names its file
    literally gets the launcher's, with a line saying so. Before any restart
    (or without the launcher's) the script's own path stands."""
    from dgld.distributed import dist_context

    mine, launched = str(tmp_path / "ip_config.txt"), str(tmp_path / "dgld-logs" / "j-r1" / "ip_config.txt")
    monkeypatch.setenv("DGL_IP_CONFIG", launched)
    monkeypatch.setenv("DGLD_RESTART", "0")
    assert dist_context._launcher_ip_config(mine) == mine
    assert dist_context._launcher_ip_config(None) == launched
    monkeypatch.setenv("DGLD_RESTART", "1")
    assert dist_context._launcher_ip_config(mine) == launched
    assert dist_context._launcher_ip_config(launched) == launched
    monkeypatch.delenv("DGL_IP_CONFIG")
    assert dist_context._launcher_ip_config(mine) == mine
