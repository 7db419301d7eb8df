// The client library against real graph-server processes: two machines on
// loopback (each line of ip_config one simulated machine), trainers as
// Cluster objects with explicit machine ids in this process.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "client/batch_builder.h"
#include "client/cluster.h"
#include "client/dist_graph.h"
#include "client/dist_tensor.h"
#include "client/row_cache.h"
#include "client/local_partition.h"
#include "common/net/io_threads.h"
#include "common/partition/partition.h"
#include "common/sampling/multi_layer_sampler.h"
#include "tests/support/partitioned_graph.h"
#include "tests/support/process.h"

using namespace dgld;
using namespace dgld::client;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// One generated graph in 2 partitions, and the whole graph rebuilt from them.
struct Dataset : PartitionedGraph {
  Dataset() : PartitionedGraph("sbm:nodes=4000,avg_degree=8,classes=4,feat_dim=8,seed=5", 2, "dgld-client-data") {}
  const void* feature_row(int64_t v) const { return node_row("_N/features", v); }
};

Dataset& dataset() {
  static Dataset d;
  return d;
}

// graph-server processes for the dataset on fresh ports.
struct Job {
  TempDir dir{"dgld-client-job"};
  uint16_t base;
  int per_machine;
  fs::path ip_config;
  std::deque<Process> servers;

  fs::path json;

  explicit Job(int servers_per_machine = 1, fs::path part_config = dataset().json)
      : base(free_port_range(24)), per_machine(servers_per_machine), json(std::move(part_config)) {
    ip_config = dir.path() / "ip_config.txt";
    std::ofstream(ip_config) << "127.0.0.1 " << base << "\n127.0.0.1 " << base + 10 << "\n";
    for (int id = 0; id < 2 * per_machine; ++id) {
      servers.push_back(
          Process::start({graph_server_bin(), "--part-config", json.string(),
                          "--ip-config", ip_config.string(), "--server-id", std::to_string(id),
                          "--num-servers", std::to_string(per_machine), "--heartbeat-interval-ms",
                          "200", "--heartbeat-timeout-ms", "1000"},
                         dir.path() / ("server" + std::to_string(id) + ".log")));
    }
    for (auto& s : servers) REQUIRE(s.wait_for_log("listening on", 60s));
  }
  ~Job() {
    for (auto& s : servers) s.signal(SIGTERM);
    for (auto& s : servers) s.wait(10s);
  }
  ClusterOptions options(int machine, int rank = -1) const {
    ClusterOptions o;
    o.ip_config = ip_config;
    o.part_config = json;
    o.machine_id = machine;
    o.num_servers = per_machine;
    o.requested_rank = rank;
    o.connect_timeout = 20s;
    o.call_timeout = 20s;
    o.attach_timeout = 20s;
    return o;
  }
  std::unique_ptr<Cluster> trainer(int machine, int rank) const {
    auto c = Cluster::connect(options(machine, rank));
    if (!c.is_ok()) FAIL(c.status().to_string());
    return std::move(*c);
  }
};

// Mixed ids of both machines, with repeats.
std::vector<int64_t> mixed_ids(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids;
  for (int i = 0; i < count; ++i)
    ids.push_back(static_cast<int64_t>(rng() % dataset().config.num_nodes));
  ids.push_back(ids[0]);
  ids.push_back(ids[1]);
  ids.push_back(dataset().config.num_nodes - 1);
  ids.push_back(0);
  return ids;
}

std::vector<int64_t> unique_ids(std::vector<int64_t> ids) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t v : ids) {
    if (seen.insert(v).second) out.push_back(v);
  }
  return out;
}

}  // namespace

TEST_CASE("client: machine id detection") {
  // Several lines on this host: the first of them, as DGL's client does.
  std::vector<MachineAddress> two_on_one_box = {
      {"10.255.255.1", 30040, 1}, {"127.0.0.1", 30050, 2}, {"127.0.0.1", 30060, 3}};
  auto r = detect_machine_id(two_on_one_box, {"127.0.0.1", "10.1.2.3"}, "ip_config.txt");
  REQUIRE(r.is_ok());
  CHECK(*r == 1);
  auto none = detect_machine_id({{"10.255.255.1", 30050, 1}}, {"127.0.0.1"}, "ip_config.txt");
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().message().find("--machine-id") != std::string::npos);
  auto one =
      detect_machine_id({{"10.255.255.1", 30050, 1}, {"127.0.0.1", 30050, 2}}, {"127.0.0.1"}, "x");
  REQUIRE(one.is_ok());
  CHECK(*one == 1);
  auto local = local_ipv4_addresses();
  REQUIRE(local.is_ok());
  CHECK(std::count(local->begin(), local->end(), "127.0.0.1") == 1);

  Job job;
  auto opts = job.options(-1);
  auto c = Cluster::connect(opts);  // both machines of the job are this host
  REQUIRE(c.is_ok());
  CHECK((*c)->machine_id() == 0);
}

