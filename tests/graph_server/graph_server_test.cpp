// graph-server as a real process over real loopback sockets.
#include <catch2/catch.hpp>

#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <set>
#include <future>
#include <thread>
#include <unordered_map>

#include "client/local_partition.h"
#include "client/server_api.h"
#include "common/file_util.h"
#include "common/ip_config.h"
#include "common/net/io_threads.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "schemas/rpc_generated.h"
#include "tests/support/partitioned_graph.h"
#include "tests/support/process.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// One small generated graph in 2 partitions, shared by every test (read-only).
PartitionedGraph& dataset() {
  static PartitionedGraph d("sbm:nodes=6000,avg_degree=8,classes=4,feat_dim=8,seed=3", 2, "dgld-gs-data");
  return d;
}

// A job: graph-server processes for the shared dataset on fresh ports.
struct Job {
  TempDir dir{"dgld-gs-job"};
  uint16_t base;
  int servers_per_machine;
  fs::path ip_config;
  std::deque<Process> servers;  // deque: references stay valid as servers are added
  net::IoThreads io{2};

  explicit Job(int servers_per_machine_ = 1, std::vector<std::string> extra = {}, bool start = true)
      : base(free_port_range(24)), servers_per_machine(servers_per_machine_) {
    ip_config = dir.path() / "ip_config.txt";
    std::ofstream(ip_config) << "127.0.0.1 " << base << "\n127.0.0.1 " << base + 10 << "\n";
    if (!start) return;
    for (int m = 0; m < 2; ++m) {
      for (int j = 0; j < servers_per_machine; ++j) start_server(m * servers_per_machine + j, extra);
    }
    for (auto& s : servers) REQUIRE(s.wait_for_log("listening on", 60s));
  }
  ~Job() {
    for (auto& s : servers) s.signal(SIGTERM);
    for (auto& s : servers) s.wait(10s);
  }
  std::vector<std::string> args(int id, const std::vector<std::string>& extra) const {
    std::vector<std::string> a = {graph_server_bin(), "--part-config", dataset().json.string(), "--ip-config",
                                  ip_config.string(), "--server-id", std::to_string(id), "--num-servers",
                                  std::to_string(servers_per_machine), "--heartbeat-interval-ms", "200",
                                  "--heartbeat-timeout-ms", "1000"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  Process& start_server(int id, const std::vector<std::string>& extra = {}) {
    const std::string log = "server" + std::to_string(id) + "." + std::to_string(servers.size()) + ".log";
    servers.push_back(Process::start(args(id, extra), dir.path() / log));
    return servers.back();
  }
  uint16_t port(int id) const {
    int m = id / servers_per_machine, j = id % servers_per_machine;
    return static_cast<uint16_t>(base + 10 * m + j);
  }
  std::unique_ptr<client::ServerConnection> connect(int id) {
    auto c = client::ServerConnection::connect(io.context(), "127.0.0.1", port(id), id, 10s, 20s);
    REQUIRE(c.is_ok());
    return std::move(*c);
  }
  std::string job_prefix() const { return "dgld.g-" + std::to_string(base) + "."; }
};

// A registered trainer connected to every server of the job.
struct Trainer {
  std::vector<std::unique_ptr<client::ServerConnection>> conns;
  client::Registration reg;
  Trainer(Job& job, int rank = -1, int job_trainers = 0) {
    for (size_t i = 0; i < 2 * static_cast<size_t>(job.servers_per_machine); ++i) {
      conns.push_back(job.connect(static_cast<int>(i)));
    }
    auto r = conns[0]->register_client(client::Role::trainer, 0, -1, rank, job_trainers);
    REQUIRE(r.is_ok());
    reg = *r;
    for (size_t i = 1; i < conns.size(); ++i) REQUIRE(conns[i]->hello(reg.client_id, client::Role::trainer, 0).is_ok());
  }
  // The main server of machine m.
  client::ServerConnection& main(int m, int per_machine = 1) { return *conns[static_cast<size_t>(m * per_machine)]; }
};

std::vector<int64_t> owned_sample(int machine, int count, uint64_t seed) {
  const IdRange r = dataset().config.node_map[machine];
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids;
  for (int i = 0; i < count; ++i) ids.push_back(r.start + static_cast<int64_t>(rng() % r.size()));
  return ids;
}

}  // namespace

TEST_CASE("graph-server: pulls return the partition's feature rows") {
  Job job;
  Trainer t(job);
  for (int m = 0; m < 2; ++m) {
    auto ids = owned_sample(m, 500, m + 1);
    ids.push_back(ids.front());  // duplicates are answered too
    auto rows = t.main(m).pull("_N/features", ids);
    REQUIRE(rows.is_ok());
    CHECK(rows->dtype == DType::float32);
    REQUIRE(rows->row_shape == std::vector<int64_t>{8});
    const TensorView* feat = dataset().parts[m]->node_tensor("_N/features");
    REQUIRE(feat);
    const int64_t start = dataset().config.node_map[m].start;
    for (size_t i = 0; i < ids.size(); ++i) {
      const void* expect = feat->data + (ids[i] - start) * 8 * sizeof(float);
      REQUIRE(std::memcmp(rows->data.data() + i * 32, expect, 32) == 0);
    }
    auto labels = t.main(m).pull("_N/labels", ids);
    REQUIRE(labels.is_ok());
    CHECK(labels->dtype == DType::int64);
  }
}

TEST_CASE("graph-server: degrees, find_edges and graph info match the partition") {
  Job job;
  Trainer t(job);
  auto info = t.main(1).graph_info();
  REQUIRE(info.is_ok());
  CHECK(info->graph_name == "g");
  CHECK(info->part_id == 1);
  CHECK(info->num_nodes == dataset().config.num_nodes);
  const auto& P = *dataset().parts[1];
  auto ids = owned_sample(1, 300, 7);
  auto in = t.main(1).degrees(ids, false);
  auto out = t.main(1).degrees(ids, true);
  REQUIRE(in.is_ok());
  REQUIRE(out.is_ok());
  const int64_t start = dataset().config.node_map[1].start;
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK((*in)[i] == P.in_edges().degree(ids[i] - start));
    CHECK((*out)[i] == P.out_edges().degree(ids[i] - start));
  }
  const IdRange er = dataset().config.edge_map[1];
  std::vector<int64_t> eids = {er.start, er.start + 1, er.end - 1, (er.start + er.end) / 2};
  auto fe = t.main(1).find_edges(eids);
  REQUIRE(fe.is_ok());
  for (size_t i = 0; i < eids.size(); ++i) {
    CHECK(fe->src[i] == dataset().edges.at(eids[i]).first);
    CHECK(fe->dst[i] == dataset().edges.at(eids[i]).second);
  }
}

