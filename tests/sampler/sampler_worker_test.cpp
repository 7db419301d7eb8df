// sampler-worker processes and DistDataLoader against real graph-server
// processes: two machines on loopback, the trainer a Cluster in this process.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "client/cluster.h"
#include "client/data_loader.h"
#include "client/dist_graph.h"
#include "common/net/io_threads.h"
#include "common/net/rpc_client.h"
#include "schemas/rpc_generated.h"
#include "tests/support/partitioned_graph.h"
#include "tests/support/process.h"

using namespace dgld;
using namespace dgld::client;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct Dataset : PartitionedGraph {
  Dataset()
      : PartitionedGraph("sbm:nodes=4000,avg_degree=8,classes=4,feat_dim=8,seed=7", 2, "dgld-sampler-data") {}
};

Dataset& dataset() {
  static Dataset d;
  return d;
}

fs::path sampler_worker_bin() { return build_root() / "daemons/sampler_worker/sampler-worker"; }

struct Job {
  TempDir dir{"dgld-sampler-job"};
  uint16_t base = free_port_range(24);
  fs::path ip_config = dir.path() / "ip_config.txt";
  std::deque<Process> servers;
  std::deque<Process> workers;
  std::vector<std::string> endpoints;

  Job() {
    std::ofstream(ip_config) << "127.0.0.1 " << base << "\n127.0.0.1 " << base + 10 << "\n";
    for (int id = 0; id < 2; ++id) {
      servers.push_back(Process::start(
          {graph_server_bin(), "--part-config", dataset().json.string(), "--ip-config", ip_config.string(),
           "--server-id", std::to_string(id), "--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "1500"},
          dir.path() / ("server" + std::to_string(id) + ".log")));
    }
    for (auto& s : servers) REQUIRE(s.wait_for_log("listening on", 60s));
  }
  ~Job() {
    for (auto& w : workers) {
      w.signal(SIGCONT);
      w.signal(SIGTERM);
    }
    for (auto& w : workers) w.wait(10s);
    for (auto& s : servers) s.signal(SIGTERM);
    for (auto& s : servers) s.wait(10s);
  }
  // Starts a sampler-worker for trainer 0 on machine 0 and returns its index.
  size_t add_worker() {
    const size_t i = workers.size();
    workers.push_back(Process::start({sampler_worker_bin().string(), "--part-config", dataset().json.string(),
                                      "--ip-config", ip_config.string(), "--machine-id", "0", "--group", "0",
                                      "--listen-port", "0", "--num-threads", "2", "--call-timeout-ms", "10000"},
                                     dir.path() / ("worker" + std::to_string(i) + ".log")));
    REQUIRE(workers.back().wait_for_log("listening on", 30s));
    const std::string log = workers.back().log();
    const std::string key = "listening on 127.0.0.1:";
    const auto at = log.find(key);
    REQUIRE(at != std::string::npos);
    endpoints.push_back("127.0.0.1:" + std::to_string(std::stoi(log.substr(at + key.size()))));
    return i;
  }
  std::unique_ptr<Cluster> trainer() const {
    ClusterOptions o;
    o.ip_config = ip_config;
    o.part_config = dataset().json;
    o.machine_id = 0;
    o.requested_rank = 0;
    o.connect_timeout = 20s;
    o.call_timeout = 20s;
    o.attach_timeout = 20s;
    auto c = Cluster::connect(o);
    if (!c.is_ok()) FAIL(c.status().to_string());
    return std::move(*c);
  }
};

std::vector<int64_t> train_ids(Cluster& c) {
  auto ids = DistGraph(c).node_split("train_mask");
  if (!ids.is_ok()) FAIL(ids.status().to_string());
  REQUIRE(ids->size() > 100);
  return *ids;
}

// A job with `workers` sampler-workers and trainer 0 with its training seeds.
struct Trainer {
  Job job;
  std::unique_ptr<Cluster> cluster;
  std::vector<int64_t> ids;
  explicit Trainer(int workers) {
    for (int i = 0; i < workers; ++i) job.add_worker();
    cluster = job.trainer();
    ids = train_ids(*cluster);
  }
};

DataLoaderOptions loader_options(int64_t batch_size, std::vector<std::string> samplers = {}) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.seed = 42;
  o.spec.sampling.fanouts = {3, 5};
  o.samplers = std::move(samplers);
  o.batch_timeout = 10s;
  o.next_timeout = 30s;
  return o;
}

