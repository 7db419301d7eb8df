// Load test of two graph-servers (scripts/bench/load.sh, and a short run in
// `meson test --suite fault`): N concurrent clients, each with its own
// connections to both servers, registered with the coordinator and sending
// heartbeats, pull random feature rows and push random rows of a tensor of
// their own for a fixed time. Each push is read back and compared (a client
// owns the rows whose id = client mod N, so nobody else writes them). Reports
// every failed call or mismatch, client-side latency percentiles per request
// kind after the warm-up, and each server's resident memory (VmRSS, and
// RssAnon: the heap without shared memory) sampled every 250 ms.
// Exit code 1 when anything failed.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "client/server_api.h"
#include "common/ip_config.h"
#include "common/logging.h"
#include "common/net/io_threads.h"
#include "common/part_config.h"
#include "tests/support/partitioned_graph.h"
#include "tests/support/process.h"

using namespace dgld;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// VmRSS and RssAnon of a process, in bytes (0 when unreadable).
struct Rss {
  int64_t total = 0, anon = 0;
};
Rss read_rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  Rss r;
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kb) r.total = kb * 1024;
    else if (key == "RssAnon:" && in >> kb) r.anon = kb * 1024;
  }
  return r;
}

// Request kinds a client times.
enum Kind { kPull, kPush, kReadBack, kHeartbeat, kNumKinds };
const char* const kKindNames[kNumKinds] = {"pull features", "push", "read back", "heartbeat"};

struct ClientResult {
  std::vector<std::vector<float>> latency_us = std::vector<std::vector<float>>(kNumKinds);  // after warm-up
  uint64_t requests[kNumKinds] = {};
  uint64_t errors = 0, mismatches = 0;
  uint64_t rows_pulled = 0, rows_pushed = 0;
  std::vector<std::string> messages;  // the first few errors
};

std::string fmt_value(double v, bool whole) {
  char buf[64];
  std::snprintf(buf, sizeof buf, whole ? "%.0f" : "%.3f", v);
  return buf;
}