TEST_CASE("graph-server: sampling returns real edges, respects fanout, reproduces") {
  Job job;
  Trainer t(job);
  for (int m = 0; m < 2; ++m) {
    auto seeds = owned_sample(m, 400, 11 + m);
    std::sort(seeds.begin(), seeds.end());
    seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
    client::SampleRequest req;
    req.spec.fanouts = {3};
    req.seed = 42;
    auto a = t.main(m).sample_neighbors(seeds, req);
    REQUIRE(a.is_ok());
    std::map<int64_t, int> per_seed;
    std::set<int64_t> seen;
    for (size_t i = 0; i < a->eid.size(); ++i) {
      auto e = dataset().edges.find(a->eid[i]);
      REQUIRE(e != dataset().edges.end());
      CHECK(e->second.first == a->src[i]);
      CHECK(e->second.second == a->dst[i]);
      CHECK(seen.insert(a->eid[i]).second);  // without replacement: no duplicate edges
      ++per_seed[a->dst[i]];
    }
    auto deg = t.main(m).degrees(seeds, false);
    REQUIRE(deg.is_ok());
    for (size_t i = 0; i < seeds.size(); ++i) CHECK(per_seed[seeds[i]] == std::min<int64_t>(3, (*deg)[i]));
    auto b = t.main(m).sample_neighbors(seeds, req);
    REQUIRE(b.is_ok());
    CHECK(a->eid == b->eid);
    req.spec.fanouts = {-1};
    auto all = t.main(m).sample_neighbors(seeds, req);
    REQUIRE(all.is_ok());
    int64_t total = 0;
    for (int64_t d : *deg) total += d;
    CHECK(static_cast<int64_t>(all->eid.size()) == total);
  }
}