std::unique_ptr<DistDataLoader> make_loader(Cluster& c, std::vector<int64_t> ids, DataLoaderOptions o) {
  auto l = DistDataLoader::create(c, std::move(ids), std::move(o));
  if (!l.is_ok()) FAIL(l.status().to_string());
  return std::move(*l);
}

// Every block edge exists, fanouts hold, blocks chain, features and labels match.
void check_batch(const Batch& b, const std::vector<int64_t>& fanouts) {
  const Dataset& d = dataset();
  const MiniBatch& mb = b.mini_batch;
  REQUIRE(mb.blocks.size() == fanouts.size());
  REQUIRE(mb.seeds == mb.blocks.back().dst_nodes);
  REQUIRE(mb.input_nodes == mb.blocks.front().src_nodes);
  for (size_t i = 0; i < mb.blocks.size(); ++i) {
    const Block& blk = mb.blocks[i];
    REQUIRE(blk.src_nodes.size() >= blk.dst_nodes.size());
    REQUIRE(std::equal(blk.dst_nodes.begin(), blk.dst_nodes.end(), blk.src_nodes.begin()));
    if (i + 1 < mb.blocks.size()) REQUIRE(blk.dst_nodes == mb.blocks[i + 1].src_nodes);
    REQUIRE(blk.indptr.size() == blk.dst_nodes.size() + 1);
    for (int64_t v = 0; v < blk.num_dst(); ++v) {
      const int64_t dst = blk.dst_nodes[v];
      const int64_t got = blk.indptr[v + 1] - blk.indptr[v];
      const int64_t degree = d.in_indptr[dst + 1] - d.in_indptr[dst];
      REQUIRE(got == std::min(degree, fanouts[i]));
      for (int64_t k = blk.indptr[v]; k < blk.indptr[v + 1]; ++k) {
        auto e = d.edges.find(blk.eids[k]);
        REQUIRE(e != d.edges.end());
        REQUIRE(e->second.first == blk.src_nodes[blk.indices[k]]);
        REQUIRE(e->second.second == dst);
      }
    }
  }
  REQUIRE(b.feature_dim == 8);
  const auto rows = b.feature_rows();
  REQUIRE(rows.size() == mb.input_nodes.size() * 8);
  for (size_t k = 0; k < mb.input_nodes.size(); ++k) {
    REQUIRE(std::memcmp(&rows[k * 8], d.node_row("_N/features", mb.input_nodes[k]), 8 * sizeof(float)) == 0);
  }
  REQUIRE(b.labels.size() == mb.seeds.size());
  for (size_t k = 0; k < mb.seeds.size(); ++k) {
    int64_t label;
    std::memcpy(&label, d.node_row("_N/labels", mb.seeds[k]), sizeof label);
    REQUIRE(b.labels[k] == label);
  }
}

// Runs one epoch; every seed must come exactly once. Calls on_batch(i) after batch i.
std::vector<Batch> run_epoch(DistDataLoader& l, int epoch, const std::vector<int64_t>& ids,
                             const std::function<void(int64_t)>& on_batch = {}) {
  l.start_epoch(epoch);
  std::vector<Batch> out;
  std::multiset<int64_t> seen;
  for (;;) {
    auto b = l.next();
    if (!b.is_ok()) FAIL(b.status().to_string());
    if (!b->has_value()) break;
    REQUIRE((*b)->batch_id == static_cast<int64_t>(out.size()));  // deterministic order
    seen.insert((*b)->mini_batch.seeds.begin(), (*b)->mini_batch.seeds.end());
    out.push_back(std::move(**b));
    if (on_batch) on_batch(static_cast<int64_t>(out.size()) - 1);
  }
  REQUIRE(static_cast<int64_t>(out.size()) == l.num_batches_per_epoch());
  const std::multiset<int64_t> want(ids.begin(), ids.end());
  INFO("seen " << seen.size() << " seeds, want " << want.size());
  REQUIRE(seen.size() == want.size());
  REQUIRE(std::equal(seen.begin(), seen.end(), want.begin()));
  return out;
}

