"""DGL 0.5-2.4's distributed API on dgld: initialize() with every version's
signature, the num_workers / dgl-launch --num-samplers rule,
dgl.distributed.optim, DistDataLoader running a Python collate_fn (a
guide-style sampler class holding the DistGraph) in sampler processes,
DGL's module layout (and dgld's old module names), and dgld's import graph
having no circle."""

import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import BUILD, Job, binary, free_port_block, generate_parts

import dgld
import dgld.distributed as dist
from dgld.distributed import dist_context as _client

MAX_QUEUE = 20 * 1024 * 1024 * 1024  # DGL's MAX_QUEUE_SIZE


@pytest.fixture
def no_launch_env(monkeypatch):
    for name in ("DGL_NUM_SAMPLER", "DGL_NUM_SERVER"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# ---------------------------------------------------------------- initialize's signatures

@pytest.mark.parametrize("args, kwargs, want", [
    # DGL 0.5.0: initialize(ip_config, num_workers=0, max_queue_size, net_type)
    ((), {"num_workers": 2, "max_queue_size": MAX_QUEUE, "net_type": "socket"}, {"num_workers": 2}),
    # DGL 0.5.x-0.9: (ip_config, num_servers=1, num_workers=0, max_queue_size, net_type, num_worker_threads)
    ((), {"num_servers": 1, "num_workers": 0, "max_queue_size": MAX_QUEUE, "net_type": "socket",
          "num_worker_threads": 1}, {"num_servers": 1, "num_workers": 0, "num_worker_threads": 1}),
    ((1, 3, MAX_QUEUE, "tensorpipe", 2), {}, {"num_servers": 1, "num_workers": 3, "num_worker_threads": 2}),
    ((2,), {"num_workers": 4}, {"num_servers": 2, "num_workers": 4}),
    # DGL 1.x: (ip_config, max_queue_size, net_type, num_worker_threads)
    ((MAX_QUEUE, "socket", 2), {}, {"num_servers": 1, "num_workers": 0, "num_worker_threads": 2}),
    ((), {"max_queue_size": MAX_QUEUE, "net_type": "socket", "num_worker_threads": 1}, {"num_workers": 0}),
    # DGL 2.x: (ip_config, max_queue_size, net_type=None, num_worker_threads, use_graphbolt=False)
    ((), {"use_graphbolt": False}, {"num_workers": 0}),
    ((MAX_QUEUE, None, 1, False), {}, {"num_worker_threads": 1}),
    # dgld's own keywords
    ((), {"part_config": "p.json", "connect_timeout_s": 5, "call_timeout_s": 7},
     {"part_config": "p.json", "connect_timeout_s": 5.0, "call_timeout_s": 7.0}),
])
def test_initialize_takes_every_dgl_versions_signature(no_launch_env, args, kwargs, want):
    options = _client.initialize_options(args, kwargs)
    for k, v in want.items():
        assert options[k] == v, (k, options)


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((), {"net_type": "rdma"}, dgld._errors.InvalidArgument, "net_type must be 'socket' or 'tensorpipe'"),
    ((), {"num_workers": -1}, dgld._errors.InvalidArgument, "num_workers must be an integer >= 0"),
    ((), {"num_worker_threads": 0}, dgld._errors.InvalidArgument, "num_worker_threads must be an integer >= 1"),
    ((), {"max_queue_size": "big"}, dgld._errors.InvalidArgument, "max_queue_size must be an integer"),
    ((1, 2, MAX_QUEUE, "socket", 1, 9), {}, TypeError, "at most 6 positional arguments in DGL 0.5-0.9's order"),
    ((2,), {"num_servers": 2}, TypeError, "multiple values for argument 'num_servers'"),
    ((), {"num_trainers": 2}, TypeError, "unexpected keyword argument 'num_trainers'"),
])
def test_initialize_refuses_what_it_cannot_honour(no_launch_env, args, kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        _client.initialize_options(args, kwargs)


def test_num_workers_must_agree_with_dgl_launch(no_launch_env):
    no_launch_env.setenv("DGL_NUM_SAMPLER", "1")
    want = (r"initialize\(num_workers=2\) but dgl-launch --num-samplers 1 \(DGL_NUM_SAMPLER=1\): "
            "they must agree")
    with pytest.raises(ValueError, match=want):
        _client.initialize_options((), {"num_workers": 2})
    # The real call refuses before it touches this process's state.
    with pytest.raises(dgld._errors.InvalidArgument, match=want):
        dist.initialize("no-such-ip-config.txt", num_workers=2)
    assert _client.initialize_options((), {"num_workers": 1})["num_workers"] == 1
    assert _client.initialize_options((), {})["num_workers"] == 1  # DGL 1.x-2.x: the launcher decides
    no_launch_env.setenv("DGL_NUM_SAMPLER", "0")
    with pytest.raises(ValueError, match=r"num_workers=3\) but dgl-launch --num-samplers 0"):
        _client.initialize_options((1, 3), {})


# ---------------------------------------------------------------- dgl.distributed.optim

def test_distributed_optim_sparse_adam_trains_an_embedding_like_adam(g):
    import dgld.distributed.optim as optim
    from dgld.distributed.optim import SparseAdagrad, SparseAdam
    assert dist.optim is optim and SparseAdam is dist.SparseAdam and SparseAdagrad is dist.SparseAdagrad
    assert dgld.distributed.DistNodeDataLoader is dgld.dataloading.DistNodeDataLoader
    assert dgld.distributed.DistEdgeDataLoader is dgld.dataloading.DistEdgeDataLoader
    assert dgld.distributed.DistDataLoader is dgld.dataloading.DistDataLoader
    emb = dist.DistEmbedding(g.num_nodes(), 3, name="compat-emb",
                             init_func=lambda shape, dtype: torch.zeros(shape, dtype=dtype))
    opt = dgld.distributed.optim.SparseAdam([emb], lr=0.05, betas=(0.9, 0.99), eps=1e-8)
    ids = torch.tensor([3, 1600, 2999])  # rows of both machines
    target = torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, -2.0], [0.3, 0.3, 0.3]])
    dense = torch.zeros(3, 3, requires_grad=True)
    ref = torch.optim.Adam([dense], lr=0.05, betas=(0.9, 0.99), eps=1e-8)
    losses = []
    for _ in range(20):
        loss = ((emb(ids) - target) ** 2).sum()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        ref.zero_grad()
        ((dense - target) ** 2).sum().backward()
        ref.step()
    assert losses[-1] < 0.5 * losses[0]
    torch.testing.assert_close(emb.weight[ids], dense.detach(), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- DistDataLoader in the trainer

class _GuideSampler:
    """The guide's collate_fn: a method of a class holding the DistGraph."""

    def __init__(self, g, fail_on=None):
        self.g, self.fail_on = g, fail_on

    def sample_blocks(self, seeds):
        seeds = torch.LongTensor(np.asarray(seeds))
        if self.fail_on in seeds.tolist():
            raise ValueError(f"no batch with node {self.fail_on}")
        frontier = dist.sample_neighbors(self.g, seeds, -1)
        src, dst = frontier.edges()
        return seeds, torch.stack([src, dst]), self.g.ndata["features"][seeds]


def test_dist_data_loader_runs_collate_fn_in_the_trainer_with_num_workers_0(g):
    assert _client.num_sampler_workers() == 0
    ids = np.arange(5, 3000, 11)
    sampler = _GuideSampler(g)
    loader = dist.DistDataLoader(ids, batch_size=40, shuffle=False, collate_fn=sampler.sample_blocks)
    assert len(loader) == (len(ids) + 39) // 40
    for epoch in range(2):
        batches = list(loader)
        assert len(batches) == len(loader)
        for b, (seeds, edges, feats) in enumerate(batches):
            assert seeds.tolist() == ids[b * 40:(b + 1) * 40].tolist()  # in order, as DGL's items
            want = sampler.sample_blocks(seeds.tolist())
            assert torch.equal(want[1], edges) and torch.equal(want[2], feats)
    failing = dist.DistDataLoader(ids, batch_size=40, collate_fn=_GuideSampler(g, fail_on=int(ids[85])).sample_blocks)
    with pytest.raises(ValueError, match=f"no batch with node {ids[85]}"):
        list(failing)
    dropping = dist.DistDataLoader(torch.arange(10), batch_size=4, drop_last=True, shuffle=True)
    got = list(dropping)
    assert len(dropping) == 2 and len(got) == 2 and all(len(b) == 4 and isinstance(b[0], int) for b in got)


# ---------------------------------------------------------------- DistDataLoader in sampler processes

LOADER_SCRIPT = r'''
"""A guide-style trainer: its NeighborSampler's sample_blocks is
DistDataLoader's collate_fn, run in initialize(num_workers=2)'s processes."""
import json, os, signal, sys, time
import numpy as np
import torch
import dgld as dgl
import dgld.distributed as dist


def canon(batch):
    """A batch as comparable plain values."""
    seeds, edges, feats, pid = batch
    pairs = sorted(map(tuple, edges.t().tolist()))
    return seeds.tolist(), pairs, feats.tolist(), pid


class NeighborSampler:
    def __init__(self, g, fail_on=None, delay=0.0):
        self.g, self.fail_on, self.delay = g, fail_on, delay
        self.feat = g.ndata["features"]

    def sample_blocks(self, seeds):
        time.sleep(self.delay)
        seeds = torch.LongTensor(np.asarray(seeds))
        if self.fail_on in seeds.tolist():
            raise ValueError(f"no batch with node {self.fail_on}")
        frontier = dist.sample_neighbors(self.g, seeds, -1)
        if hasattr(dgl, "to_block"):  # DGL's guide: the frontier made a block
            block = dgl.to_block(frontier, seeds)
            src_ids = block.srcdata[dgl.NID]
            u, v = block.edges()
            edges = torch.stack([src_ids[u], block.dstdata[dgl.NID][v]])
            return seeds, edges, self.feat[src_ids[:len(seeds)]], os.getpid(), block
        src, dst = frontier.edges()
        return seeds, torch.stack([src, dst]), self.feat[seeds], os.getpid(), None


def out(**kw):
    print("RESULT " + json.dumps(kw), flush=True)


def main(mode, ip, part):
    # DGL 0.5's call, positional num_servers and all.
    dist.initialize(ip, 1, num_workers=2, max_queue_size=20 * 1024 ** 3, net_type="socket", num_worker_threads=1)
    g = dist.DistGraph("g", part_config=part)
    ids = torch.arange(0, 3000, 7)
    if mode == "stop":
        loader = dist.DistDataLoader(ids, batch_size=20, collate_fn=NeighborSampler(g, delay=0.3).sample_blocks)
        it = iter(loader)
        pids = sorted({next(it)[3], next(it)[3]})
        out(pids=pids)
        for _ in it:
            pass
        return
    sampler = NeighborSampler(g)
    loader = dist.DistDataLoader(ids, batch_size=50, shuffle=True, collate_fn=sampler.sample_blocks)
    pids = set()
    for epoch in range(2):
        torch.manual_seed(10 + epoch)
        batches = [b[:4] for b in loader]
        torch.manual_seed(10 + epoch)
        order = ids[torch.randperm(len(ids))]
        seen = [s for b in batches for s in b[0].tolist()]
        local = [canon(sampler.sample_blocks(b[0].tolist())[:4])[:3] for b in batches]
        out(epoch=epoch, batches=len(batches), length=len(loader), in_order=seen == order.tolist(),
            same=[canon(b)[:3] for b in batches] == local, pids=sorted({b[3] for b in batches}))
        pids |= {b[3] for b in batches}
    # A block comes back whole: a DGLBlock when dgld has to_block.
    block = next(iter(loader))[4]
    out(block=isinstance(block, dgl.DGLBlock), block_edges=None if block is None else block.num_edges())
    # An epoch left early, then a full one: nothing of the first leaks in.
    it = iter(loader)
    next(it)
    del it
    out(after_break=len(list(loader)))
    # An exception in collate_fn arrives with the sampler process's traceback.
    failing = dist.DistDataLoader(ids, batch_size=50, collate_fn=NeighborSampler(g, fail_on=int(ids[130])).sample_blocks)
    try:
        list(failing)
        out(error=None)
    except ValueError as e:
        out(error=str(e), error_type=type(e).__name__)
    out(still_works=len(list(loader)) == len(loader))
    # A killed process is an error naming it, within the deadline.
    slow = dist.DistDataLoader(ids, batch_size=20, collate_fn=NeighborSampler(g, delay=0.1).sample_blocks,
                               batch_timeout_s=30)
    it = iter(slow)
    victim = next(it)[3]
    os.kill(victim, signal.SIGKILL)
    t0 = time.time()
    try:
        for _ in it:
            pass
        out(killed=None)
    except dgl.DGLError as e:
        out(killed=str(e), killed_type=type(e).__name__, took=time.time() - t0, victim=victim)
    out(pids=sorted(pids))


if __name__ == "__main__":
    main(*sys.argv[1:])
'''


@pytest.fixture(scope="module")
def loader_job():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-compat-") as d:
        j = Job(d)
        (Path(d) / "guide_loader.py").write_text(LOADER_SCRIPT)
        try:
            yield j
        finally:
            j.stop()


def start_loader_script(job, mode):
    return subprocess.Popen([sys.executable, str(job.root / "guide_loader.py"), mode, job.ip_config, job.part_config],
                            cwd=job.root, env=job.env(0, 0, 1), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def results(output):
    return [json.loads(line[len("RESULT "):]) for line in output.splitlines() if line.startswith("RESULT ")]


def assert_gone(pids, within_s=5.0):
    deadline = time.time() + within_s
    for pid in pids:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            # A zombie is gone too: only its parent (the ended script) could reap it.
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(") ")[1].startswith("Z"):
                        break
            except OSError:
                break
            assert time.time() < deadline, f"sampler process {pid} outlived its trainer"
            time.sleep(0.05)


def test_dist_data_loader_runs_collate_fn_in_two_sampler_processes(loader_job):
    p = start_loader_script(loader_job, "full")
    try:
        output, _ = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        output = p.communicate()[0]
        raise AssertionError("the trainer script did not finish in 90 s:\n" + output)
    assert p.returncode == 0, output
    r = results(output)
    epochs = [x for x in r if "epoch" in x]
    assert len(epochs) == 2, output
    for e in epochs:
        assert e["batches"] == e["length"] == 9  # 429 ids in batches of 50
        assert e["in_order"], "batches came back out of order"
        assert e["same"], "the sampler processes' batches differ from collate_fn run in the trainer"
        assert len(e["pids"]) == 2 and p.pid not in e["pids"]  # both processes, not the trainer
    extra = {k: v for x in r for k, v in x.items()}
    if hasattr(dgld, "to_block"):
        assert extra["block"] is True and extra["block_edges"] > 0
    assert extra["after_break"] == 9
    assert extra["error_type"] == "ValueError", output
    assert "no batch with node 910" in extra["error"] and "sampler process" in extra["error"]
    assert "while making batch 2 of epoch 0" in extra["error"]
    assert "Traceback in the sampler process" in extra["error"] and "in sample_blocks" in extra["error"]
    assert extra["still_works"]
    assert extra["killed_type"] == "Closed", output
    assert f"(pid {extra['victim']}) of trainer 0 was killed by SIGKILL" in extra["killed"]
    assert extra["took"] < 5
    assert_gone(extra["pids"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_sampler_processes_stop_with_their_trainer(loader_job, sig):
    p = start_loader_script(loader_job, "stop")
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("RESULT "):
            break
    r = results("".join(lines))
    assert r, "".join(lines) + p.communicate()[0]
    pids = r[0]["pids"]
    assert len(pids) == 2
    t0 = time.time()
    p.send_signal(sig)
    output = p.communicate(timeout=30)[0]
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in output, output
        assert time.time() - t0 < 5
    assert_gone(pids)


# ---------------------------------------------------------------- under dgl-launch --num-samplers

LAUNCH_SCRIPT = r'''
import os, sys
import numpy as np
import torch
import dgld as dgl
import dgld.distributed as dist


class Sampler:
    def __init__(self, g):
        self.g = g

    def sample_blocks(self, seeds):
        seeds = torch.LongTensor(np.asarray(seeds))
        src, dst = dist.sample_neighbors(self.g, seeds, 3).edges()
        return seeds, int(src.numel()), os.getpid()


if __name__ == "__main__":
    dist.initialize(sys.argv[1], use_graphbolt=False)  # DGL 2.x's call: dgl-launch decides num_workers
    g = dist.DistGraph("g")
    ids = dist.node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
    loader = dist.DistDataLoader(ids.numpy(), batch_size=32, shuffle=True, collate_fn=Sampler(g).sample_blocks)
    got = [b for b in loader]
    seeds = sorted(s for b in got for s in b[0].tolist())
    assert seeds == sorted(ids.tolist()), "every seed once"
    print(f"trainer {g.rank()} num_workers {loader.num_workers} batches {len(got)} "
          f"processes {len({b[2] for b in got} - {os.getpid()})}", flush=True)
'''


def test_num_samplers_of_dgl_launch_start_the_scripts_sampler_processes():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-compat-launch-") as d:
        d = Path(d)
        generate_parts(d / "parts", "sbm:nodes=2000,avg_degree=6,classes=4,feat_dim=4,seed=4")
        base = free_port_block(910)
        (d / "ip_config.txt").write_text(f"127.0.0.1 {base}\n127.0.0.1 {base + 10}\n")
        (d / "train.py").write_text(LAUNCH_SCRIPT)
        cmd = [binary("launcher/launch/dgl-launch"), "--local", "--no-copy", "--workspace", str(d),
               "--ip-config", "ip_config.txt", "--part-config", "parts/g.json", "--num-trainers", "1",
               "--num-samplers", "2", "--extra-envs", f"PYTHONPATH={BUILD / 'python'}", "--",
               sys.executable, "train.py", "ip_config.txt"]
        r = subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-4000:]
        for rank in range(2):
            assert f"trainer {rank} num_workers 2 batches" in r.stdout and "processes 2" in r.stdout, r.stdout[-4000:]


# ---------------------------------------------------------------- the import graph

def _package_modules(root):
    """{module name: path} of every Python file of the dgld package."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(name, path, modules):
    """The dgld modules `name` imports anywhere in its file (function-local
    imports too): `from . import x` counts as importing the submodule x when
    there is one, else the package."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rsplit(".", 1)[0]
    known = set(modules) | {"dgld._C"}
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "dgld"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "dgld":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
    return {m for m in out if m in known and m != name}


# DGL's python/dgl/distributed and dataloading, module for module.
DGL_LAYOUT = {"dgld.base", "dgld.heterograph", "dgld.convert", "dgld.distributed", "dgld.distributed.dist_context",
              "dgld.distributed.dist_graph", "dgld.distributed.dist_tensor", "dgld.distributed.graph_partition_book",
              "dgld.distributed.graph_services", "dgld.distributed.partition", "dgld.distributed.dist_dataloader",
              "dgld.distributed.nn.pytorch.sparse_emb", "dgld.distributed.optim", "dgld.dataloading",
              "dgld.dataloading.neighbor_sampler", "dgld.dataloading.negative_sampler"}


def test_dgl_module_layout_and_the_old_names():
    import dgld.distributed.optim.pytorch.sparse_optim as sparse_optim
    from dgld.distributed import dist_context, dist_dataloader, dist_graph, graph_partition_book, graph_services
    from dgld.distributed.nn.pytorch import sparse_emb
    assert dist.DistGraph is dist_graph.DistGraph and dist.node_split is dist_graph.node_split
    assert dist.initialize is dist_context.initialize and dist.sample_neighbors is graph_services.sample_neighbors
    assert dist.GraphPartitionBook is graph_partition_book.GraphPartitionBook
    assert issubclass(dist.NodePartitionPolicy, dist.PartitionPolicy)
    assert dist.DistEmbedding is sparse_emb.DistEmbedding and dist.SparseAdam is sparse_optim.SparseAdam
    assert dist.DistDataLoader is dist_dataloader.DistDataLoader
    assert dgld.dataloading.negative_sampler.Uniform(2).k == 2
    from dgld.dataloading import DistNodeDataLoader  # noqa: F401 - DGL's re-export
    with pytest.raises(AttributeError):
        dgld.dataloading.NoSuchLoader  # noqa: B018
    # dgld._client is dist_context under its old name: one module, one state.
    from dgld import _client as old
    assert old is dist_context and sys.modules["dgld._client"] is dist_context
    # Pickled handles name the new modules.
    assert dist_graph._reopen.__module__ == "dgld.distributed.dist_graph"


def test_no_module_of_dgld_imports_one_that_imports_it_back():
    root = Path(dgld.__file__).parent
    modules = _package_modules(root)
    assert DGL_LAYOUT | {"dgld._client"} <= set(modules), sorted(DGL_LAYOUT - set(modules))
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    # Cycles by depth-first search over the import graph.
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)
    # Each module imports in a fresh interpreter (the package first, as Python does).
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint('ok')\n"
    r = subprocess.run([sys.executable, "-c", code, *sorted(modules)], env=dict(os.environ, PYTHONPATH=str(root.parent)),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout


def test_use_graphbolt_is_accepted_and_said_once(no_launch_env, tmp_path, caplog):
    """DGL 2.x's use_graphbolt=True (initialize, partition_graph,
    load_partition) runs on dgld's own sampler, with one warning line per
    process saying so."""
    from dgld.distributed import dist_context
    no_launch_env.setattr(dist_context, "_graphbolt_noted", [])
    caplog.set_level("WARNING", logger="dgld")
    options = _client.initialize_options((), {"use_graphbolt": True})
    assert options["num_workers"] == 0
    g = dgld.graph((torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0])))
    g.ndata["feat"] = torch.randn(4, 3)
    dist.partition_graph(g, "gb", 1, str(tmp_path), use_graphbolt=True)
    lg = dist.load_partition(str(tmp_path / "gb.json"), 0, use_graphbolt=True)[0]
    assert lg.num_nodes() == 4
    said = [r.getMessage() for r in caplog.records if "use_graphbolt=True" in r.getMessage()]
    assert len(said) == 1 and "GraphBolt is not used" in said[0], said
