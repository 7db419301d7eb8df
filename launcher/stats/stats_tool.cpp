#include "launcher/stats/stats_tool.h"

#include <algorithm>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/file_util.h"
#include "client/server_api.h"
#include "common/ip_config.h"
#include "common/logging.h"
#include "common/net/auth.h"
#include "common/net/io_threads.h"
#include "common/job_env.h"

namespace dgld::stats {

namespace po = boost::program_options;
using std::chrono::milliseconds;

namespace {

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1 << 20)); }

void print_table(const nlohmann::json& j, const std::string& where) {
  fmt::print("server {} (machine {}) at {}: up {:.0f} s, RSS {}, {} connection(s), {} registered client(s)\n",
             j.value("server_id", -1), j.value("machine_id", -1), where, j.value("uptime_s", 0.0),
             mib(j.value("rss_bytes", 0.0)), j.value("connections", 0), j.value("registered_clients", 0));
  if (j.contains("memory")) {
    const auto& m = j["memory"];
    fmt::print("  memory: peak RSS {}; anon {}, file-backed {}, shared memory {}; partition files {}, tensors {}\n",
               mib(m.value("peak_rss_bytes", 0.0)), mib(m.value("anon_bytes", 0.0)), mib(m.value("file_bytes", 0.0)),
               mib(m.value("shmem_bytes", 0.0)), mib(m.value("partition_bytes", 0.0)), mib(m.value("tensor_bytes", 0.0)));
  }
  fmt::print("  bytes in {}, out {}; replies queued {}; reads held back {} time(s); refused connections {}\n",
             mib(j.value("bytes_in", 0.0)), mib(j.value("bytes_out", 0.0)), mib(j.value("queued_reply_bytes", 0.0)),
             j.value("read_pauses", 0), j.value("refused_connections", 0));
  if (!j.contains("requests")) return;
  fmt::print("  {:<20} {:>10} {:>8} {:>10} {:>10}\n", "request", "count", "errors", "p50 us", "p99 us");
  for (const auto& [kind, s] : j["requests"].items()) {
    fmt::print("  {:<20} {:>10} {:>8} {:>10} {:>10}\n", kind, s.value("count", 0), s.value("errors", 0),
               s.value("p50_us", 0), s.value("p99_us", 0));
  }
}

// A square table of bytes, `unit` bytes to a printed unit; the diagonal (a
// machine's own traffic, never on the network) as "-".
void print_link_matrix(const std::string& title, const std::vector<std::vector<double>>& link, double unit) {
  fmt::print("{}\n      ", title);
  for (size_t c = 0; c < link.size(); ++c) fmt::print(" {:>8}", c);
  fmt::print("\n");
  for (size_t r = 0; r < link.size(); ++r) {
    fmt::print("  {:>3} ", r);
    for (size_t c = 0; c < link.size(); ++c) {
      if (r == c) {
        fmt::print(" {:>8}", "-");
      } else {
        fmt::print(" {:>8.1f}", link[r][c] / unit);
      }
    }
    fmt::print("\n");
  }
}

// The frames a server exchanged, by the client's machine: one line each.
void print_traffic(const nlohmann::json& j) {
  if (!j.contains("traffic") || j["traffic"].empty()) return;
  fmt::print("  {:<14} {:>12} {:>12} {:>10}  {}\n", "client machine", "bytes in", "bytes out", "frames", "largest kinds");
  for (const auto& [machine, kinds] : j["traffic"].items()) {
    double in = 0, out = 0, frames = 0;
    std::vector<std::pair<double, std::string>> by_kind;
    for (const auto& [kind, t] : kinds.items()) {
      in += t.value("bytes_in", 0.0);
      out += t.value("bytes_out", 0.0);
      frames += t.value("frames_in", 0.0) + t.value("frames_out", 0.0);
      by_kind.emplace_back(t.value("bytes_in", 0.0) + t.value("bytes_out", 0.0), kind);
    }
    std::sort(by_kind.rbegin(), by_kind.rend());
    std::string top;
    for (size_t k = 0; k < by_kind.size() && k < 3; ++k) top += (k ? ", " : "") + by_kind[k].second;
    fmt::print("  {:<14} {:>12} {:>12} {:>10.0f}  {}\n", machine, mib(in), mib(out), frames, top);
  }
}