TEST_CASE("graph-server: DistTensor create, push, pull, list, delete") {
  Job job;
  Trainer t(job);
  auto& s = t.main(0);
  client::CreateTensor spec{"emb", DType::float32, {dataset().config.num_nodes, 4}};
  spec.init = client::Init::uniform;
  spec.init_a = -1;
  spec.init_b = 1;
  spec.seed = 5;
  auto created = s.create_tensor(spec);
  REQUIRE(created.is_ok());
  CHECK(*created);
  auto again = s.create_tensor(spec);
  REQUIRE(again.is_ok());
  CHECK_FALSE(*again);  // collective create: the second caller attaches
  auto ids = owned_sample(0, 50, 3);
  auto before = s.pull("emb", ids);
  REQUIRE(before.is_ok());
  const float* f = reinterpret_cast<const float*>(before->data.data());
  bool nonzero = false;
  for (size_t i = 0; i < ids.size() * 4; ++i) {
    CHECK(f[i] >= -1.0f);
    CHECK(f[i] <= 1.0f);
    nonzero |= f[i] != 0;
  }
  CHECK(nonzero);
  std::vector<float> rows(ids.size() * 4);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  std::vector<int64_t> uniq(ids.begin(), ids.end());
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  rows.resize(uniq.size() * 4);
  REQUIRE(s.push("emb", uniq, DType::float32, rows.data(), 16).is_ok());
  auto after = s.pull("emb", uniq);
  REQUIRE(after.is_ok());
  CHECK(std::memcmp(after->data.data(), rows.data(), rows.size() * 4) == 0);
  // Fire-and-forget push, then a synchronous call on the same connection orders after it.
  std::vector<float> twos(uniq.size() * 4, 2.0f);
  REQUIRE(s.push("emb", uniq, DType::float32, twos.data(), 16, false).is_ok());
  auto after2 = s.pull("emb", uniq);
  REQUIRE(after2.is_ok());
  CHECK(reinterpret_cast<const float*>(after2->data.data())[0] == 2.0f);

  auto list = s.list_tensors();
  REQUIRE(list.is_ok());
  bool found = false;
  for (const auto& i : *list) {
    if (i.name == "emb") {
      found = true;
      CHECK(i.shape == std::vector<int64_t>{dataset().config.node_map[0].size(), 4});
      CHECK(i.shm_name.find("emb") != std::string::npos);
    }
  }
  CHECK(found);
  auto clash = s.create_tensor(client::CreateTensor{"emb", DType::float32, {dataset().config.num_nodes, 5}});
  REQUIRE_FALSE(clash.is_ok());
  CHECK_THAT(clash.status().message(), Catch::Contains("already exists with another"));
  REQUIRE(s.delete_tensor("emb").is_ok());
  auto gone = s.pull("emb", uniq);
  REQUIRE_FALSE(gone.is_ok());
  CHECK_THAT(gone.status().message(), Catch::Contains("no tensor named 'emb'"));
}

