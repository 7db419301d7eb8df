// Benchmark of graph-server against baselines measured in the same run
// (scripts/bench/server.sh): remote pull bandwidth vs a raw TCP stream between
// two processes, local shared-memory pull vs an in-process row gather, and
// sampling through the server vs in-process sampling of the same partition.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <fstream>
#include <iostream>
#include <random>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "client/local_partition.h"
#include "client/server_api.h"
#include "common/ip_config.h"
#include "common/logging.h"
#include "common/memory.h"
#include "common/net/io_threads.h"
#include "common/sampling/neighbor_sampling.h"
#include "common/sampling/thread_pool.h"
#include "tests/support/process.h"

using namespace dgld;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A TCP stream from a forked child process to this one: each round asks for
// `chunk` bytes (the size of one pull reply) and reads them.
class RawTcpPeer {
 public:
  explicit RawTcpPeer(size_t chunk) : chunk_(chunk), buf_(new char[chunk]) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
    listen(ls, 1);
    child_ = fork();
    if (child_ == 0) {
      int c = accept(ls, nullptr, nullptr);
      std::vector<char> out(chunk, 'x');
      char go;
      while (read(c, &go, 1) == 1) {
        size_t off = 0;
        while (off < chunk) {
          ssize_t n = write(c, out.data() + off, chunk - off);
          if (n <= 0) _exit(0);
          off += static_cast<size_t>(n);
        }
      }
      _exit(0);
    }
    close(ls);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawTcpPeer() {
    close(fd_);
    kill(child_, SIGTERM);
    waitpid(child_, nullptr, 0);
  }
  // Bytes received in one round.
  double round() {
    char go = 1;
    if (write(fd_, &go, 1) != 1) return 0;
    size_t off = 0;
    while (off < chunk_) {
      ssize_t n = read(fd_, buf_.get() + off, chunk_ - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    return static_cast<double>(off);
  }

 private:
  size_t chunk_;
  std::unique_ptr<char[]> buf_;
  pid_t child_ = -1;
  int fd_ = -1;
};

// Runs each measurement in turn for short slices until `seconds` have passed
// for each, so a change in background load hits every side alike. A step does
// one unit of work and returns how much (bytes, rows, seeds); the result is
// each side's amount per second of its own time.
std::vector<double> interleaved(double seconds, const std::vector<std::function<double()>>& steps,
                                double slice = 0.1) {
  std::vector<double> amount(steps.size(), 0), spent(steps.size(), 0);
  while (spent[0] < seconds) {
    for (size_t i = 0; i < steps.size(); ++i) {
      auto t0 = Clock::now();
      while (seconds_since(t0) < slice) amount[i] += steps[i]();
      spent[i] += seconds_since(t0);
    }
  }
  std::vector<double> rate(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) rate[i] = amount[i] / spent[i];
  return rate;
}

std::vector<int64_t> random_ids(const IdRange& r, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(n);
  for (auto& id : ids) id = r.start + static_cast<int64_t>(rng() % static_cast<uint64_t>(r.size()));
  return ids;
}

void ratio(nlohmann::json& out, const std::string& name, double value, double target) {
  std::printf("ratio: %s %.3f (target %.2f)\n", name.c_str(), value, target);
  out["ratios"][name] = {{"value", value}, {"target", target}, {"met", value >= target}};
}

}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_large_buffers();
  namespace po = boost::program_options;
  LogOptions log;
  log.program = "bench_server";
  std::string part_config, ip_config, json_out, feature = "_N/features";
  double seconds = 3;
  int pull_rows = 100000, batch = 1000, fanout = 10;
  po::options_description desc("bench_server options");
  desc.add_options()("part-config", po::value(&part_config)->required(), "2-partition config")
      ("ip-config", po::value(&ip_config)->required(), "ip_config with two loopback machines")
      ("seconds", po::value(&seconds)->default_value(seconds), "duration of each measurement")
      ("pull-rows", po::value(&pull_rows)->default_value(pull_rows), "rows per remote pull")
      ("batch", po::value(&batch)->default_value(batch), "seeds per sampling request")
      ("fanout", po::value(&fanout)->default_value(fanout), "sampling fanout")
      ("json", po::value(&json_out), "write results here");
  add_log_options(desc, log);
  po::variables_map vm;
  if (auto o = parse_command_line(argc, argv, "bench_server", "[options]", desc, vm); o != CliOutcome::run) {
    return o == CliOutcome::exit_ok ? 0 : 2;
  }
  if (!setup_logging(log).is_ok()) return 2;
  auto config = load_part_config(part_config);
  auto machines = load_ip_config(ip_config);
  if (!config.is_ok() || !machines.is_ok() || config->num_parts != 2 || machines->size() != 2) {
    std::cerr << "bench_server: need a 2-partition config and a 2-machine ip_config\n";
    return 2;
  }
  testing::TempDir logs("dgld-bench-server");
  std::vector<testing::Process> servers;
  for (int id = 0; id < 2; ++id) {
    servers.push_back(testing::Process::start(
        {(testing::build_root() / "daemons/graph_server/graph-server").string(), "--part-config", part_config,
         "--ip-config", ip_config, "--server-id", std::to_string(id), "--num-server-threads", "2"},
        logs.path() / ("server" + std::to_string(id) + ".log")));
  }
  for (auto& s : servers) {
    if (!s.wait_for_log("listening on", std::chrono::minutes(5))) {
      std::cerr << "graph-server failed to start:\n" << s.log();
      return 1;
    }
  }
  net::IoThreads io(2);
  std::vector<std::unique_ptr<client::ServerConnection>> conns;
  for (int id = 0; id < 2; ++id) {
    auto c = client::ServerConnection::connect(io.context(), (*machines)[id].host, (*machines)[id].base_port, id);
    if (!c.is_ok()) {
      std::cerr << c.status().message() << "\n";
      return 1;
    }
    conns.push_back(std::move(*c));
  }
  auto reg = conns[0]->register_client(client::Role::trainer, 0);
  if (!reg.is_ok() || !conns[1]->hello(reg->client_id, client::Role::trainer, 0).is_ok()) {
    std::cerr << "cannot register with the servers\n";
    return 1;
  }
  nlohmann::json out;
  out["graph"] = config->graph_name;
  out["num_nodes"] = config->num_nodes;