TEST_CASE("client: a cluster registers, barriers, reports health and leaves") {
  Job job(2);
  auto t0 = job.trainer(0, 0);
  auto t1 = job.trainer(1, 1);
  CHECK(t0->rank() == 0);
  CHECK(t1->rank() == 1);
  CHECK(t0->num_trainers() == 2);
  CHECK(t1->machine_id() == 1);
  auto b = std::async(std::launch::async, [&] { return t1->barrier("b1", 10s); });
  CHECK(t0->barrier("b1", 10s).is_ok());
  CHECK(b.get().is_ok());
  std::this_thread::sleep_for(600ms);  // a few heartbeats
  CHECK(t0->health().is_ok());

  // A trainer that registers and then falls silent is dropped; health says so.
  net::IoThreads io(1);
  auto raw = ServerConnection::connect(io.context(), "127.0.0.1", job.base, 0, 10s, 10s);
  REQUIRE(raw.is_ok());
  auto reg = (*raw)->register_client(Role::trainer, 1, -1, 7);
  REQUIRE(reg.is_ok());
  Status h;
  for (int i = 0; i < 50 && h.is_ok(); ++i) {
    std::this_thread::sleep_for(100ms);
    h = t0->health();
  }
  REQUIRE_FALSE(h.is_ok());
  CHECK(h.message().find("trainer 7") != std::string::npos);
  CHECK_FALSE(t0->barrier("b2", 5s).is_ok());
  CHECK(t0->leave().is_ok());
  CHECK(t0->leave().is_ok());  // idempotent
}

TEST_CASE("client: DistTensor pulls mixed local and remote ids with duplicates") {
  Job job(2);
  auto t0 = job.trainer(0, 0);
  auto t1 = job.trainer(1, 1);
  for (Cluster* c : {t0.get(), t1.get()}) {
    DistGraph g(*c);
    auto feat = g.ndata("features");
    REQUIRE(feat.is_ok());
    CHECK(feat->shape() == std::vector<int64_t>{dataset().config.num_nodes, 8});
    CHECK(feat->dtype() == DType::float32);
    auto ids = mixed_ids(3000, 17 + c->machine_id());
    auto rows = feat->pull_as<float>(ids);
    REQUIRE(rows.is_ok());
    for (size_t k = 0; k < ids.size(); ++k) {
      INFO("id " << ids[k]);
      REQUIRE(std::memcmp(rows->data() + k * 8, dataset().feature_row(ids[k]), 32) == 0);
    }
    // Only local ids (no request), only remote ids, and nothing.
    const IdRange mine = dataset().config.node_map[c->machine_id()];
    std::vector<int64_t> local = {mine.start, mine.end - 1, mine.start + 3};
    auto lr = feat->pull_as<float>(local);
    REQUIRE(lr.is_ok());
    CHECK(std::memcmp(lr->data() + 8, dataset().feature_row(mine.end - 1), 32) == 0);
    auto empty = feat->pull(std::vector<int64_t>{});
    REQUIRE(empty.is_ok());
    CHECK(empty->empty());
    auto bad = feat->pull(std::vector<int64_t>{1, dataset().config.num_nodes});
    CHECK(bad.status().code() == StatusCode::invalid_argument);
    auto labels = g.ndata("labels");
    REQUIRE(labels.is_ok());
    CHECK(labels->pull_as<int64_t>(ids).is_ok());
    CHECK(g.ndata("nope").status().code() == StatusCode::not_found);
  }
}