TEST_CASE("graph-server: bad requests are clear errors and the server keeps serving") {
  Job job;
  Trainer t(job);
  auto& s = t.main(0);
  auto ids = owned_sample(0, 5, 1);

  auto unknown = s.pull("_N/nope", ids);
  REQUIRE_FALSE(unknown.is_ok());
  CHECK(unknown.status().code() == StatusCode::not_found);
  CHECK_THAT(unknown.status().message(), Catch::Contains("graph-server 0: no tensor named '_N/nope'"));

  std::vector<int64_t> foreign = {dataset().config.node_map[1].start};
  auto out_of_range = s.pull("_N/features", foreign);
  REQUIRE_FALSE(out_of_range.is_ok());
  CHECK_THAT(out_of_range.status().message(), Catch::Contains("is not owned by machine 0"));

  std::vector<int64_t> neg = {-1};
  CHECK_FALSE(s.sample_neighbors(neg, {}).is_ok());
  CHECK_FALSE(s.degrees(foreign, false).is_ok());

  std::vector<double> wrong(ids.size() * 8);
  Status st = s.push("_N/features", ids, DType::float64, wrong.data(), 64);
  REQUIRE_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Catch::Contains("rows are float64, the tensor is float32"));
  std::vector<float> short_rows(3);
  st = s.push("_N/features", ids, DType::float32, short_rows.data(), 2);
  REQUIRE_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Catch::Contains("expected 5 rows of 32 bytes"));

  // A connection that never registered is refused.
  auto stranger = job.connect(0);
  auto refused = stranger->pull("_N/features", ids);
  REQUIRE_FALSE(refused.is_ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("unregistered client"));
  auto bad_hello = stranger->hello(12345, client::Role::trainer, 0);
  REQUIRE_FALSE(bad_hello.is_ok());
  CHECK_THAT(bad_hello.message(), Catch::Contains("client 12345 is not registered"));

  // Still serving.
  CHECK(s.pull("_N/features", ids).is_ok());
  auto stats = s.stats();
  REQUIRE(stats.is_ok());
  CHECK_THAT(*stats, Catch::Contains("\"KvPull\""));
}

TEST_CASE("graph-server: barriers, heartbeats and dropped clients") {
  Job job;
  Trainer a(job), b(job);
  CHECK(a.reg.rank == 0);
  CHECK(b.reg.rank == 1);
  // Catch's assertions are for the test's own thread: b's result is checked here.
  auto b_start = std::async(std::launch::async,
                            [&] { return b.conns[0]->barrier(b.reg.client_id, client::Role::trainer, "start", 10s); });
  CHECK(a.conns[0]->barrier(a.reg.client_id, client::Role::trainer, "start", 10s).is_ok());
  CHECK(b_start.get().is_ok());

  SECTION("a client that stops heartbeating fails the barrier, naming it") {
    std::atomic<bool> run{true};
    std::thread hb([&] {
      while (run) {
        (void)a.conns[0]->heartbeat(a.reg.client_id);
        std::this_thread::sleep_for(100ms);
      }
    });
    auto t0 = std::chrono::steady_clock::now();
    Status st = a.conns[0]->barrier(a.reg.client_id, client::Role::trainer, "epoch", 20s);
    run = false;
    hb.join();
    REQUIRE_FALSE(st.is_ok());
    CHECK_THAT(st.message(), Catch::Contains("trainer 1 (client " + std::to_string(b.reg.client_id)));
    CHECK_THAT(st.message(), Catch::Contains("sent no heartbeat"));
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  }
  SECTION("a client whose connection drops fails the barrier, naming it") {
    b.conns.clear();
    Status st = a.conns[0]->barrier(a.reg.client_id, client::Role::trainer, "epoch", 20s);
    REQUIRE_FALSE(st.is_ok());
    CHECK_THAT(st.message(), Catch::Contains("trainer 1"));
    CHECK_THAT(st.message(), Catch::Contains("lost its connection"));
  }
  SECTION("a client that leaves does not break later barriers") {
    REQUIRE(b.conns[0]->leave(b.reg.client_id).is_ok());
    CHECK(a.conns[0]->barrier(a.reg.client_id, client::Role::trainer, "end", 10s).is_ok());
  }
}