  // 1. Remote pull bandwidth vs raw TCP, same reply size.
  auto ids1 = random_ids(config->node_map[1], static_cast<size_t>(pull_rows), 1);
  auto probe = conns[1]->pull(feature, ids1);
  if (!probe.is_ok()) {
    std::cerr << probe.status().message() << "\n";
    return 1;
  }
  const size_t reply_bytes = probe->data.size();
  const size_t feat_row_bytes = probe->row_bytes();
  std::unique_ptr<uint8_t[]> dest(new uint8_t[reply_bytes]);
  std::memset(dest.get(), 0, reply_bytes);
  bool failed = false;
  RawTcpPeer raw(reply_bytes);
  auto bw = interleaved(seconds, {[&] {
                                    Status st = conns[1]->pull_into(feature, ids1, dest.get(), feat_row_bytes);
                                    if (!st.is_ok()) {
                                      std::cerr << st.message() << "\n";
                                      failed = true;
                                    }
                                    return static_cast<double>(reply_bytes);
                                  },
                                  [&] { return raw.round(); }});
  const double pull_bw = bw[0], tcp_bw = bw[1];

  // 2. Local shared-memory pull vs in-process gather over the same rows.
  auto lp = client::LocalPartition::open(*config, 0, client::default_job_id(*config, (*machines)[0]),
                                         std::chrono::seconds(30));
  if (!lp.is_ok()) {
    std::cerr << lp.status().message() << "\n";
    return 1;
  }
  const TensorView* tv = (*lp)->graph().node_tensor(feature);
  const size_t row_bytes = tv->num_bytes / static_cast<size_t>(tv->num_rows());
  auto ids0 = random_ids(config->node_map[0], 1000, 2);
  std::vector<char> buf(ids0.size() * row_bytes);
  const int64_t start0 = config->node_map[0].start;
  auto rows = interleaved(seconds, {[&] {
                                      if (!(*lp)->gather(feature, ids0, buf.data()).is_ok()) failed = true;
                                      return static_cast<double>(ids0.size());
                                    },
                                    [&] {
                                      for (size_t i = 0; i < ids0.size(); ++i) {
                                        std::memcpy(buf.data() + i * row_bytes,
                                                    tv->data + static_cast<size_t>(ids0[i] - start0) * row_bytes,
                                                    row_bytes);
                                      }
                                      return static_cast<double>(ids0.size());
                                    }});
  const double shm_rate = rows[0], mem_rate = rows[1];

