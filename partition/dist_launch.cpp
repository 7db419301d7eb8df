#include "partition/dist_launch.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/ip_config.h"
#include "common/logging.h"

extern char** environ;

namespace dgld {
namespace fs = std::filesystem;

std::vector<std::string> mpirun_command(const DistLaunchOptions& o, const std::vector<std::string>& hosts,
                                        const fs::path& rank_binary) {
  std::vector<std::string> argv = {o.mpirun, "-np", std::to_string(hosts.size())};
  if (o.local) {
    // More ranks than cores is normal here: let idle ranks yield the CPU.
    argv.insert(argv.end(), {"--host", fmt::format("localhost:{}", hosts.size()), "--oversubscribe", "--mca",
                             "mpi_yield_when_idle", "1"});
  } else {
    std::string list;
    for (const auto& h : hosts) list += (list.empty() ? "" : ",") + h + ":1";
    argv.insert(argv.end(), {"--host", list});
    // The remote ranks are started over ssh, with dgl-launch's options.
    std::string ssh = "-o BatchMode=yes -o ConnectTimeout=10";
    for (const auto& kv : o.ssh_options) ssh += " -o " + kv;
    if (!o.identity_file.empty()) ssh += " -i " + o.identity_file + " -o IdentitiesOnly=yes";
    argv.insert(argv.end(), {"--mca", "plm_rsh_agent", "ssh", "--mca", "plm_rsh_args", ssh});
  }
  // TCP between the ranks (shared-memory transports need a /dev/shm that
  // containers often lack); every rank's lines tagged with its rank.
  argv.insert(argv.end(), {"--mca", "btl", "self,tcp", "--tag-output", rank_binary.string(), "--chunks",
                           fs::absolute(o.chunks).string(), "--output", fs::absolute(o.output).string(), "--seed",
                           std::to_string(o.seed), "--imbalance", fmt::format("{}", o.imbalance),
                           "--scotch-edge-fraction",
                           o.scotch_edge_fraction > 0 ? fmt::format("{}", o.scotch_edge_fraction) : "auto",
                           "--refine-rounds", std::to_string(o.refine_rounds), "--log-level", o.log_level});
  if (!o.graph_name.empty()) argv.insert(argv.end(), {"--graph-name", o.graph_name});
  if (o.overwrite) argv.push_back("--overwrite");
  if (!o.stats_json.empty()) argv.insert(argv.end(), {"--stats-json", fs::absolute(o.stats_json).string()});
  return argv;
}

Result<double> parse_scotch_edge_fraction(const std::string& text) {
  if (text == "auto") return 0.0;
  size_t used = 0;
  double f = 0;
  try {
    f = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(f > 0 && f <= 1)) {
    return invalid_argument("--scotch-edge-fraction '" + text + "': expected auto or a number in (0, 1]");
  }
  return f;
}

Status run_distributed_partition(const DistLaunchOptions& o) {
  if (!DGLD_HAVE_DIST_PARTITION && o.rank_binary.empty()) {
    return invalid_argument(
        "--distributed: this dgl-partition was built without OpenMPI or PT-Scotch (meson -Dmpi / -Dptscotch "
        "disabled, or libopenmpi-dev / libptscotch-dev missing when it was configured), so there is no "
        "dgl-partition-rank; install them and reconfigure");
  }
  if (o.chunks.empty()) return invalid_argument("--distributed needs --chunks DIR (a chunked graph, --to-chunks)");
  if (o.output.empty()) return invalid_argument("--distributed needs --output DIR");
  if (o.refine_rounds < 0) return invalid_argument(fmt::format("--refine-rounds must be >= 0, got {}", o.refine_rounds));
  if (!(o.scotch_edge_fraction >= 0 && o.scotch_edge_fraction <= 1)) {
    return invalid_argument(fmt::format("--scotch-edge-fraction must be auto or in (0, 1], got {}", o.scotch_edge_fraction));
  }
  std::vector<std::string> hosts;
  if (o.local) {
    int n = o.num_parts;
    if (n <= 0 && !o.ip_config.empty()) {
      DGLD_ASSIGN_OR_RETURN(auto machines, load_ip_config(o.ip_config));
      n = static_cast<int>(machines.size());
    }
    if (n <= 0) n = 2;
    hosts.assign(static_cast<size_t>(n), "localhost");
  } else {
    if (o.ip_config.empty()) return invalid_argument("--distributed needs --ip-config FILE (or --local)");
    DGLD_ASSIGN_OR_RETURN(auto machines, load_ip_config(o.ip_config));
    for (const auto& m : machines) hosts.push_back(m.host);
    if (o.num_parts > 0 && o.num_parts != static_cast<int>(hosts.size())) {
      return invalid_argument(fmt::format("--num-parts {} differs from the {} machines of {}: --distributed makes one "
                                          "partition per machine",
                                          o.num_parts, hosts.size(), o.ip_config.string()));
    }
  }
  fs::path rank = o.rank_binary;
  if (rank.empty()) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    rank = (ec ? fs::path("dgl-partition") : self).parent_path() / "dgl-partition-rank";
  }
  if (!fs::exists(rank)) {
    return not_found(fmt::format("{} is missing: it is built with dgl-partition (and must be at the same path on "
                                 "every machine)",
                                 rank.string()));
  }
  const auto argv = mpirun_command(o, hosts, rank);
  logger("partition")->info("starting {} ranks: {}", hosts.size(), fmt::join(argv, " "));
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  // mpirun refuses root unless told; CI and containers run as root.
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  if (geteuid() == 0) {
    env_store.emplace_back("OMPI_ALLOW_RUN_AS_ROOT=1");
    env_store.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  }
  std::vector<char*> cenv;
  for (auto& e : env_store) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = posix_spawnp(&pid, argv[0].c_str(), nullptr, nullptr, cargv.data(), cenv.data()); rc != 0) {
    return not_found(fmt::format("cannot start {}: {} (install openmpi-bin: scripts/setup.sh)", argv[0],
                                 std::strerror(rc)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return internal_error(fmt::format("waiting for mpirun: {}", std::strerror(errno)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::ok();
  return internal_error(fmt::format("the distributed partitioning failed ({} {}); the ranks' messages are above, each "
                                    "naming its rank; no partition config was written",
                                    argv[0],
                                    WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                                                      : fmt::format("was killed by signal {}", WTERMSIG(status))));
}

}  // namespace dgld