TEST_CASE("graph-server: a barrier that cannot complete times out listing who is missing") {
  Job job(1, {}, false);
  job.start_server(0, {"--num-clients", "2"});
  job.start_server(1);
  for (auto& s : job.servers) REQUIRE(s.wait_for_log("listening on", 60s));
  Trainer a(job);
  std::atomic<bool> run{true};
  std::thread hb([&] {
    while (run) {
      (void)a.conns[0]->heartbeat(a.reg.client_id);
      std::this_thread::sleep_for(100ms);
    }
  });
  Status st = a.conns[0]->barrier(a.reg.client_id, client::Role::trainer, "start", 800ms);
  run = false;
  hb.join();
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.code() == StatusCode::timeout);
  CHECK_THAT(st.message(), Catch::Contains("1 of 2 arrived"));
}

TEST_CASE("graph-server: a trainer barrier waits for every trainer the job announced, registered or not") {
  // No --num-clients: the trainers' own count (DGLD_NUM_TRAINERS) is what
  // the coordinator waits for. A first trainer at a barrier before its peer
  // registered used to pass it alone, and the two then met different
  // barriers (a flaky hang of the Python DistEmbedding test).
  Job job;
  Trainer a(job, 0, 2);
  auto early = std::async(std::launch::async,
                          [&] { return a.conns[0]->barrier(a.reg.client_id, client::Role::trainer, "start", 10s); });
  CHECK(early.wait_for(300ms) == std::future_status::timeout);  // alone: it waits
  Trainer b(job, 1, 2);
  CHECK(b.conns[0]->barrier(b.reg.client_id, client::Role::trainer, "start", 10s).is_ok());
  CHECK(early.get().is_ok());
  // A third trainer of a 2-trainer job is refused.
  auto extra = job.connect(0)->register_client(client::Role::trainer, 0, -1, -1, 2);
  REQUIRE_FALSE(extra.is_ok());
  CHECK_THAT(extra.status().message(), Catch::Contains("beyond the 2 the coordinator expects"));
}

TEST_CASE("graph-server: a backup server answers while the main server is stopped") {
  Job job(2);
  Trainer t(job);
  auto ids = owned_sample(0, 100, 9);
  auto& main0 = *t.conns[0];
  auto& backup0 = *t.conns[1];
  auto expect = main0.pull("_N/features", ids);
  REQUIRE(expect.is_ok());
  job.servers[0].signal(SIGSTOP);
  auto got = backup0.pull("_N/features", ids);
  REQUIRE(got.is_ok());
  CHECK(std::memcmp(got->data.data(), expect->data.data(), ids.size() * 32) == 0);
  client::SampleRequest req;
  req.spec.fanouts = {2};
  CHECK(backup0.sample_neighbors(ids, req).is_ok());
  // A push through the backup lands in the shared memory the main server serves.
  std::vector<int64_t> one = {ids[0]};
  std::vector<float> row(8, 7.5f);
  REQUIRE(backup0.push("_N/features", one, DType::float32, row.data(), 32).is_ok());
  auto create = backup0.create_tensor(client::CreateTensor{"x", DType::float32, {dataset().config.num_nodes, 1}});
  REQUIRE_FALSE(create.is_ok());
  CHECK_THAT(create.status().message(), Catch::Contains("is a backup server"));
  job.servers[0].signal(SIGCONT);
  auto seen = main0.pull("_N/features", one);
  REQUIRE(seen.is_ok());
  CHECK(reinterpret_cast<const float*>(seen->data.data())[3] == 7.5f);
}