bool same_batch(const Batch& a, const Batch& b) {
  if (a.mini_batch.blocks.size() != b.mini_batch.blocks.size()) return false;
  for (size_t i = 0; i < a.mini_batch.blocks.size(); ++i) {
    const Block &x = a.mini_batch.blocks[i], &y = b.mini_batch.blocks[i];
    if (x.dst_nodes != y.dst_nodes || x.src_nodes != y.src_nodes || x.indptr != y.indptr ||
        x.indices != y.indices || x.eids != y.eids)
      return false;
  }
  const auto fa = a.feature_rows(), fb = b.feature_rows();
  return a.mini_batch.seeds == b.mini_batch.seeds && std::equal(fa.begin(), fa.end(), fb.begin(), fb.end()) &&
         a.labels == b.labels;
}

}  // namespace

TEST_CASE("sampler: batches from a worker are valid and carry the original features and labels") {
  Trainer t(1);
  auto& job = t.job;
  auto& c = t.cluster;
  const auto& ids = t.ids;
  auto opt0 = loader_options(97, job.endpoints);
  opt0.local_features_from_shm = false;  // the worker sends every row
  auto l = make_loader(*c, ids, opt0);
  CHECK(l->num_batches_per_epoch() == static_cast<int64_t>((ids.size() + 96) / 97));
  auto batches = run_epoch(*l, 0, ids);
  for (const Batch& b : batches) {
    check_batch(b, {3, 5});
    CHECK(b.worker == 0);
  }
  CHECK(l->stats().batches_by_workers == l->num_batches_per_epoch());
  CHECK(l->stats().batches_by_trainer == 0);

  // drop_last: floor; the short last batch is left out.
  auto opt = loader_options(97, job.endpoints);
  opt.drop_last = true;
  auto l2 = make_loader(*c, ids, opt);
  CHECK(l2->num_batches_per_epoch() == static_cast<int64_t>(ids.size() / 97));
}

TEST_CASE("loader: prefetch_bytes bounds the batches made ahead; an epoch still yields every seed once") {
  Trainer t(0);
  auto& c = t.cluster;
  const auto& ids = t.ids;
  auto consume = [&](DistDataLoader& l) {
    l.start_epoch(0);
    std::vector<int64_t> seen;
    // A slow consumer: the loader runs ahead as far as it may.
    std::this_thread::sleep_for(50ms);
    for (;;) {
      auto b = l.next();
      REQUIRE(b.is_ok());
      if (!*b) break;
      std::this_thread::sleep_for(10ms);
      seen.insert(seen.end(), (*b)->mini_batch.seeds.begin(), (*b)->mini_batch.seeds.end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> want(ids);
    std::sort(want.begin(), want.end());
    CHECK(seen == want);
  };
  auto opt = loader_options(97);
  opt.prefetch = 6;
  opt.local_threads = 2;
  opt.prefetch_bytes = 1;  // below any batch: only the batch the consumer waits for
  auto tight = make_loader(*c, ids, opt);
  consume(*tight);
  CHECK(tight->stats().max_ahead == 1);
  const size_t largest = tight->memory().largest_batch;
  CHECK(largest > 0);
  opt.prefetch_bytes = 3 * largest;  // room for three batches of the largest size
  auto three = make_loader(*c, ids, opt);
  consume(*three);
  CHECK(three->stats().max_ahead <= 3);
  opt.prefetch_bytes = 0;  // no byte bound: up to `prefetch` batches
  auto open = make_loader(*c, ids, opt);
  consume(*open);
  CHECK(open->stats().max_ahead >= 3);  // beyond the tight bound's 1 (the 50 ms head start lets it fill)
  CHECK(open->stats().max_ahead <= 6);
}

TEST_CASE("sampler: a worker on the trainer's machine hands batches over in shared memory, or through the socket") {
  Trainer t(1);
  auto& job = t.job;
  auto& c = t.cluster;
  const auto& ids = t.ids;
  auto shm_opt = loader_options(97, job.endpoints);
  shm_opt.prefetch = 2;
  auto socket_opt = shm_opt;
  socket_opt.shared_memory_batches = false;
  auto in_slots = make_loader(*c, ids, shm_opt);
  auto in_replies = make_loader(*c, ids, socket_opt);
  // Batches taken and dropped one at a time, as training takes them: after
  // each slot's first batch (which sizes it) they come in slots.
  for (auto* l : {in_slots.get(), in_replies.get()}) {
    l->start_epoch(0);
    int64_t from_slots = 0, n = 0;
    std::vector<Batch> kept;
    for (;;) {
      auto b = l->next();
      REQUIRE(b.is_ok());
      if (!b->has_value()) break;
      check_batch(**b, {3, 5});
      from_slots += (*b)->slot_features != nullptr;
      ++n;
      // Keep every third: a held slot is not written again while its batch lives.
      if (n % 3 == 0) kept.push_back(std::move(**b));
    }
    for (const Batch& b : kept) check_batch(b, {3, 5});
    INFO(from_slots << " of " << n << " batches in slots");
    if (l == in_slots.get()) {
      CHECK(from_slots >= n - 2 * (shm_opt.prefetch + 2) - static_cast<int64_t>(kept.size()));
      CHECK(from_slots > 0);
    } else {
      CHECK(from_slots == 0);
    }
  }
  // The same batches either way.
  auto a = run_epoch(*in_slots, 1, ids);
  auto b = run_epoch(*in_replies, 1, ids);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(same_batch(a[i], b[i]));
}

TEST_CASE("sampler: the same seeds and rng seed give the same batch via a worker and in the trainer") {
  Trainer t(1);
  auto& job = t.job;
  auto& c = t.cluster;
  const auto& ids = t.ids;
  auto remote = make_loader(*c, ids, loader_options(128, job.endpoints));
  auto local_opt = loader_options(128);
  local_opt.local_threads = 2;
  auto local = make_loader(*c, ids, local_opt);
  auto a = run_epoch(*remote, 3, ids);
  auto b = run_epoch(*local, 3, ids);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].worker == 0);
    CHECK(b[i].worker == -1);
    REQUIRE(same_batch(a[i], b[i]));
    check_batch(b[i], {3, 5});
  }
  // Another epoch shuffles differently; the same epoch again is identical.
  auto a4 = run_epoch(*remote, 4, ids);
  CHECK(a4[0].mini_batch.seeds != a[0].mini_batch.seeds);
  auto a3 = run_epoch(*remote, 3, ids);
  CHECK(same_batch(a3[0], a[0]));
  // An epoch abandoned with batches in flight, then started again: each batch once.
  remote->start_epoch(3);
  REQUIRE(remote->next().is_ok());
  REQUIRE(remote->next().is_ok());
  auto again = run_epoch(*remote, 3, ids);
  CHECK(same_batch(again[1], a[1]));
}