// Bytes from machine i to machine j over every server's connections: a
// server on j received them from a client on i, or a server on i sent them
// to a client on j (the same machine's traffic stays off the network).
void print_links(const std::vector<nlohmann::json>& servers, size_t num_machines) {
  std::vector<std::vector<double>> link(num_machines, std::vector<double>(num_machines, 0));
  bool any = false;
  for (const auto& j : servers) {
    const int sm = j.value("machine_id", -1);
    if (sm < 0 || static_cast<size_t>(sm) >= num_machines || !j.contains("traffic")) continue;
    for (const auto& [machine, kinds] : j["traffic"].items()) {
      if (machine == "unknown") continue;
      const int cm = std::stoi(machine);
      if (cm < 0 || static_cast<size_t>(cm) >= num_machines || cm == sm) continue;
      for (const auto& [kind, t] : kinds.items()) {
        link[static_cast<size_t>(cm)][static_cast<size_t>(sm)] += t.value("bytes_in", 0.0);
        link[static_cast<size_t>(sm)][static_cast<size_t>(cm)] += t.value("bytes_out", 0.0);
        any = true;
      }
    }
  }
  if (!any) return;
  print_link_matrix("bytes between machines over dgld connections (row: from, column: to; MiB)", link, 1 << 20);
}

// The per-epoch figures of a trainer's metrics.json (EpochMetrics::cluster).
int print_metrics(const std::string& path) {
  auto text = read_file(path);
  if (!text.is_ok()) {
    std::cerr << "dgld-stats: " << text.status().message() << "\n";
    return 2;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const std::exception& e) {
    std::cerr << "dgld-stats: " << path << " is not JSON: " << e.what() << "\n";
    return 2;
  }
  if (!j.contains("epochs") || !j["epochs"].is_array()) {
    std::cerr << "dgld-stats: " << path << " has no \"epochs\" (a trainer-host --metrics-out file is expected)\n";
    return 2;
  }
  fmt::print("{:>5} {:>8} {:>12} {:>10} {:>12} {:>12} {:>12} {:>8} {:>11}\n", "epoch", "time s", "network MB",
             "B/seed", "batches MB", "allreduce MB", "other MB", "remote %", "RTs/batch");
  for (const auto& e : j["epochs"]) {
    if (!e.contains("cluster")) continue;
    const auto& c = e["cluster"];
    fmt::print("{:>5} {:>8.2f} {:>12.1f} {:>10.0f} {:>12.1f} {:>12.1f} {:>12.1f} {:>8.1f} {:>11.1f}\n",
               e.value("epoch", -1), e.value("time_s", 0.0), c.value("network_bytes", 0.0) / 1e6,
               c.value("bytes_per_seed", 0.0), c.value("batch_bytes", 0.0) / 1e6, c.value("allreduce_bytes", 0.0) / 1e6,
               c.value("other_bytes", 0.0) / 1e6, 100 * c.value("remote_row_share", 0.0),
               c.value("round_trips_per_batch", 0.0));
  }
  const auto& last = j["epochs"].back();
  if (!last.contains("cluster")) return 0;
  const auto& c = last["cluster"];
  const auto n = c.value("num_machines", 0);
  const auto links = c.value("link_bytes", std::vector<double>{});
  if (n < 2 || links.size() != static_cast<size_t>(n) * static_cast<size_t>(n)) return 0;
  std::vector<std::vector<double>> m(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) m[static_cast<size_t>(r)].assign(links.begin() + r * n, links.begin() + (r + 1) * n);
  print_link_matrix(fmt::format("bytes between machines in epoch {} (row: from, column: to; MB)", last.value("epoch", -1)),
                    m, 1e6);
  return 0;
}

}  // namespace