TEST_CASE("graph-server: a client killed mid-request does not disturb the server") {
  Job job;
  Trainer t(job);
  pid_t child = fork();
  if (child == 0) {
    // Connect, send the first bytes of a frame and die.
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(job.port(0));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const char partial[] = "DGLD\x01\x00\x1e\x00";
      (void)!write(fd, partial, 8);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  auto ids = owned_sample(0, 10, 2);
  CHECK(t.main(0).pull("_N/features", ids).is_ok());
  CHECK(job.servers[0].running());
}

TEST_CASE("graph-server: start-up failures are clear and leave nothing behind") {
  SECTION("port already in use") {
    Job job(1, {}, false);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(job.base);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(fd, 1) == 0);
    auto& s = job.start_server(0);
    CHECK(s.wait(30s) == 1);
    CHECK_THAT(s.log(), Catch::Contains("cannot listen on 127.0.0.1:" + std::to_string(job.base)));
    close(fd);
    CHECK(shm_segments(job.job_prefix()).empty());
  }
  SECTION("corrupt partition file") {
    TempDir copy("dgld-gs-corrupt");
    fs::copy(dataset().json.parent_path(), copy.path() / "parts", fs::copy_options::recursive);
    const fs::path graph = copy.path() / "parts" / dataset().config.parts[0].part_graph;
    {
      std::fstream f(graph, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(fs::file_size(graph) - 100));
      char c = 0;
      f.read(&c, 1);
      f.seekp(static_cast<std::streamoff>(fs::file_size(graph) - 100));
      c = static_cast<char>(c ^ 0x5a);
      f.write(&c, 1);
    }
    Job job(1, {}, false);
    auto a = job.args(0, {});
    a[2] = (copy.path() / "parts/g.json").string();
    job.servers.push_back(Process::start(a, job.dir.path() / "corrupt.log"));
    auto& s = job.servers.back();
    CHECK(s.wait(30s) == 1);
    CHECK_THAT(s.log(), Catch::Contains(graph.string()));
    CHECK_THAT(s.log(), Catch::Contains("checksum"));
  }
  SECTION("ip_config and partition config disagree") {
    Job job(1, {}, false);
    std::ofstream(job.ip_config) << "127.0.0.1 " << job.base << "\n";
    auto& s = job.start_server(0);
    CHECK(s.wait(30s) == 1);
    CHECK_THAT(s.log(), Catch::Contains("lists 1 machines but"));
  }
}

TEST_CASE("graph-server: shared memory is cleaned on every exit path; stale segments are replaced") {
  Job job(1, {}, false);
  auto& s0 = job.start_server(0);
  job.start_server(1);
  REQUIRE(s0.wait_for_log("listening on", 60s));
  CHECK_FALSE(shm_segments(job.job_prefix()).empty());
  s0.signal(SIGKILL);
  s0.wait(10s);
  CHECK_FALSE(shm_segments(job.job_prefix() + "m0").empty());  // left behind by the killed run
  auto& again = job.start_server(0);
  REQUIRE(again.wait_for_log("listening on", 60s));
  CHECK_THAT(again.log(), Catch::Contains("stale"));
  {
    auto c = job.connect(0);
    REQUIRE(c->shutdown("test done").is_ok());
  }
  CHECK(again.wait(10s) == 0);
  CHECK(shm_segments(job.job_prefix() + "m0").empty());
  job.servers[1].signal(SIGTERM);
  CHECK(job.servers[1].wait(10s) == 0);
  CHECK(shm_segments(job.job_prefix()).empty());
}

TEST_CASE("graph-server: DGL's environment variables stand in for flags") {
  Job job(1, {}, false);
  std::map<std::string, std::string> env = {{"DGL_CONF_PATH", dataset().json.string()},
                                            {"DGL_IP_CONFIG", job.ip_config.string()},
                                            {"DGL_SERVER_ID", "1"},
                                            {"DGL_NUM_SERVER", "1"}};
  job.servers.push_back(Process::start({graph_server_bin()}, job.dir.path() / "env.log", env));
  REQUIRE(job.servers.back().wait_for_log("listening on 127.0.0.1:" + std::to_string(job.base + 10), 60s));
}