TEST_CASE("sampler: an epoch completes when sampler-workers are killed mid-epoch") {
  Trainer t(2);
  auto& job = t.job;
  auto& c = t.cluster;
  const auto& ids = t.ids;
  auto opt = loader_options(16, job.endpoints);
  opt.prefetch = 6;
  auto l = make_loader(*c, ids, opt);
  REQUIRE(l->num_batches_per_epoch() > 20);
  auto batches = run_epoch(*l, 0, ids, [&](int64_t i) {
    if (i == 3) job.workers[1].signal(SIGKILL);
    if (i == 12) job.workers[0].signal(SIGKILL);
  });
  for (const Batch& b : batches) check_batch(b, {3, 5});
  const auto st = l->stats();
  CHECK(st.live_workers == 0);
  CHECK(st.batches_by_trainer > 0);
  CHECK(st.batches_by_workers > 0);
  CHECK(st.batches_by_workers + st.batches_by_trainer == l->num_batches_per_epoch());
  // The next epoch runs on the trainer alone.
  run_epoch(*l, 1, ids);
}

TEST_CASE("sampler: a worker stopped past the batch deadline is treated as dead") {
  Trainer t(1);
  auto& job = t.job;
  auto& c = t.cluster;
  const auto& ids = t.ids;
  // Small batches and a short prefetch window, so that batches are still to
  // be requested after the stop: with a handful of batches the worker could
  // have answered every one of them before SIGSTOP landed.
  auto opt = loader_options(16, job.endpoints);
  opt.prefetch = 2;
  opt.batch_timeout = 1500ms;
  auto l = make_loader(*c, ids, opt);
  REQUIRE(l->num_batches_per_epoch() > 2 + opt.prefetch + 5);
  const auto t0 = std::chrono::steady_clock::now();
  auto batches = run_epoch(*l, 0, ids, [&](int64_t i) {
    if (i == 1) job.workers[0].signal(SIGSTOP);
  });
  CHECK(std::chrono::steady_clock::now() - t0 < 15s);
  for (const Batch& b : batches) check_batch(b, {3, 5});
  CHECK(l->stats().live_workers == 0);
  CHECK(l->stats().batches_by_trainer > 0);
  job.workers[0].signal(SIGCONT);
}

