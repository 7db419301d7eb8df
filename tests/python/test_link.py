"""Link prediction in Python: dgld.dataloading's DistEdgeDataLoader with
as_edge_prediction_sampler and a Uniform negative sampler, as DGL's
unsupervised GraphSAGE example uses them, over a partition with a link
split: every training edge comes once per epoch, no batch's blocks hold its
own edges, negatives miss held-out edges when asked, and a dot-product SAGE
model learns."""

from conftest import run_result

SCRIPT = r"""
import json, torch
import dgld, dgld.distributed as dist
import dgld.nn as dglnn
from dgld import _test_hooks
from dgld.dataloading import NeighborSampler, as_edge_prediction_sampler, DistEdgeDataLoader, negative_sampler

dist.initialize({ip!r})
g = dist.DistGraph('g', part_config={part!r})
# One trainer for a 2-partition job: every training edge (edge_split wants
# a multiple of the partitions; the C++ tests split across trainers).
mask = g.edata['train_mask'][torch.arange(g.num_edges())]
eids = torch.nonzero(mask).squeeze(1)
sampler = as_edge_prediction_sampler(NeighborSampler([5, 5]), exclude='reverse_id',
                                     negative_sampler=negative_sampler.Uniform(2))
loader = DistEdgeDataLoader(g, eids, sampler, batch_size=256, shuffle=True, exclude_positives=True)
out = {{"num_eids": int(eids.numel()), "batches": len(loader)}}
held = set()
link = _test_hooks.link_split_pairs({part!r})
for u, v in link:
    held.add((min(u, v), max(u, v)))

class Model(torch.nn.Module):
    def __init__(self, d_in, d):
        super().__init__()
        self.l1 = dglnn.SAGEConv(d_in, d, 'mean')
        self.l2 = dglnn.SAGEConv(d, d, 'mean')
    def forward(self, blocks, x):
        return self.l2(blocks[1], torch.relu(self.l1(blocks[0], x)))

torch.manual_seed(0)
model = Model(g.ndata['features'].shape[1], 32)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
losses, seen, in_blocks, neg_hits, neg_count = [], [], 0, 0, 0
for epoch in range(5):
    total = 0.0
    for input_nodes, pair, neg, blocks in loader:
        seeds = pair.ndata['_ID']
        u, v = pair.edges()
        nu, nv = neg.edges()
        assert nu.numel() == 2 * u.numel() and torch.equal(blocks[-1].dstdata['_ID'], seeds)
        pu, pv = seeds[u].tolist(), seeds[v].tolist()
        if epoch == 0:
            seen += list(zip(pu, pv))
            pos = set((min(a, b), max(a, b)) for a, b in zip(pu, pv))
            for blk in blocks:
                s, d = blk.edges()
                src, dst = blk.srcdata['_ID'][s].tolist(), blk.dstdata['_ID'][d].tolist()
                in_blocks += sum((min(a, b), max(a, b)) in pos for a, b in zip(src, dst))
            for a, b in zip(seeds[nu].tolist(), seeds[nv].tolist()):
                neg_count += 1
                neg_hits += (min(a, b), max(a, b)) in held or (min(a, b), max(a, b)) in pos
        h = model(blocks, blocks[0].srcdata['features'])
        ps = (h[u] * h[v]).sum(1)
        ns = (h[nu] * h[nv]).sum(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            torch.cat([ps, ns]), torch.cat([torch.ones_like(ps), torch.zeros_like(ns)]))
        opt.zero_grad(); loss.backward(); opt.step()
        total += float(loss)
    losses.append(total / len(loader))
out.update(seen=len(seen), unique=len(set(seen)), in_blocks=in_blocks, neg_hits=neg_hits, neg_count=neg_count,
           losses=losses, held=len(held))
print("RESULT " + json.dumps(out))
"""


def test_edge_loader_batches_and_a_model_learns():
    res = run_result(SCRIPT, part_flags=("--link-split", "0.8,0.1,0.1", "--link-negatives", "5", "--seed", "2"),
                     prefix="dgld-pytest-link-")
    assert res["num_eids"] > 0 and res["batches"] == (res["num_eids"] + 255) // 256
    assert res["seen"] == res["num_eids"] and res["unique"] == res["num_eids"]  # every edge once per epoch
    assert res["in_blocks"] == 0  # no batch's edge (or its reverse) inside its blocks
    assert res["held"] > 0 and res["neg_count"] == 2 * res["seen"] and res["neg_hits"] == 0
    assert res["losses"][-1] < res["losses"][0]