int run_stats_tool(int argc, const char* const argv[]) {
  std::string ip_config, secret_file, metrics;
  int num_servers = 1, timeout_ms = 5000;
  bool json = false;
  LogOptions log;
  log.program = "dgld-stats";
  log.level = "warn";
  po::options_description desc("dgld-stats options");
  desc.add_options()
      ("ip-config", po::value(&ip_config), "ip_config.txt of the job (env DGL_IP_CONFIG)")
      ("num-servers", po::value(&num_servers)->default_value(num_servers), "graph-servers per machine (env DGL_NUM_SERVER)")
      ("secret-file", po::value(&secret_file), "the job's shared secret, mode 0600 (env DGLD_SECRET_FILE)")
      ("timeout-ms", po::value(&timeout_ms)->default_value(timeout_ms), "deadline to connect to and hear from each server")
      ("json", po::bool_switch(&json), "print each server's stats as one JSON object per line")
      ("metrics", po::value(&metrics), "instead: the per-epoch traffic of a trainer-host --metrics-out file (bytes "
       "per seed, remote share of feature rows, round trips per batch, bytes per link)");
  add_log_options(desc, log);
  po::variables_map vm;
  switch (parse_command_line(argc, argv, "dgld-stats", "--ip-config FILE [options]", desc, vm)) {
    case CliOutcome::exit_ok: return 0;
    case CliOutcome::exit_error: return 2;
    case CliOutcome::run: break;
  }
  if (!metrics.empty()) return print_metrics(metrics);
  std::string err;
  if (!flag_from_env(vm, "ip-config", job_env::kIpConfig, ip_config, err) ||
      !flag_from_env(vm, "num-servers", job_env::kNumServer, num_servers, err)) {
    std::cerr << "dgld-stats: " << err << "\n";
    return 2;
  }
  if (ip_config.empty()) {
    std::cerr << "dgld-stats: --ip-config (or DGL_IP_CONFIG) is required\n";
    return 2;
  }
  if (num_servers < 1 || timeout_ms < 1) {
    std::cerr << "dgld-stats: --num-servers and --timeout-ms must be >= 1\n";
    return 2;
  }
  if (Status st = setup_logging(log); !st.is_ok()) {
    std::cerr << "dgld-stats: " << st.message() << "\n";
    return 2;
  }
  auto machines = load_ip_config(ip_config);
  if (!machines.is_ok()) {
    std::cerr << "dgld-stats: " << machines.status().message() << "\n";
    return 2;
  }
  auto secret = net::secret_from_flag_or_env(secret_file);
  if (!secret.is_ok()) {
    std::cerr << "dgld-stats: " << secret.status().message() << "\n";
    return 2;
  }
  net::IoThreads io(1);
  int failed = 0;
  std::vector<nlohmann::json> answered;
  for (size_t m = 0; m < machines->size(); ++m) {
    for (int j = 0; j < num_servers; ++j) {
      const auto& a = (*machines)[m];
      const int id = static_cast<int>(m) * num_servers + j;
      const std::string where = fmt::format("{}:{}", a.host, a.base_port + j);
      auto conn = client::ServerConnection::connect(io.context(), a.host, static_cast<uint16_t>(a.base_port + j), id,
                                                    milliseconds(timeout_ms), milliseconds(timeout_ms), *secret);
      auto text = conn.is_ok() ? (*conn)->stats() : Result<std::string>(conn.status());
      if (!text.is_ok()) {
        std::cerr << "dgld-stats: server " << id << " at " << where << ": " << text.status().message() << "\n";
        ++failed;
        continue;
      }
      if (json) {
        std::cout << *text << "\n";
        continue;
      }
      try {
        answered.push_back(nlohmann::json::parse(*text));
        print_table(answered.back(), where);
        print_traffic(answered.back());
      } catch (const std::exception& e) {
        std::cerr << "dgld-stats: server " << id << " at " << where << " sent stats that are not JSON: " << e.what()
                  << "\n";
        ++failed;
      }
    }
  }
  if (!json) print_links(answered, machines->size());
  return failed ? 1 : 0;
}

}  // namespace dgld::stats