TEST_CASE("client: a feature cache of halo rows serves remote rows with no request, the same bytes") {
  Job job(2);
  auto t0 = job.trainer(0, 0);
  auto t1 = job.trainer(1, 1);
  for (Cluster* c : {t0.get(), t1.get()}) {
    DistGraph g(*c);
    auto feat = g.ndata("features");
    REQUIRE(feat.is_ok());
    auto cache = build_halo_row_cache(*c, *feat, 64 * 32);  // room for 64 rows of 8 floats
    REQUIRE(cache.is_ok());
    CHECK((*cache)->num_rows() == 64);
    CHECK((*cache)->bytes() == 64 * 32);
    DistTensor cached = *feat;
    cached.set_row_cache(*cache);
    auto ids = mixed_ids(3000, 5 + c->machine_id());
    auto rows = cached.pull_as<float>(ids);
    REQUIRE(rows.is_ok());
    for (size_t k = 0; k < ids.size(); ++k) {
      INFO("id " << ids[k]);
      REQUIRE(std::memcmp(rows->data() + k * 8, dataset().feature_row(ids[k]), 32) == 0);
    }
    CHECK((*cache)->hits() > 0);
    CHECK((*cache)->misses() > 0);
    // Distinct ids without de-duplication, half of them cached.
    std::vector<int64_t> distinct;
    const IdRange mine = dataset().config.node_map[c->machine_id()];
    for (int64_t v = 0; v < dataset().config.num_nodes && distinct.size() < 500; v += 7) distinct.push_back(v);
    std::vector<float> out(distinct.size() * 8);
    REQUIRE(cached.pull_unique_into(distinct, out.data()).is_ok());
    for (size_t k = 0; k < distinct.size(); ++k) {
      INFO("id " << distinct[k] << " (this machine owns [" << mine.start << ", " << mine.end << "))");
      REQUIRE(std::memcmp(out.data() + k * 8, dataset().feature_row(distinct[k]), 32) == 0);
    }
    // A budget of nothing caches nothing.
    auto none = build_halo_row_cache(*c, *feat, 0);
    REQUIRE(none.is_ok());
    CHECK((*none)->num_rows() == 0);
  }
}

TEST_CASE("client: BatchBuilders given one shared feature cache read through it and build none of their own") {
  Job job(2);
  auto c = job.trainer(0, 0);
  DistGraph g(*c);
  auto feat = g.ndata("features");
  REQUIRE(feat.is_ok());
  auto cache = build_halo_row_cache(*c, *feat, 64 * 32);
  REQUIRE(cache.is_ok());
  BatchSpec spec;
  spec.sampling.fanouts = {4, 4};
  spec.feature_cache_bytes = 1 << 20;  // would hold every halo row if built here
  spec.shared_feature_cache = *cache;
  auto a = BatchBuilder::create(*c, spec);
  auto b = BatchBuilder::create(*c, spec);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  const IdRange mine = dataset().config.node_map[0];
  std::vector<int64_t> seeds;
  for (int64_t v = mine.start; v < mine.end && seeds.size() < 200; v += 3) seeds.push_back(v);
  for (const auto* builder : {a->get(), b->get()}) {
    CHECK(builder->feature_cache_bytes() == 64 * 32);  // the shared one, not a 1 MiB one of its own
    auto batch = builder->sample(0, seeds, 7);
    REQUIRE(batch.is_ok());
    REQUIRE(builder->fetch(*batch).is_ok());
    const auto& in = batch->mini_batch.input_nodes;
    for (size_t k = 0; k < in.size(); ++k) {
      INFO("input node " << in[k]);
      REQUIRE(std::memcmp(batch->features.data() + k * 8, dataset().feature_row(in[k]), 32) == 0);
    }
  }
  const auto [hits_a, misses_a] = (*a)->feature_cache_hits_misses();
  const auto [hits_b, misses_b] = (*b)->feature_cache_hits_misses();
  CHECK(hits_a > 0);  // the halo rows the batches needed came from the one cache
  CHECK(hits_a == hits_b);
  CHECK(misses_a == misses_b);
  CHECK((*cache)->hits() == hits_a);
}