TEST_CASE("sampler: a worker leaves and exits 0 on SIGTERM; bad endpoints are errors") {
  Job job;
  job.add_worker();
  job.workers[0].signal(SIGTERM);
  CHECK(job.workers[0].wait(10s) == 0);
  CHECK(job.workers[0].log().find("stopping") != std::string::npos);
  CHECK(job.workers[0].log().find("memory: peak RSS") != std::string::npos);

  auto c = job.trainer();
  auto ids = train_ids(*c);
  auto opt = loader_options(64, {"127.0.0.1:notaport"});
  CHECK_FALSE(DistDataLoader::create(*c, ids, opt).is_ok());
  opt.samplers = {job.endpoints[0]};  // nobody listens there any more
  opt.connect_timeout = 300ms;
  auto r = DistDataLoader::create(*c, ids, opt);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find(job.endpoints[0]) != std::string::npos);
}

TEST_CASE("sampler: out-of-order delivery with two workers still covers every seed once") {
  Trainer t(2);
  auto& job = t.job;
  auto& c = t.cluster;
  const auto& ids = t.ids;
  auto opt = loader_options(50, job.endpoints);
  opt.deterministic = false;
  auto l = make_loader(*c, ids, opt);
  l->start_epoch(0);
  std::multiset<int64_t> seen;
  std::set<int64_t> batch_ids, workers;
  for (;;) {
    auto b = l->next();
    REQUIRE(b.is_ok());
    if (!b->has_value()) break;
    CHECK(batch_ids.insert((*b)->batch_id).second);
    workers.insert((*b)->worker);
    seen.insert((*b)->mini_batch.seeds.begin(), (*b)->mini_batch.seeds.end());
  }
  CHECK(static_cast<int64_t>(batch_ids.size()) == l->num_batches_per_epoch());
  CHECK(seen == std::multiset<int64_t>(ids.begin(), ids.end()));
  // Every batch came from a worker. Which worker takes a batch is decided by
  // who asks first, so one fast worker may take them all (seen in CI once
  // server-side sampling got faster); both are not required.
  CHECK_FALSE(workers.empty());
  for (int64_t w : workers) CHECK((w == 0 || w == 1));
  auto again = l->next();  // the epoch is over
  REQUIRE(again.is_ok());
  CHECK_FALSE(again->has_value());
}

TEST_CASE("sampler: a worker answers bad requests with errors and keeps serving") {
  Job job;
  job.add_worker();
  net::IoThreads io(1);
  const std::string& ep = job.endpoints[0];
  auto cl = net::RpcClient::connect(io.context(), "127.0.0.1",
                                    static_cast<uint16_t>(std::stoi(ep.substr(ep.find(':') + 1))), "worker");
  REQUIRE(cl.is_ok());
  BatchSpec spec;
  spec.sampling.fanouts = {3, 5};
  const std::vector<int64_t> seeds = {1, 2, 3};
  auto bad = encode_sample_batch(7, seeds, 1, spec);
  bad.blobs[0] = net::OutBlob::copy_of(seeds.data(), 5);  // not whole int64s
  auto r = (*cl)->call(std::move(bad), 5s);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::invalid_argument);
  spec.feature = "no_such_tensor";
  auto r2 = (*cl)->call(encode_sample_batch(8, seeds, 1, spec), 5s);
  REQUIRE_FALSE(r2.is_ok());
  CHECK(r2.status().message().find("no_such_tensor") != std::string::npos);
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateEcho(fbb, fbb.CreateString("x")));
  CHECK_FALSE((*cl)->call(net::OutMessage(fbs::MessageKind::Echo, fbb), 5s).is_ok());  // not served here
  spec.feature = "features";
  auto r3 = (*cl)->call(encode_sample_batch(8, seeds, 1, spec, 99), 5s);  // no machine 99
  REQUIRE_FALSE(r3.is_ok());
  CHECK(r3.status().code() == StatusCode::invalid_argument);
  auto ok = (*cl)->call(encode_sample_batch(9, seeds, 1, spec), 5s);
  REQUIRE(ok.is_ok());
  auto b = decode_sample_batch_reply(std::move(*ok), "worker");
  REQUIRE(b.is_ok());
  CHECK(b->batch_id == 9);
  CHECK(b->mini_batch.seeds == seeds);
  check_batch(*b, {3, 5});
}