TEST_CASE("graph-server: co-located clients read shared memory with no request") {
  Job job;
  Trainer t(job);
  auto machines = load_ip_config(job.ip_config);
  REQUIRE(machines.is_ok());
  auto lp = client::LocalPartition::open(dataset().config, 0, client::default_job_id(dataset().config, (*machines)[0]),
                                         10s);
  REQUIRE(lp.is_ok());
  auto ids = owned_sample(0, 200, 21);
  std::vector<float> local(ids.size() * 8);
  REQUIRE((*lp)->gather("_N/features", ids, local.data()).is_ok());
  auto remote = t.main(0).pull("_N/features", ids);
  REQUIRE(remote.is_ok());
  CHECK(std::memcmp(local.data(), remote->data.data(), local.size() * 4) == 0);
  // A DistTensor created at run time, written through the server, read locally.
  REQUIRE(t.main(0).create_tensor(client::CreateTensor{"h", DType::float32, {dataset().config.num_nodes, 2}}).is_ok());
  std::vector<int64_t> one = {ids[0]};
  std::vector<float> row = {1.5f, -2.5f};
  REQUIRE(t.main(0).push("h", one, DType::float32, row.data(), 8).is_ok());
  std::vector<float> back(2);
  REQUIRE((*lp)->gather("h", one, back.data()).is_ok());
  CHECK(back == row);
  std::vector<int64_t> foreign = {dataset().config.node_map[1].start};
  Status st = (*lp)->gather("_N/features", foreign, local.data());
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.code() == StatusCode::invalid_argument);
  CHECK_FALSE((*lp)->tensor("missing").is_ok());
}

TEST_CASE("graph-server: weighted and out-edge sampling") {
  Job job;
  Trainer t(job);
  auto& s = t.main(0);
  const IdRange er = dataset().config.edge_map[0];
  client::CreateTensor w{"w", DType::float32, {dataset().config.num_edges, 1}};
  w.policy = client::Policy::edge;
  REQUIRE(s.create_tensor(w).is_ok());
  // Weight 1 on every third owned edge, 0 elsewhere: only those may be sampled.
  std::vector<int64_t> eids;
  std::vector<float> ones;
  for (int64_t e = er.start; e < er.end; e += 3) {
    eids.push_back(e);
    ones.push_back(1.0f);
  }
  REQUIRE(s.push("w", eids, DType::float32, ones.data(), 4).is_ok());
  auto seeds = owned_sample(0, 200, 5);
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
  client::SampleRequest req;
  req.spec.fanouts = {2};
  req.spec.prob = "w";
  auto r = s.sample_neighbors(seeds, req);
  REQUIRE(r.is_ok());
  CHECK_FALSE(r->eid.empty());
  for (int64_t e : r->eid) CHECK((e - er.start) % 3 == 0);
  req.spec.prob = "_N/features";
  auto bad = s.sample_neighbors(seeds, req);
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("is not an edge tensor"));

  // Out-edges: every sampled edge leaves a seed.
  client::SampleRequest out;
  out.spec.fanouts = {-1};
  out.spec.out_edges = true;
  auto o = s.sample_neighbors(seeds, out);
  REQUIRE(o.is_ok());
  auto odeg = s.degrees(seeds, true);
  REQUIRE(odeg.is_ok());
  std::set<int64_t> seed_set(seeds.begin(), seeds.end());
  int64_t total = 0;
  for (int64_t d : *odeg) total += d;
  CHECK(static_cast<int64_t>(o->eid.size()) == total);
  for (size_t i = 0; i < o->eid.size(); ++i) {
    CHECK(seed_set.count(o->src[i]) == 1);
    auto e = dataset().edges.find(o->eid[i]);
    REQUIRE(e != dataset().edges.end());
    CHECK(e->second == std::make_pair(o->src[i], o->dst[i]));
  }
}