TEST_CASE("client: DistTensor create, push then pull, destroy (collective)") {
  Job job(2);
  auto t0 = job.trainer(0, 0);
  auto t1 = job.trainer(1, 1);
  const int64_t N = dataset().config.num_nodes;
  CreateTensor spec{"emb", DType::float32, {N, 4}};
  auto f1 = std::async(std::launch::async, [&] { return DistTensor::create(*t1, spec, 20s); });
  auto e0 = DistTensor::create(*t0, spec, 20s);
  auto e1 = f1.get();
  REQUIRE(e0.is_ok());
  REQUIRE(e1.is_ok());
  auto ids = unique_ids(mixed_ids(500, 3));
  std::vector<float> rows(ids.size() * 4);
  for (size_t k = 0; k < rows.size(); ++k) rows[k] = static_cast<float>(k) * 0.5f;
  auto zero = e1->pull_as<float>(ids);
  REQUIRE(zero.is_ok());
  CHECK(std::all_of(zero->begin(), zero->end(), [](float x) { return x == 0; }));
  REQUIRE(e0->push(ids, rows.data()).is_ok());
  // Both machines see the pushed rows, through shared memory or a server.
  for (auto* e : {&*e0, &*e1}) {
    auto back = e->pull_as<float>(ids);
    REQUIRE(back.is_ok());
    CHECK(*back == rows);
  }
  // Destroy: gone everywhere; create again with another shape is then possible.
  auto d1 = std::async(std::launch::async, [&] { return e1->destroy(20s); });
  CHECK(e0->destroy(20s).is_ok());
  CHECK(d1.get().is_ok());
  CHECK(DistTensor::open(*t0, "emb").status().code() == StatusCode::not_found);
  CHECK(DistTensor::open(*t1, "emb").status().code() == StatusCode::not_found);
  CHECK(e0->pull(ids).status().code() == StatusCode::invalid_argument);
}

namespace {

// Creates, destroys and creates again "emb" with another dtype; returns the second.
Result<DistTensor> recreate(Cluster& t0, Cluster& t1) {
  const int64_t N = dataset().config.num_nodes;
  for (CreateTensor spec :
       {CreateTensor{"emb", DType::float32, {N, 4}}, CreateTensor{"emb", DType::int64, {N, 2}}}) {
    auto f1 = std::async(std::launch::async, [&] { return DistTensor::create(t1, spec, 20s); });
    auto e0 = DistTensor::create(t0, spec, 20s);
    auto e1 = f1.get();
    if (!e0.is_ok()) return e0.status();
    if (!e1.is_ok()) return e1.status();
    if (spec.dtype == DType::int64) return e0;
    std::vector<int64_t> all = {0, 1, N - 1};
    std::vector<float> ones(12, 1.0f);
    if (Status st = e1->push(all, ones.data()); !st.is_ok()) return st;
    for (int m = 0; m < 2; ++m) {  // every server has seen it
      for (int j = 0; j < t0.num_servers(); ++j) {
        auto r = t0.server(m, j).pull("emb", std::vector<int64_t>{m == 0 ? 0 : N - 1});
        if (!r.is_ok()) return r.status();
      }
    }
    auto d1 = std::async(std::launch::async, [&] { return e1->destroy(20s); });
    if (Status st = e0->destroy(20s); !st.is_ok()) return st;
    if (Status st = d1.get(); !st.is_ok()) return st;
  }
  return internal_error("unreachable");
}

}  // namespace

TEST_CASE("client: a destroyed DistTensor can be created again with another dtype") {
  Job job;
  auto t0 = job.trainer(0, 0);
  auto t1 = job.trainer(1, 1);
  auto again = recreate(*t0, *t1);
  REQUIRE(again.is_ok());
  CHECK(again->row_bytes() == 16);
  auto z = again->pull_as<int64_t>(unique_ids(mixed_ids(300, 8)));
  REQUIRE(z.is_ok());
  CHECK(std::all_of(z->begin(), z->end(), [](int64_t x) { return x == 0; }));
}

// Known server limitation: a backup server keeps its attachment to a tensor
// that the main server deleted, so it serves the old rows after a re-create.
// DistTensor refuses such rows (dtype check) rather than returning them.
TEST_CASE("client: backup servers see a re-created DistTensor") {
  Job job(2);
  auto t0 = job.trainer(0, 0);
  auto t1 = job.trainer(1, 1);
  REQUIRE(recreate(*t0, *t1).is_ok());
  auto rows = t0->server(1, 1).pull("emb", std::vector<int64_t>{dataset().config.num_nodes - 1});
  REQUIRE(rows.is_ok());
  CHECK(rows->dtype == DType::int64);
}