double percentile(std::vector<float>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

struct Settings {
  int clients = 16;
  double seconds = 60, warmup = 10;
  int pull_rows = 256, push_rows = 64, dim = 16;
  std::string feature = "_N/features", tensor = "load_rows";
};

// One client: its own connections to both servers, until `end`.
void run_client(int c, const Settings& s, net::asio::io_context& io, const std::vector<MachineAddress>& machines,
                const PartitionConfig& config, Clock::time_point warm, Clock::time_point end, ClientResult& r) {
  auto fail = [&](const std::string& what, const Status& st) {
    ++r.errors;
    if (r.messages.size() < 5) r.messages.push_back("client " + std::to_string(c) + ": " + what + ": " + st.to_string());
  };
  std::vector<std::unique_ptr<client::ServerConnection>> conns;
  for (int m = 0; m < 2; ++m) {
    auto conn = client::ServerConnection::connect(io, machines[m].host, machines[m].base_port, m,
                                                  std::chrono::seconds(10), std::chrono::seconds(10));
    if (!conn.is_ok()) return fail("connect to server " + std::to_string(m), conn.status());
    conns.push_back(std::move(*conn));
  }
  auto reg = conns[0]->register_client(client::Role::trainer, c % 2);
  if (!reg.is_ok()) return fail("register", reg.status());
  if (Status st = conns[1]->hello(reg->client_id, client::Role::trainer, c % 2); !st.is_ok()) return fail("hello", st);

  std::mt19937_64 rng(1000 + static_cast<uint64_t>(c));
  const int64_t N = s.clients;
  std::vector<int64_t> ids;
  std::vector<float> rows, back(static_cast<size_t>(s.push_rows * s.dim));
  std::vector<uint8_t> pulled;
  auto timed = [&](Kind k, Clock::time_point t0, bool ok) {
    ++r.requests[k];
    if (ok && Clock::now() >= warm) {
      r.latency_us[k].push_back(static_cast<float>(std::chrono::duration<double, std::micro>(Clock::now() - t0).count()));
    }
  };
  auto last_heartbeat = Clock::now();
  for (uint64_t iter = 0; Clock::now() < end; ++iter) {
    if (Clock::now() - last_heartbeat >= std::chrono::seconds(1)) {
      last_heartbeat = Clock::now();
      auto hb = conns[0]->heartbeat(reg->client_id);
      timed(kHeartbeat, last_heartbeat, hb.is_ok());
      if (!hb.is_ok()) fail("heartbeat", hb.status());
      else if (!hb->empty()) fail("heartbeat", internal_error("the coordinator dropped clients: " + hb->front()));
    }
    const int m = static_cast<int>(rng() % 2);
    const IdRange range = config.node_map[static_cast<size_t>(m)];
    if (rng() % 2 == 0) {
      // Random feature rows of machine m.
      ids.resize(static_cast<size_t>(s.pull_rows));
      for (auto& id : ids) id = range.start + static_cast<int64_t>(rng() % static_cast<uint64_t>(range.size()));
      const auto t0 = Clock::now();
      auto p = conns[static_cast<size_t>(m)]->pull(s.feature, ids);
      timed(kPull, t0, p.is_ok());
      if (!p.is_ok()) {
        fail("pull " + s.feature, p.status());
        continue;
      }
      r.rows_pulled += ids.size();
      continue;
    }
    // Rows of this client in machine m's range (id = k * N + c), then read back.
    const int64_t k_lo = (range.start - c + N - 1) / N, k_hi = (range.end - 1 - c) / N;
    if (k_hi < k_lo) continue;
    ids.resize(static_cast<size_t>(s.push_rows));
    for (auto& id : ids) id = (k_lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(k_hi - k_lo + 1))) * N + c;
    rows.resize(ids.size() * static_cast<size_t>(s.dim));
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int j = 0; j < s.dim; ++j) {
        // Exact in float32: a duplicate id in the batch gets the same row.
        rows[i * static_cast<size_t>(s.dim) + static_cast<size_t>(j)] =
            static_cast<float>((iter % 4096) * 64 + static_cast<uint64_t>(j)) + static_cast<float>(ids[i] % 7) * 0.25f;
      }
    }
    auto t0 = Clock::now();
    Status st = conns[static_cast<size_t>(m)]->push(s.tensor, ids, DType::float32, rows.data(),
                                                    static_cast<size_t>(s.dim) * sizeof(float));
    timed(kPush, t0, st.is_ok());
    if (!st.is_ok()) {
      fail("push " + s.tensor, st);
      continue;
    }
    r.rows_pushed += ids.size();
    t0 = Clock::now();
    st = conns[static_cast<size_t>(m)]->pull_into(s.tensor, ids, back.data(), static_cast<size_t>(s.dim) * sizeof(float));
    timed(kReadBack, t0, st.is_ok());
    if (!st.is_ok()) {
      fail("read back " + s.tensor, st);
      continue;
    }
    if (std::memcmp(back.data(), rows.data(), rows.size() * sizeof(float)) != 0) {
      ++r.mismatches;
      if (r.messages.size() < 5) {
        r.messages.push_back("client " + std::to_string(c) + ": rows read back from server " + std::to_string(m) +
                             " differ from the rows it pushed (iteration " + std::to_string(iter) + ")");
      }
    }
  }
  if (Status st = conns[0]->leave(reg->client_id); !st.is_ok()) fail("leave", st);
}

// `ratio: <name> <value> (target <op> <target>)`, as the other benchmarks print.
void ratio(nlohmann::json& out, const std::string& name, double value, const std::string& op, double target) {
  const bool met = op == "<=" ? value <= target : op == "==" ? value == target : value >= target;
  const bool whole = value == std::floor(value);
  std::printf("ratio: %s %s (target %s%g)\n", name.c_str(), fmt_value(value, whole).c_str(),
              op == "==" ? "" : (op + " ").c_str(), target);
  out["ratios"][name] = {{"value", value}, {"target", target}, {"op", op}, {"met", met}};
}

