#include "launcher/stats/stats_tool.h"

#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cli.h"
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

}  // namespace

int run_stats_tool(int argc, const char* const argv[]) {
  std::string ip_config, secret_file;
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
      ("json", po::bool_switch(&json), "print each server's stats as one JSON object per line");
  add_log_options(desc, log);
  po::variables_map vm;
  switch (parse_command_line(argc, argv, "dgld-stats", "--ip-config FILE [options]", desc, vm)) {
    case CliOutcome::exit_ok: return 0;
    case CliOutcome::exit_error: return 2;
    case CliOutcome::run: break;
  }
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
        print_table(nlohmann::json::parse(*text), where);
      } catch (const std::exception& e) {
        std::cerr << "dgld-stats: server " << id << " at " << where << " sent stats that are not JSON: " << e.what()
                  << "\n";
        ++failed;
      }
    }
  }
  return failed ? 1 : 0;
}

}  // namespace dgld::stats