TEST_CASE("client: DistGraph degrees and find_edges across partitions") {
  Job job;
  auto t0 = job.trainer(0, 0);
  DistGraph g(*t0);
  const auto& d = dataset();
  CHECK(g.num_nodes() == d.config.num_nodes);
  CHECK(g.num_edges() == d.config.num_edges);
  CHECK(g.partition_book().num_partitions() == 2);
  auto ids = mixed_ids(800, 9);
  auto in = g.in_degrees(ids);
  auto out = g.out_degrees(ids);
  REQUIRE(in.is_ok());
  REQUIRE(out.is_ok());
  for (size_t k = 0; k < ids.size(); ++k) {
    CHECK((*in)[k] == d.in_view().degree(ids[k]));
    CHECK((*out)[k] == d.out_view().degree(ids[k]));
  }
  std::mt19937_64 rng(4);
  std::vector<int64_t> eids;
  for (int i = 0; i < 500; ++i) eids.push_back(static_cast<int64_t>(rng() % d.config.num_edges));
  eids.push_back(0);
  eids.push_back(d.config.num_edges - 1);
  auto fe = g.find_edges(eids);
  REQUIRE(fe.is_ok());
  for (size_t k = 0; k < eids.size(); ++k) {
    CHECK(fe->src[k] == d.edges.at(eids[k]).first);
    CHECK(fe->dst[k] == d.edges.at(eids[k]).second);
  }
  CHECK(g.find_edges(std::vector<int64_t>{-1}).status().code() == StatusCode::invalid_argument);
}

TEST_CASE("client: distributed sampling equals sampling the whole graph in one process") {
  Job job(2);
  auto t1 = job.trainer(1, 0);
  const auto& d = dataset();
  auto seeds = unique_ids(mixed_ids(600, 21));
  // Also seeds of this machine only (their edges are handed on without the
  // merge) and of the other machine only.
  const IdRange mine = t1->partition_book().node_range(t1->machine_id());
  std::vector<int64_t> local_seeds, remote_seeds;
  for (int64_t s : seeds) (s >= mine.start && s < mine.end ? local_seeds : remote_seeds).push_back(s);
  REQUIRE(!local_seeds.empty());
  REQUIRE(!remote_seeds.empty());
  for (bool out_edges : {false, true}) {
    DistNeighborSource dist(*t1, DistSampleOptions{out_edges, "", nullptr});
    LocalGraphSource whole(out_edges ? d.out_view() : d.in_view());
    for (int64_t fanout : {3, -1, 0}) {
      for (bool replace : {false, true}) {
        if (replace && fanout < 0) continue;
        INFO("out " << out_edges << " fanout " << fanout << " replace " << replace);
        for (const auto* some : {&local_seeds, &remote_seeds}) {
          INFO((some == &local_seeds ? "local seeds" : "remote seeds"));
          SampleOptions opt{fanout, replace, 1234};
          auto a = dist.sample(*some, opt);
          auto b = whole.sample(*some, opt);
          REQUIRE(a.is_ok());
          REQUIRE(b.is_ok());
          if (out_edges) std::swap(b->src, b->dst);
          CHECK(a->eid == b->eid);
          CHECK(a->src == b->src);
          CHECK(a->dst == b->dst);
        }
        SampleOptions opt{fanout, replace, 1234};
        auto a = dist.sample(seeds, opt);
        auto b = whole.sample(seeds, opt);
        REQUIRE(a.is_ok());
        REQUIRE(b.is_ok());
        if (out_edges) std::swap(b->src, b->dst);  // the kernel reports (neighbour, seed)
        CHECK(a->eid == b->eid);
        CHECK(a->src == b->src);
        CHECK(a->dst == b->dst);
        std::map<int64_t, int64_t> per_seed;
        for (size_t i = 0; i < a->size(); ++i) {
          auto e = d.edges.find(a->eid[i]);
          REQUIRE(e != d.edges.end());
          CHECK(e->second.first == a->src[i]);
          CHECK(e->second.second == a->dst[i]);
          ++per_seed[out_edges ? a->src[i] : a->dst[i]];
        }
        const AdjacencyView v = out_edges ? d.out_view() : d.in_view();
        for (int64_t s : seeds) {
          const int64_t deg = v.degree(s);
          const int64_t expect = fanout < 0 ? deg
                                 : replace  ? (deg ? fanout : 0)
                                            : std::min(fanout, deg);
          CHECK(per_seed[s] == expect);
        }
      }
    }
  }
  // Two layers with the multi-layer sampler: the same blocks as in one process.
  DistNeighborSource dist(*t1);
  LocalGraphSource whole(d.in_view());
  MultiLayerNeighborSampler sampler({10, 25});
  std::vector<int64_t> batch(seeds.begin(), seeds.begin() + 200);
  auto a = sampler.sample(dist, batch, 99);
  auto b = sampler.sample(whole, batch, 99);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  REQUIRE(a->blocks.size() == 2);
  for (size_t l = 0; l < 2; ++l) {
    CHECK(a->blocks[l].src_nodes == b->blocks[l].src_nodes);
    CHECK(a->blocks[l].indptr == b->blocks[l].indptr);
    CHECK(a->blocks[l].eids == b->blocks[l].eids);
  }
  CHECK(a->input_nodes == b->input_nodes);
  CHECK(dist.sample(std::vector<int64_t>{d.config.num_nodes}, SampleOptions{}).status().code() ==
        StatusCode::invalid_argument);
}

