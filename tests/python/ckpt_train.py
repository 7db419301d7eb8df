"""A DGL-style training script with dgld.distributed.Checkpointer (model,
optimiser, a DistEmbedding and its SparseAdam, the loader's position, a
checkpoint every 3 steps), run under dgl-launch by tests/python/test_checkpoint.py
(loopback) and tests/cluster/test_cluster_replica.py (a machine lost on the
cluster emulator). Rank 0 saves the final embedding and weights to --out.
"""
import argparse, os, signal, sys
import torch
import torch.nn.functional as F
import dgld as dgl
import dgld.distributed as dist
from dgld.nn import SAGEConv

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt"); ap.add_argument("--out"); ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--crash-at", type=int, default=-1, help="rank 1 kills itself before this global step (first run)")
ap.add_argument("--classes", type=int, default=4)
args = ap.parse_args()
args.ckpt = args.ckpt.format(machine=os.environ.get("DGLD_MACHINE_ID", "0"))  # "ckpt/m{machine}": one per machine

dist.initialize("ip_config.txt")
# A restarted script draws other seeds (as one seeding from the clock
# would): the loader's seed and the random state must come from the checkpoint.
torch.manual_seed(7 + 1000 * int(os.environ.get("DGLD_RESTART", "0")))
torch.distributed.init_process_group(backend="gloo")
g = dist.DistGraph("g")
train = dist.node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
emb = dist.DistEmbedding(g.num_nodes(), 8, name="node_emb",
                         init_func=lambda shape, dtype: torch.empty(shape, dtype=dtype).uniform_(-1, 1))
loader = dist.DistNodeDataLoader(g, train, dist.NeighborSampler([4, 4]), batch_size=32, shuffle=True)


class SAGE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([SAGEConv(8, 16, "mean"), SAGEConv(16, args.classes, "mean")])

    def forward(self, blocks, x):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            x = layer(block, x)
            if i == 0:
                x = F.dropout(F.relu(x), 0.3, self.training)
        return x


model = torch.nn.parallel.DistributedDataParallel(SAGE())
opt = torch.optim.Adam(model.parameters(), lr=0.01)
emb_opt = dist.optim.SparseAdam([emb], lr=0.05)
ckpt = dist.Checkpointer(args.ckpt, model=model, optimizer=opt, embeddings=[emb], sparse_optimizers=[emb_opt],
                         loaders=[loader], every_steps=3)
start = ckpt.restore()
print(f"rank {g.rank()} starts at epoch {start[0]} step {start[1]} of {len(loader)} steps", flush=True)
first_run = os.environ.get("DGLD_RESTART", "0") == "0"
for epoch in range(start[0], args.epochs):
    for step, (input_nodes, seeds, blocks) in ckpt.batches(loader, epoch):
        if first_run and g.rank() == 1 and epoch * len(loader) + step == args.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)
        logits = model(blocks, emb(input_nodes))
        loss = F.cross_entropy(logits, g.ndata["labels"][seeds])
        emb_opt.zero_grad()
        opt.zero_grad()
        loss.backward()
        emb_opt.step()
        opt.step()
g.barrier()
if g.rank() == 0:
    torch.save({"emb": emb.weight[torch.arange(g.num_nodes())], "model": model.state_dict()}, args.out)
dist.exit_client()