namespace {

// An OutMessage as the receiving side holds it (payload and blobs copied).
net::Message received(net::OutMessage&& out) {
  net::Message m;
  m.header.kind = out.kind;
  m.payload = net::ByteBuffer(out.payload.size());
  std::memcpy(m.payload.data(), out.payload.data(), out.payload.size());
  for (const auto& b : out.blobs) {
    net::ByteBuffer buf(b.size);
    if (b.size) std::memcpy(buf.data(), b.data, b.size);
    m.blobs.push_back(std::move(buf));
  }
  return m;
}

// A heterogeneous batch of two blocks: edge types on every edge, feature
// rows of two node types.
Batch typed_batch() {
  Batch b;
  b.batch_id = 4;
  Block inner;  // 2 dst, 4 src, 3 edges
  inner.dst_nodes = {10, 11};
  inner.src_nodes = {10, 11, 12, 13};
  inner.indptr = {0, 2, 3};
  inner.indices = {2, 3, 0};
  inner.eids = {7, 8, 9};
  inner.etypes = {0, 2, 1};
  Block outer;  // 1 dst, 2 src, 1 edge
  outer.dst_nodes = {10};
  outer.src_nodes = {10, 11};
  outer.indptr = {0, 1};
  outer.indices = {1};
  outer.eids = {5};
  outer.etypes = {2};
  b.mini_batch.blocks = {inner, outer};
  b.mini_batch.seeds = outer.dst_nodes;
  b.mini_batch.input_nodes = inner.src_nodes;
  b.labels = {3};
  b.typed_features.push_back(TypedRows{.ntype = 0, .index = {0, 2}, .rows = {1, 2, 3, 4, 5, 6}, .dim = 3});
  b.typed_features.push_back(TypedRows{.ntype = 1, .index = {1, 3}, .rows = {7, 8}, .dim = 1});
  return b;
}

}  // namespace

TEST_CASE("sampler: a heterogeneous batch's edge types and typed rows survive the reply; bad ones are refused") {
  const Batch want = typed_batch();
  auto got = decode_sample_batch_reply(received(encode_sample_batch_reply(typed_batch())), "worker", nullptr);
  REQUIRE(got.is_ok());
  REQUIRE(got->mini_batch.blocks.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(got->mini_batch.blocks[i].etypes == want.mini_batch.blocks[i].etypes);
    CHECK(got->mini_batch.blocks[i].indices == want.mini_batch.blocks[i].indices);
  }
  REQUIRE(got->typed_features.size() == 2);
  for (size_t t = 0; t < 2; ++t) {
    CHECK(got->typed_features[t].ntype == want.typed_features[t].ntype);
    CHECK(got->typed_features[t].index == want.typed_features[t].index);
    CHECK(got->typed_features[t].rows == want.typed_features[t].rows);
    CHECK(got->typed_features[t].dim == want.typed_features[t].dim);
  }
  CHECK(got->labels == want.labels);

  SECTION("positions that are not ascending") {
    Batch b = typed_batch();
    b.typed_features[0].index = {2, 0};
    auto r = decode_sample_batch_reply(received(encode_sample_batch_reply(std::move(b))), "worker", nullptr);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::protocol_error);
    CHECK(r.status().message().find("not ascending") != std::string::npos);
  }
  SECTION("rows of the wrong size") {
    Batch b = typed_batch();
    b.typed_features[1].rows.push_back(9);
    auto r = decode_sample_batch_reply(received(encode_sample_batch_reply(std::move(b))), "worker", nullptr);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find("typed feature rows") != std::string::npos);
  }
  SECTION("edge types of the wrong count") {
    Batch b = typed_batch();
    b.mini_batch.blocks[0].etypes.pop_back();
    auto r = decode_sample_batch_reply(received(encode_sample_batch_reply(std::move(b))), "worker", nullptr);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find("etypes") != std::string::npos);
  }
}