TEST_CASE("client: node_split over the servers' train mask, and shutdown_servers") {
  Job job;
  auto t0 = job.trainer(0, 0);
  auto t1 = job.trainer(1, 1);
  DistGraph g0(*t0), g1(*t1);
  auto s0 = g0.node_split("train_mask");
  auto s1 = g1.node_split("train_mask");
  REQUIRE(s0.is_ok());
  REQUIRE(s1.is_ok());
  // Together: exactly the true ids, in two near-equal sorted slices.
  std::vector<int64_t> expect;
  for (int m = 0; m < 2; ++m) {
    const TensorView* mask = dataset().parts[m]->node_tensor("_N/train_mask");
    REQUIRE(mask);
    for (int64_t i = 0; i < mask->num_rows(); ++i) {
      if (mask->as<uint8_t>()[i]) expect.push_back(dataset().config.node_map[m].start + i);
    }
  }
  std::vector<int64_t> both = *s0;
  both.insert(both.end(), s1->begin(), s1->end());
  CHECK(both == expect);
  CHECK(s0->size() == (expect.size() + 1) / 2);
  auto local = g1.node_split("train_mask", false);
  REQUIRE(local.is_ok());
  CHECK(
      std::all_of(local->begin(), local->end(), [](int64_t v) { return dataset().owner(v) == 1; }));

  t1.reset();  // leaves
  REQUIRE(t0->shutdown_servers("test over").is_ok());
  for (auto& s : job.servers) CHECK(s.wait(15s) == 0);
}

TEST_CASE("client: to_edges expands per-seed counts and refuses counts that do not fit") {
  auto bytes = [](std::vector<int64_t> v) {
    net::ByteBuffer b(v.size() * sizeof(int64_t));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  SampledNeighbors s;
  s.nbr_bytes = bytes({7, 8, 9});
  s.eid_bytes = bytes({70, 80, 90});
  s.counts = {2, 0, 1};
  const std::vector<int64_t> seeds = {1, 2, 3};
  auto in = to_edges(s, seeds, false);
  REQUIRE(in.is_ok());
  CHECK(in->src == std::vector<int64_t>{7, 8, 9});
  CHECK(in->dst == std::vector<int64_t>{1, 1, 3});
  CHECK(in->eid == std::vector<int64_t>{70, 80, 90});
  auto out = to_edges(s, seeds, true);
  REQUIRE(out.is_ok());
  CHECK(out->src == std::vector<int64_t>{1, 1, 3});
  CHECK(out->dst == std::vector<int64_t>{7, 8, 9});
  for (std::vector<int64_t> bad : {std::vector<int64_t>{2, 0}, {2, 0, 2}, {4, -1, 0}}) {
    s.counts = bad;
    auto r = to_edges(s, seeds, false);
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("counts"));
  }
}

// ---------------------------------------------------------------- heterogeneous graphs

namespace {

// A typed graph (docs/heterogeneous.md) in 2 partitions, with the type of every edge by id.
struct HeteroDataset : PartitionedGraph {
  HeteroDataset()
      : PartitionedGraph("hsbm:papers=1500,authors=700,venues=16,topics=30,feat_dim=8,seed=3", 2, "dgld-hetero-data",
                         {"--add-reverse"}) {
    for (const auto& p : parts) {
      for (int64_t j = 0; j < p->num_inner_edges(); ++j) etype_of[p->in_edges().eids[j]] = p->edge_types()[j];
    }
  }
  std::unordered_map<int64_t, int32_t> etype_of;
};

HeteroDataset& hetero_dataset() {
  static HeteroDataset d;
  return d;
}

}  // namespace