  // 3. Sampling through the server (one request at a time, and the next sent
  // before the previous reply is used: 2 in flight) vs in process, same
  // partition, same kind of seed batches.
  const auto& P = (*lp)->graph();
  AdjacencyView inner;
  const int64_t ni = P.num_inner_nodes();
  inner.indptr = P.in_edges().indptr.first(static_cast<size_t>(ni) + 1);
  inner.indices = P.in_edges().indices.first(static_cast<size_t>(inner.indptr[ni]));
  inner.eids = P.in_edges().eids.first(static_cast<size_t>(inner.indptr[ni]));
  uint64_t round = 0;
  client::SampleRequest req;
  req.spec.fanouts = {fanout};
  auto next_seeds = [&] { return random_ids(config->node_map[0], static_cast<size_t>(batch), 100 + round++); };
  std::deque<std::pair<net::PendingCall, std::vector<int64_t>>> inflight;  // call, its seeds
  // In process: one thread (the baseline), and for reference as many threads
  // as a server spreads one request over (its --num-server-threads, 2 here).
  ThreadPool pool(2);
  auto local_step = [&](ThreadPool* threads) {
    auto seeds = next_seeds();
    for (auto& v : seeds) v -= start0;
    SampleOptions so;
    so.fanout = fanout;
    so.rng_seed = round;
    SampleExtras extras;
    extras.pool = threads;
    auto r = sample_neighbors(inner, seeds, so, extras);
    if (!r.is_ok()) failed = true;
    std::vector<int64_t> src = r->src;
    (void)map_to_global(src, P.node_global_ids());
    return static_cast<double>(seeds.size());
  };
  auto sps = interleaved(seconds, {[&] {
                                     auto seeds = next_seeds();
                                     req.seed = round;
                                     if (!conns[0]->sample_neighbors(seeds, req).is_ok()) failed = true;
                                     return static_cast<double>(seeds.size());
                                   },
                                   [&] {
                                     // Keep 2 requests in flight; each step retires one.
                                     while (inflight.size() < 2) {
                                       auto seeds = next_seeds();
                                       req.seed = round;
                                       inflight.emplace_back(conns[0]->start_sample(seeds, req), seeds);
                                     }
                                     auto& [call, seeds] = inflight.front();
                                     auto r = conns[0]->finish_sample(call, seeds.size());
                                     if (!r.is_ok()) failed = true;
                                     else if (!client::to_edges(*r, seeds, false).is_ok()) failed = true;  // as sample_neighbors
                                     inflight.pop_front();
                                     return static_cast<double>(batch);
                                   },
                                   [&] { return local_step(nullptr); }, [&] { return local_step(&pool); }});
  while (!inflight.empty()) {
    (void)conns[0]->finish_sample(inflight.front().first, inflight.front().second.size());
    inflight.pop_front();
  }
  if (failed) return 1;
  const double remote_sps = sps[0], piped_sps = sps[1], local_sps = sps[2], local2_sps = sps[3];

  std::printf("%-44s %14s %14s\n", "measurement", "dgld", "baseline");
  std::printf("%-44s %11.0f MB/s %11.0f MB/s\n", "remote pull, reply bytes (raw TCP stream)", pull_bw / 1e6, tcp_bw / 1e6);
  std::printf("%-44s %9.2f Mrow/s %9.2f Mrow/s\n", "local pull from shm (in-process gather)", shm_rate / 1e6, mem_rate / 1e6);
  std::printf("%-44s %9.0f seed/s %9.0f seed/s\n", "sampling via server, 1 in flight (in-process)", remote_sps, local_sps);
  std::printf("%-44s %9.0f seed/s %9.0f seed/s\n", "sampling via server, 2 in flight (in-process)", piped_sps, local_sps);
  std::printf("%-44s %9s        %9.0f seed/s\n", "  (in-process with 2 threads, for reference)", "", local2_sps);
  out["reply_bytes"] = reply_bytes;
  out["remote_pull_bytes_per_s"] = pull_bw;
  out["raw_tcp_bytes_per_s"] = tcp_bw;
  out["shm_rows_per_s"] = shm_rate;
  out["inprocess_rows_per_s"] = mem_rate;
  out["server_sampling_seeds_per_s"] = remote_sps;
  out["server_sampling_2_in_flight_seeds_per_s"] = piped_sps;
  out["inprocess_sampling_seeds_per_s"] = local_sps;
  out["inprocess_sampling_2_threads_seeds_per_s"] = local2_sps;
  ratio(out, "remote_pull_vs_raw_tcp", pull_bw / tcp_bw, 0.8);
  ratio(out, "shm_pull_vs_inprocess_gather", shm_rate / mem_rate, 0.8);
  ratio(out, "server_sampling_1_in_flight_vs_inprocess", remote_sps / local_sps, 0.5);
  ratio(out, "server_sampling_2_in_flight_vs_inprocess", piped_sps / local_sps, 0.5);
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  for (int id = 0; id < 2; ++id) {
    if (auto st = conns[id]->stats(); st.is_ok()) out["server_stats"][std::to_string(id)] = nlohmann::json::parse(*st);
  }
  std::printf("server-side handler latency p50: KvPull %s us, SampleNeighbors %s us\n",
              out["server_stats"]["1"]["requests"]["KvPull"]["p50_us"].dump().c_str(),
              out["server_stats"]["0"]["requests"]["SampleNeighbors"]["p50_us"].dump().c_str());
  for (auto& c : conns) (void)c->shutdown("benchmark done");
  for (auto& s : servers) s.wait(std::chrono::seconds(10));
  return 0;
}