TEST_CASE("graph-server: caps on ids per request, tensor size and connections are clear errors") {
  Job job(1, {"--max-ids-per-request", "100", "--max-tensor-bytes", "4096", "--max-connections", "3"});
  Trainer t(job);  // holds 2 connections: one to each machine's server
  auto& s0 = t.main(0);
  const auto ids = owned_sample(0, 101, 1);
  auto pull = s0.pull("_N/features", ids);
  REQUIRE_FALSE(pull.is_ok());
  CHECK(pull.status().code() == StatusCode::resource_exhausted);
  CHECK(pull.status().message().find("101 ids in one request, over the cap of 100 (--max-ids-per-request)") !=
        std::string::npos);
  CHECK(s0.pull("_N/features", std::span<const int64_t>(ids.data(), 100)).is_ok());  // at the cap: fine

  client::CreateTensor spec;
  spec.name = "too_big";
  spec.dtype = DType::float32;
  spec.shape = {dataset().config.num_nodes, 16};
  auto created = s0.create_tensor(spec);
  REQUIRE_FALSE(created.is_ok());
  CHECK(created.status().code() == StatusCode::resource_exhausted);
  CHECK(created.status().message().find("(--max-tensor-bytes)") != std::string::npos);

  // Server 0 already serves one connection of the trainer; two more fill its cap.
  auto c2 = job.connect(0);
  auto c3 = job.connect(0);
  CHECK(c3->graph_info().is_ok());
  net::ConnectOptions co;
  co.timeout = 2s;
  auto c4 = net::RpcClient::connect(job.io.context(), "127.0.0.1", job.port(0), "graph-server 0", co);
  if (c4.is_ok()) {  // TCP connects, then the server closes it
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(dgld::fbs::CreatePing(fbb, 0));
    CHECK_FALSE((*c4)->call(net::OutMessage(dgld::fbs::MessageKind::Ping, fbb), 5s).is_ok());
  }
  CHECK(job.servers[0].wait_for_log("connections already open (cap)", 5s));
  CHECK(s0.graph_info().is_ok());  // the server keeps serving the others
}

TEST_CASE("dgld-stats prints every server's requests, bytes and memory") {
  Job job;
  Trainer t(job);
  REQUIRE(t.main(0).pull("_N/features", owned_sample(0, 10, 2)).is_ok());
  const fs::path out = job.dir.path() / "stats.txt";
  const std::string cmd = "'" + (build_root() / "launcher/stats/dgld-stats").string() + "' --ip-config '" +
                          job.ip_config.string() + "' > '" + out.string() + "' 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto text = read_file(out);
  REQUIRE(text.is_ok());
  INFO(*text);
  CHECK(text->find("server 0 (machine 0) at 127.0.0.1:" + std::to_string(job.port(0))) != std::string::npos);
  CHECK(text->find("server 1 (machine 1)") != std::string::npos);
  CHECK(text->find("KvPull") != std::string::npos);
  CHECK(text->find("bytes in") != std::string::npos);
  // Where its memory goes: the partition files' bytes and the tensors it serves.
  CHECK(text->find("memory: peak RSS") != std::string::npos);
  CHECK(text->find("partition files") != std::string::npos);
  CHECK(text->find("partition files 0.0 MiB") == std::string::npos);
  CHECK(text->find("tensors 0.0 MiB") == std::string::npos);
  // A server that is down is an error naming it, and the exit code says so.
  job.servers[1].signal(SIGTERM);
  REQUIRE(job.servers[1].wait(10s).has_value());
  const std::string cmd2 = "'" + (build_root() / "launcher/stats/dgld-stats").string() + "' --ip-config '" +
                           job.ip_config.string() + "' --timeout-ms 500 > '" + out.string() + "' 2>&1";
  const int rc = std::system(cmd2.c_str());
  CHECK(WEXITSTATUS(rc) == 1);
  CHECK(read_file(out)->find("dgld-stats: server 1 at 127.0.0.1:" + std::to_string(job.port(1))) != std::string::npos);
}