TEST_CASE("hetero: per-type ids, tensors and splits through the servers", "[hetero]") {
  auto& d = hetero_dataset();
  REQUIRE(d.config.types.present());
  Job job(1, d.json);
  auto c = job.trainer(0, 0);
  const auto& book = c->partition_book();
  const GraphTypeInfo& types = c->config().types;
  const int paper = types.ntype_id("paper"), author = types.ntype_id("author");
  REQUIRE(paper >= 0);
  REQUIRE(author >= 0);
  REQUIRE(book.num_ntypes() == 4);
  // Homogeneous <-> per-type ids, both ways, over every node.
  std::vector<int64_t> count(4, 0);
  for (int64_t v = 0; v < book.num_nodes(); ++v) {
    int t = -1;
    const int64_t tw = book.to_type_wise(v, &t);
    REQUIRE(t >= 0);
    REQUIRE(book.node_type(v) == t);
    REQUIRE(book.to_homogeneous(t, tw) == v);
    ++count[t];
  }
  for (int t = 0; t < 4; ++t) CHECK(count[t] == types.ntype_count[t]);
  CHECK(book.to_homogeneous(paper, types.ntype_count[paper]) == -1);
  // Edges likewise (DGL's layout: each type's edges of a partition are one range).
  std::vector<int64_t> ecount(types.etypes.size(), 0);
  for (int64_t e = 0; e < book.num_edges(); ++e) {
    int t = -1;
    const int64_t tw = book.edge_to_type_wise(e, &t);
    REQUIRE(t == d.etype_of.at(e));
    REQUIRE(book.etypes().to_homogeneous(t, tw) == e);
    ++ecount[t];
  }
  CHECK(ecount == types.etype_count);

  // "paper/features" has one row per paper, addressed by homogeneous id, the
  // same rows as in the partition files; an author id is refused.
  auto f = DistTensor::open(*c, "paper/features");
  REQUIRE(f.is_ok());
  CHECK(f->ntype() == paper);
  CHECK(f->num_rows() == types.ntype_count[paper]);
  std::vector<int64_t> papers;
  for (int p = 0; p < 2; ++p) {
    for (int64_t v = book.type_range(paper, p).start; v < book.type_range(paper, p).end; ++v) papers.push_back(v);
  }
  auto rows = f->pull_as<float>(papers);
  REQUIRE(rows.is_ok());
  const int64_t dim = f->shape()[1];
  for (size_t i = 0; i < papers.size(); ++i) {
    const int p = book.node_partition(papers[i]);
    const TensorView* t = d.parts[p]->node_tensor("paper/features");
    const int64_t row = papers[i] - book.type_range(paper, p).start;
    REQUIRE(std::memcmp(&(*rows)[i * dim], t->as<float>().data() + row * dim, dim * sizeof(float)) == 0);
  }
  const int64_t an_author = book.type_range(author, 1).start;
  CHECK_FALSE(f->pull(std::vector<int64_t>{an_author}).is_ok());
  CHECK_FALSE(f->pull(std::vector<int64_t>{book.type_range(author, 0).start}).is_ok());

  // node_split of the target type's mask gives papers with the mask set.
  DistGraph g(*c);
  auto train = g.node_split("paper/train_mask");
  REQUIRE(train.is_ok());
  REQUIRE_FALSE(train->empty());
  auto mask = DistTensor::open(*c, "paper/train_mask");
  REQUIRE(mask.is_ok());
  auto bits = mask->pull_as<uint8_t>(*train);
  REQUIRE(bits.is_ok());
  for (size_t i = 0; i < train->size(); ++i) {
    CHECK(book.node_type((*train)[i]) == paper);
    CHECK((*bits)[i] == 1);
  }

  // A created per-type tensor has the type's rows on every machine.
  CreateTensor spec;
  spec.name = "author/emb";
  spec.dtype = DType::float32;
  spec.shape = {types.ntype_count[author], 4};
  auto emb = DistTensor::create(*c, spec);
  INFO(emb.status().to_string());
  REQUIRE(emb.is_ok());
  CHECK(emb->num_rows() == types.ntype_count[author]);
  const std::vector<int64_t> some = {book.type_range(author, 0).start, an_author};
  const std::vector<float> vals = {1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(emb->push(some, vals.data()).is_ok());
  auto back = emb->pull_as<float>(some);
  REQUIRE(back.is_ok());
  CHECK(*back == vals);
  CHECK(emb->destroy().is_ok());
}

TEST_CASE("hetero: sampling with a fanout per edge type through the servers", "[hetero]") {
  auto& d = hetero_dataset();
  Job job(1, d.json);
  auto c = job.trainer(1, 0);
  const auto& book = c->partition_book();
  const int R = d.config.types.num_etypes();
  REQUIRE(R == 8);
  // Seeds of every type from both machines.
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < book.num_nodes(); v += 7) seeds.push_back(v);
  // In-degree of every (node, edge type) in the whole graph.
  std::map<std::pair<int64_t, int32_t>, int64_t> degree;
  for (const auto& [eid, ends] : d.edges) ++degree[{ends.second, d.etype_of.at(eid)}];

  std::vector<int64_t> fanouts = {2, 0, -1, 1, 3, 1, 0, 2};
  DistNeighborSource source(*c);
  SampleOptions opt;
  opt.rng_seed = 11;
  opt.etype_fanouts = fanouts;
  auto e = source.sample(seeds, opt);
  REQUIRE(e.is_ok());
  REQUIRE(e->etype.size() == e->eid.size());
  std::map<std::pair<int64_t, int32_t>, std::set<int64_t>> got;
  for (size_t i = 0; i < e->eid.size(); ++i) {
    const auto& ends = d.edges.at(e->eid[i]);
    REQUIRE(ends.first == e->src[i]);
    REQUIRE(ends.second == e->dst[i]);
    REQUIRE(d.etype_of.at(e->eid[i]) == e->etype[i]);
    REQUIRE(got[{e->dst[i], e->etype[i]}].insert(e->eid[i]).second);  // no edge twice
  }
  int64_t checked = 0;
  for (int64_t s : seeds) {
    for (int32_t r = 0; r < R; ++r) {
      const auto it = degree.find({s, r});
      const int64_t deg = it == degree.end() ? 0 : it->second;
      const int64_t want = fanouts[r] < 0 ? deg : std::min<int64_t>(fanouts[r], deg);
      const auto g = got.find({s, r});
      INFO("seed " << s << " edge type " << r << " degree " << deg);
      CHECK((g == got.end() ? 0 : static_cast<int64_t>(g->second.size())) == want);
      checked += deg > 0;
    }
  }
  CHECK(checked > 100);
  // The same request again: the same edges.
  auto again = source.sample(seeds, opt);
  REQUIRE(again.is_ok());
  CHECK(again->eid == e->eid);
  // A fanout list of the wrong length is an error, not a guess.
  opt.etype_fanouts = {1, 1};
  CHECK_FALSE(source.sample(seeds, opt).is_ok());

  // Blocks keep each edge's type.
  MultiLayerNeighborSampler sampler({2, 2});
  sampler.set_etype_fanouts({std::vector<int64_t>(R, 2), std::vector<int64_t>(R, 3)});
  const std::vector<int64_t> batch(seeds.begin(), seeds.begin() + 40);
  auto mb = sampler.sample(source, batch, 5);
  REQUIRE(mb.is_ok());
  for (const Block& b : mb->blocks) {
    REQUIRE(b.etypes.size() == b.eids.size());
    for (size_t k = 0; k < b.eids.size(); ++k) CHECK(d.etype_of.at(b.eids[k]) == b.etypes[k]);
  }
}

TEST_CASE("row cache: rows found by id with and without a direct id range", "[dist][cache]") {
  // Ids below the range are looked up by array, the one above it by hash;
  // both give the row stored for the id, and misses are counted the same.
  for (const int64_t range : {int64_t{0}, int64_t{100}}) {
    const std::vector<int64_t> ids = {5, 1000, 3, 99};
    auto rows = std::make_unique<uint8_t[]>(ids.size() * 4);
    for (size_t i = 0; i < ids.size() * 4; ++i) rows[i] = static_cast<uint8_t>(i);
    const dgld::client::RowCache cache(4, ids, std::move(rows), range);
    CAPTURE(range);
    CHECK(cache.num_rows() == 4);
    for (size_t i = 0; i < ids.size(); ++i) {
      const uint8_t* r = cache.find(ids[i]);
      REQUIRE(r != nullptr);
      CHECK(r[0] == static_cast<uint8_t>(4 * i));
    }
    CHECK(cache.find(4) == nullptr);
    CHECK(cache.find(100) == nullptr);
    CHECK(cache.find(-1) == nullptr);
    CHECK(cache.hits() == 4);
    CHECK(cache.misses() == 3);
  }
}