// Two graph-servers, asked to stop (SIGTERM: they remove their shared memory)
// on every way out of main; Process kills what is still running after 10 s.
struct Servers {
  std::vector<testing::Process> procs;
  ~Servers() {
    for (auto& p : procs) p.signal(SIGTERM);
    for (auto& p : procs) p.wait(std::chrono::seconds(10));
  }
};

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  LogOptions log;
  log.program = "bench_load";
  Settings s;
  std::string part_config, json_out, job_id = "load-" + std::to_string(::getpid());
  int server_threads = 2;
  po::options_description desc("bench_load options");
  desc.add_options()("part-config", po::value(&part_config)->required(), "2-partition config (a float32 _N/features)")
      ("clients", po::value(&s.clients)->default_value(s.clients), "concurrent clients")
      ("seconds", po::value(&s.seconds)->default_value(s.seconds), "length of the run")
      ("warmup", po::value(&s.warmup)->default_value(s.warmup), "seconds before latency and RSS growth count")
      ("pull-rows", po::value(&s.pull_rows)->default_value(s.pull_rows), "feature rows per pull")
      ("push-rows", po::value(&s.push_rows)->default_value(s.push_rows), "rows per push (each read back)")
      ("server-threads", po::value(&server_threads)->default_value(server_threads), "graph-server handler threads")
      ("job-id", po::value(&job_id)->default_value(job_id), "the servers' --job-id (names their shared memory)")
      ("json", po::value(&json_out), "write results here");
  add_log_options(desc, log);
  po::variables_map vm;
  if (auto o = parse_command_line(argc, argv, "bench_load", "[options]", desc, vm); o != CliOutcome::run) {
    return o == CliOutcome::exit_ok ? 0 : 2;
  }
  if (!setup_logging(log).is_ok()) return 2;
  if (s.clients < 1 || s.seconds <= s.warmup || s.warmup < 0 || s.pull_rows < 1 || s.push_rows < 1) {
    std::cerr << "bench_load: need --clients >= 1, 0 <= --warmup < --seconds, --pull-rows and --push-rows >= 1\n";
    return 2;
  }
  auto config = load_part_config(part_config);
  if (!config.is_ok() || config->num_parts != 2) {
    std::cerr << "bench_load: " << (config.is_ok() ? part_config + " does not have 2 partitions" : config.status().message())
              << "\n";
    return 2;
  }
  // Two servers on loopback, on free ports.
  testing::TempDir work("dgld-bench-load");
  const uint16_t base = testing::free_port_range(12);
  const fs::path ip_config = work.path() / "ip_config.txt";
  std::ofstream(ip_config) << "127.0.0.1 " << base << "\n127.0.0.1 " << base + 10 << "\n";
  auto machines = load_ip_config(ip_config);
  Servers server_set;
  std::vector<testing::Process>& servers = server_set.procs;
  for (int id = 0; id < 2; ++id) {
    servers.push_back(testing::Process::start(
        {testing::graph_server_bin().string(), "--part-config", part_config, "--ip-config", ip_config.string(),
         "--server-id", std::to_string(id), "--num-server-threads", std::to_string(server_threads), "--job-id",
         job_id},
        work.path() / ("server" + std::to_string(id) + ".log")));
  }
  for (auto& sv : servers) {
    if (!sv.wait_for_log("listening on", std::chrono::minutes(2))) {
      std::cerr << "bench_load: a graph-server did not start:\n" << sv.log();
      return 1;
    }
  }
  net::IoThreads io(2);
  // The tensor the clients push to, created on both machines' servers.
  {
    std::vector<std::unique_ptr<client::ServerConnection>> admin;
    for (int m = 0; m < 2; ++m) {
      auto c = client::ServerConnection::connect(io.context(), (*machines)[m].host, (*machines)[m].base_port, m);
      if (!c.is_ok()) {
        std::cerr << "bench_load: " << c.status().to_string() << "\n";
        return 1;
      }
      admin.push_back(std::move(*c));
    }
    auto reg = admin[0]->register_client(client::Role::trainer, 0);
    Status st = reg.is_ok() ? admin[1]->hello(reg->client_id, client::Role::trainer, 0) : reg.status();
    client::CreateTensor spec;
    spec.name = s.tensor;
    spec.shape = {config->num_nodes, s.dim};
    for (int m = 0; m < 2 && st.is_ok(); ++m) st = admin[static_cast<size_t>(m)]->create_tensor(spec).status();
    if (st.is_ok()) st = admin[0]->leave(reg->client_id);
    if (!st.is_ok()) {
      std::cerr << "bench_load: creating tensor " << s.tensor << ": " << st.to_string() << "\n";
      return 1;
    }
  }

  std::printf("load: %d clients, 2 graph-servers (%d handler threads each), %.0f s (warm-up %.0f s); pulls of %d "
              "feature rows, pushes of %d rows of %d floats, each read back\n",
              s.clients, server_threads, s.seconds, s.warmup, s.pull_rows, s.push_rows, s.dim);
  std::fflush(stdout);
  // Resident memory of both servers every 250 ms.
  struct Sample {
    double t;
    Rss rss[2];
  };
  std::vector<Sample> samples;
  std::atomic<bool> done{false};
  const auto t_start = Clock::now();
  std::thread monitor([&] {
    while (!done) {
      Sample x{seconds_since(t_start), {read_rss(servers[0].pid()), read_rss(servers[1].pid())}};
      samples.push_back(x);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  const auto warm = t_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.warmup));
  const auto end = t_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.seconds));
  std::vector<ClientResult> results(static_cast<size_t>(s.clients));
  std::vector<std::thread> clients;
  for (int c = 0; c < s.clients; ++c) {
    clients.emplace_back([&, c] { run_client(c, s, io.context(), *machines, *config, warm, end, results[static_cast<size_t>(c)]); });
  }
  for (auto& t : clients) t.join();
  const double elapsed = seconds_since(t_start);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // one more sample after the load
  done = true;
  monitor.join();

  // Totals.
  nlohmann::json out;
  out["clients"] = s.clients;
  out["seconds"] = s.seconds;
  out["warmup_s"] = s.warmup;
  out["graph"] = config->graph_name;
  out["num_nodes"] = config->num_nodes;
  uint64_t errors = 0, mismatches = 0, requests = 0, rows_pulled = 0, rows_pushed = 0;
  std::vector<std::string> messages;
  std::printf("%-16s %10s %8s %9s %9s %9s\n", "request", "count", "errors", "p50 ms", "p99 ms", "max ms");
  std::vector<float> all;
  for (int k = 0; k < kNumKinds; ++k) {
    std::vector<float> lat;
    uint64_t n = 0;
    for (auto& r : results) {
      lat.insert(lat.end(), r.latency_us[k].begin(), r.latency_us[k].end());
      n += r.requests[k];
    }
    all.insert(all.end(), lat.begin(), lat.end());
    requests += n;
    const double p50 = percentile(lat, 0.5) / 1e3, p99 = percentile(lat, 0.99) / 1e3;
    const double mx = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end()) / 1e3;
    std::printf("%-16s %10llu %8s %9.2f %9.2f %9.2f\n", kKindNames[k], static_cast<unsigned long long>(n), "",
                p50, p99, mx);
    out["requests"][kKindNames[k]] = {{"count", n}, {"p50_ms", p50}, {"p99_ms", p99}, {"max_ms", mx}};
  }
  for (auto& r : results) {
    errors += r.errors;
    mismatches += r.mismatches;
    rows_pulled += r.rows_pulled;
    rows_pushed += r.rows_pushed;
    for (auto& m : r.messages) {
      if (messages.size() < 10) messages.push_back(m);
    }
  }
  const double p50 = percentile(all, 0.5) / 1e3, p99 = percentile(all, 0.99) / 1e3;
  std::printf("%-16s %10llu %8llu %9.2f %9.2f\n", "all", static_cast<unsigned long long>(requests),
              static_cast<unsigned long long>(errors + mismatches), p50, p99);
  std::printf("%.0f requests/s; %.2f M rows pulled, %.2f M rows pushed and read back; %llu failed calls, %llu "
              "rows read back differing from what was pushed\n",
              static_cast<double>(requests) / elapsed, rows_pulled / 1e6, rows_pushed / 1e6,
              static_cast<unsigned long long>(errors), static_cast<unsigned long long>(mismatches));
  for (const auto& m : messages) std::printf("error: %s\n", m.c_str());
  out["requests_per_s"] = static_cast<double>(requests) / elapsed;
  out["p50_ms"] = p50;
  out["p99_ms"] = p99;
  out["errors"] = errors;
  out["mismatches"] = mismatches;
  out["error_messages"] = messages;

  // Server-side view: every request kind's count and errors.
  uint64_t server_errors = 0;
  std::vector<std::unique_ptr<client::ServerConnection>> admin;
  for (int m = 0; m < 2; ++m) {
    auto c = client::ServerConnection::connect(io.context(), (*machines)[m].host, (*machines)[m].base_port, m,
                                               std::chrono::seconds(10), std::chrono::seconds(10));
    if (!c.is_ok()) {
      std::printf("error: server %d after the run: %s\n", m, c.status().to_string().c_str());
      ++server_errors;
      continue;
    }
    auto st = (*c)->stats();
    if (!st.is_ok()) {
      std::printf("error: stats of server %d: %s\n", m, st.status().to_string().c_str());
      ++server_errors;
    } else {
      auto j = nlohmann::json::parse(*st);
      out["server_stats"][std::to_string(m)] = j;
      for (auto& [kind, v] : j["requests"].items()) server_errors += v.value("errors", uint64_t{0});
    }
    admin.push_back(std::move(*c));
  }
  out["server_errors"] = server_errors;

  // Resident memory: at the end of the warm-up, the largest after it, at the end.
  double growth = 0;
  for (int id = 0; id < 2; ++id) {
    Rss first{}, at_warm{}, peak{}, last{};
    bool have_warm = false;
    for (const auto& x : samples) {
      if (x.t < 0.3) first = x.rss[id];
      if (x.t <= s.warmup) at_warm = x.rss[id], have_warm = true;
      if (x.t >= s.warmup) {
        peak.total = std::max(peak.total, x.rss[id].total);
        peak.anon = std::max(peak.anon, x.rss[id].anon);
      }
      last = x.rss[id];
    }
    if (!have_warm || at_warm.total == 0) {
      std::printf("error: no RSS sample of server %d (pid %d)\n", id, servers[static_cast<size_t>(id)].pid());
      ++server_errors;
      continue;
    }
    const double g = static_cast<double>(peak.total) / static_cast<double>(at_warm.total);
    growth = std::max(growth, g);
    std::printf("server %d RSS: %.1f MiB at start, %.1f MiB after warm-up, %.1f MiB max after, %.1f MiB at the end "
                "(heap without shared memory: %.1f, %.1f, %.1f, %.1f MiB)\n",
                id, first.total / 1048576.0, at_warm.total / 1048576.0, peak.total / 1048576.0, last.total / 1048576.0,
                first.anon / 1048576.0, at_warm.anon / 1048576.0, peak.anon / 1048576.0, last.anon / 1048576.0);
    out["rss"][std::to_string(id)] = {{"start", first.total}, {"after_warmup", at_warm.total},
                                      {"max_after_warmup", peak.total}, {"end", last.total},
                                      {"anon_start", first.anon}, {"anon_after_warmup", at_warm.anon},
                                      {"anon_max_after_warmup", peak.anon}, {"anon_end", last.anon}};
  }
  out["rss_growth_after_warmup"] = growth;
  const uint64_t total_errors = errors + mismatches + server_errors;
  ratio(out, "load_rss_growth_after_warmup", growth, "<=", 1.05);
  ratio(out, "load_errors", static_cast<double>(total_errors), "==", 0);
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  for (auto& c : admin) (void)c->shutdown("load test done");
  for (auto& sv : servers) {
    if (!sv.wait(std::chrono::seconds(10))) {
      std::printf("error: graph-server (pid %d) did not stop within 10 s of Shutdown\n", sv.pid());
      return 1;
    }
  }
  return total_errors == 0 ? 0 : 1;
}
