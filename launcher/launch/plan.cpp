#include "launcher/launch/plan.h"

#include <algorithm>
#include <iostream>
#include <random>
#include <set>

#include <fmt/format.h>

#include "common/cli.h"
#include "common/job_env.h"

namespace dgld::launch {
namespace po = boost::program_options;

namespace {

constexpr const char* kProgram = "dgl-launch";
constexpr const char* kUsage =
    "--workspace DIR --ip-config FILE --part-config FILE [options] -- COMMAND [ARGS...]\n\n"
    "Starts a dgld job on every machine of FILE (DGL's tools/launch.py): on machine m (line m,\n"
    "partition m) --num-servers graph-servers, then --num-trainers copies of COMMAND (normally\n"
    "trainer-host, which starts its own --num-samplers sampler-workers), each with the DGL_* and\n"
    "DGLD_* environment they read. Over ssh (batch mode) unless --local. Paths in COMMAND,\n"
    "--part-config and --ip-config are relative to the workspace on every machine; the launcher\n"
    "reads (and copies) the two files from its current directory. Exits 0 when every trainer\n"
    "exited 0; otherwise stops every process on every machine and exits non-zero naming the first\n"
    "failure (docs/operations.md).";

bool valid_env_name(const std::string& k) {
  if (k.empty() || !(std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_')) return false;
  return std::all_of(k.begin(), k.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Shell-like word splitting for a command given as one string (DGL passes
// `"python3 train.py --x"`): whitespace separates, quotes group, backslash escapes.
std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < s.size()) {
        cur += s[++i];
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      have = true;
    } else if (c == '\\' && i + 1 < s.size()) {
      cur += s[++i];
      have = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (have) out.push_back(cur);
  return out;
}

std::string env_value(int v) { return std::to_string(v); }


// Two machines of one host (the same address in two ip_config lines, as
// --local jobs and several servers per host have) whose processes would
// bind the same port: found here, before anything starts, instead of as a
// server that cannot listen once the others run.
Status check_port_collisions(const JobPlan& plan, const std::string& ip_config) {
  struct Use {
    int line;
    std::string what;
  };
  std::map<std::pair<std::string, int>, Use> used;
  for (const MachinePlan& m : plan.machines) {
    std::vector<std::pair<Endpoint, std::string>> ports;
    for (size_t j = 0; j < m.server_ports.size(); ++j) {
      ports.push_back({m.server_ports[j], fmt::format("graph-server {} of machine {}", j, m.machine)});
    }
    for (const Endpoint& e : m.other_ports) ports.push_back({e, e.what});
    for (const auto& [e, what] : ports) {
      auto [it, fresh] = used.emplace(std::make_pair(e.host, e.port), Use{m.address.line, what});
      if (!fresh) {
        const bool metrics = what.find("metrics") != std::string::npos ||
                             it->second.what.find("metrics") != std::string::npos;
        return invalid_argument(fmt::format(
            "{} line {}: port {} on {} is needed by {} and, from line {}, by {}: {}", ip_config, m.address.line,
            e.port, e.host, what, it->second.line, it->second.what,
            metrics ? "trainer-host --metrics-port N takes N + its index on the machine, so two machines of one "
                      "host clash; leave it out there, or use --server-metrics-port and ports further apart"
                    : "give the machines of one host base ports further apart"));
      }
    }
  }
  return Status::ok();
}

}  // namespace

ParsedLaunchOptions parse_launch_options(int argc, const char* const argv[]) {
  ParsedLaunchOptions out;
  LaunchOptions& o = out.options;
  o.log.program = kProgram;
  // The trainer command follows "--"; everything before it is parsed strictly.
  std::vector<const char*> head;
  int i = 0;
  for (; i < argc; ++i) {
    if (i > 0 && std::string(argv[i]) == "--") break;
    head.push_back(argv[i]);
  }
  for (++i; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (o.command.size() == 1 && o.command[0].find_first_of(" \t") != std::string::npos) {
    o.command = split_words(o.command[0]);
  }

  po::options_description job("Job (DGL's names; --num_trainers etc. accepted too)");
  job.add_options()
      ("workspace", po::value(&o.workspace), "job directory on every machine (absolute; with --local may be relative)")
      ("ip-config", po::value(&o.ip_config), "ip_config.txt: machine m on line m")
      ("part-config", po::value(&o.part_config), "partition config <graph_name>.json from dgl-partition")
      ("num-trainers", po::value(&o.num_trainers)->default_value(o.num_trainers), "trainers per machine")
      ("num-samplers", po::value(&o.num_samplers)->default_value(o.num_samplers), "sampler-workers per trainer")
      ("num-servers", po::value(&o.num_servers)->default_value(o.num_servers), "graph-servers per machine")
      ("num-server-threads", po::value(&o.num_server_threads)->default_value(o.num_server_threads),
       "request handler threads per graph-server")
      ("num-omp-threads", po::value(&o.num_omp_threads)->default_value(o.num_omp_threads),
       "OMP_NUM_THREADS of each trainer (0: the machine's cores / --num-trainers)")
      ("graph-format", po::value(&o.graph_format), "accepted for DGL compatibility (passed as DGL_GRAPH_FORMAT)")
      ("extra-envs", po::value(&o.extra_envs)->multitoken()->composing(), "K=V ... set for every process")
      ("job-id", po::value(&o.job_id), "names logs and shared memory ([A-Za-z0-9_-]; default <graph>-<random>)")
      ("secret-file", po::value(&o.secret_file),
       "the job's shared secret (a file of mode 0600, e.g. the one --external-servers' servers use); default: a "
       "fresh random secret per job, handed to every process through a mode-0600 file")
      ("no-auth", po::bool_switch(&o.no_auth), "no shared secret: connections are not authenticated");
  po::options_description remote("Machines");
  remote.add_options()
      ("local", po::bool_switch(&o.local), "run every machine's processes on this host, without ssh")
      ("external-servers", po::bool_switch(&o.external_servers),
       "the graph-servers already run (systemd units): start and stop only the trainers; needs the servers' --job-id")
      ("write-server-env", po::value(&o.write_server_env),
       "write DIR/machine-<m>/<job>-<server id>.env for dgld-graph-server@.service and exit")
      ("server-metrics-port", po::value(&o.server_metrics_port)->default_value(o.server_metrics_port),
       "the graph-servers started here serve Prometheus metrics (GET /metrics): server j of a machine on N + j "
       "(+ k * --num-servers for the k-th machine of one host); 0: none. Trainers: trainer-host --metrics-port")
      ("ssh-port", po::value(&o.ssh_port)->default_value(o.ssh_port), "ssh port (0: ssh's default)")
      ("ssh-username", po::value(&o.ssh_username), "remote user (default: ssh's)")
      ("identity-file", po::value(&o.identity_file), "ssh private key")
      ("ssh-option", po::value(&o.ssh_options)->composing(), "extra ssh option K=V (repeatable), e.g. UserKnownHostsFile=F")
      ("no-copy", po::bool_switch(&o.no_copy), "copy nothing (shared filesystem); files must already be there")
      ("copy-method", po::value(&o.copy_method)->default_value(o.copy_method), "auto | rsync | scp")
      ("graph-server-bin", po::value(&o.graph_server_bin), "graph-server path on the machines (default: beside dgl-launch)")
      ("agent-bin", po::value(&o.agent_bin), "dgl-launch path on the machines (default: this executable)")
      ("stop-grace-ms", po::value(&o.grace_ms)->default_value(o.grace_ms), "SIGTERM, then SIGKILL after this long")
      ("connect-timeout-s", po::value(&o.connect_timeout_s)->default_value(o.connect_timeout_s), "ssh connect timeout")
      ("start-timeout-s", po::value(&o.start_timeout_s)->default_value(o.start_timeout_s),
       "how long graph-servers may take to listen")
      ("copy-timeout-s", po::value(&o.copy_timeout_s)->default_value(o.copy_timeout_s), "deadline of the file copy")
      ("agent-timeout-s", po::value(&o.agent_timeout_s)->default_value(o.agent_timeout_s),
       "a machine's agent stops its processes when it hears nothing from dgl-launch for this long")
      ("max-restarts", po::value(&o.max_restarts)->default_value(o.max_restarts),
       "when a process or machine fails, stop everything and start the job again up to N times (trainers "
       "resume from their checkpoints; a lost machine is replaced by a '# spare' of the ip_config)")
      ("restart-backoff-s", po::value(&o.restart_backoff_s)->default_value(o.restart_backoff_s),
       "the wait before a restart, doubled for each next one without a checkpoint committed in between (at most 60 s)");
  po::options_description agent("Internal");
  agent.add_options()
      ("machine-agent", po::bool_switch(&out.agent), "run as the agent of one machine (started by dgl-launch)")
      ("machine", po::value(&out.agent_machine), "agent: machine id")
      ("cleanup", po::bool_switch(&out.cleanup), "agent: kill what is left of --job-id on this machine, then exit")
      ("keep-shm", po::bool_switch(&out.keep_shm), "agent --cleanup: leave the job's shared memory (external servers)");
  po::options_description all;
  all.add(job).add(remote).add(agent);
  add_log_options(all, o.log);
  po::variables_map vm;
  switch (parse_command_line(static_cast<int>(head.size()), head.data(), kProgram, kUsage, all, vm)) {
    case CliOutcome::exit_ok: out.exit_code = 0; return out;
    case CliOutcome::exit_error: out.exit_code = 2; return out;
    case CliOutcome::run: break;
  }
  o.server_log_level_set = vm.count("log-level") && !vm["log-level"].defaulted();
  if (out.agent) {
    out.agent_job_id = o.job_id;
    return out;
  }
  if (Status st = validate_launch_options(o); !st.is_ok()) {
    std::cerr << kProgram << ": " << st.message() << "\n(try '" << kProgram << " --help')\n";
    out.exit_code = 2;
  }
  return out;
}

Status validate_launch_options(const LaunchOptions& o) {
  if (o.workspace.empty()) return invalid_argument("--workspace is required");
  if (!o.local && o.workspace[0] != '/') {
    return invalid_argument("--workspace '" + o.workspace + "' must be an absolute path (it names a directory on every machine)");
  }
  if (o.ip_config.empty()) return invalid_argument("--ip-config is required");
  if (o.part_config.empty()) return invalid_argument("--part-config is required");
  if (o.num_trainers < 1) return invalid_argument("--num-trainers must be >= 1");
  if (o.num_servers < 1) return invalid_argument("--num-servers must be >= 1");
  if (o.num_samplers < 0) return invalid_argument("--num-samplers must be >= 0");
  if (o.num_server_threads < 1) return invalid_argument("--num-server-threads must be >= 1");
  if (o.num_omp_threads < 0) return invalid_argument("--num-omp-threads must be >= 0");
  if (o.ssh_port < 0 || o.ssh_port > 65535) return invalid_argument("--ssh-port must be in 0..65535");
  if (o.server_metrics_port < 0 || o.server_metrics_port > 65535) {
    return invalid_argument("--server-metrics-port must be a port (1-65535), or 0 for none");
  }
  if (o.server_metrics_port > 0 && o.external_servers) {
    return invalid_argument("--server-metrics-port with --external-servers: those graph-servers are not started here; "
                            "give them --metrics-port in their environment file (DGLD_GRAPH_SERVER_ARGS)");
  }
  if (o.grace_ms < 0) return invalid_argument("--stop-grace-ms must be >= 0");
  if (o.connect_timeout_s < 1 || o.start_timeout_s < 1 || o.copy_timeout_s < 1 || o.agent_timeout_s < 5) {
    return invalid_argument("--connect-timeout-s, --start-timeout-s and --copy-timeout-s must be >= 1, "
                            "--agent-timeout-s >= 5");
  }
  if (o.copy_method != "auto" && o.copy_method != "rsync" && o.copy_method != "scp") {
    return invalid_argument("--copy-method must be auto, rsync or scp, not '" + o.copy_method + "'");
  }
  for (const auto& kv : o.extra_envs) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || !valid_env_name(kv.substr(0, eq))) {
      return invalid_argument("--extra-envs: '" + kv + "' is not NAME=VALUE");
    }
  }
  for (const auto& kv : o.ssh_options) {
    if (kv.find('=') == std::string::npos) return invalid_argument("--ssh-option: '" + kv + "' is not KEY=VALUE");
  }
  if (!o.job_id.empty()) DGLD_RETURN_IF_ERROR(validate_job_id(o.job_id));
  if (o.max_restarts < 0) return invalid_argument("--max-restarts must be >= 0");
  if (o.restart_backoff_s < 0) return invalid_argument("--restart-backoff-s must be >= 0");
  if (o.max_restarts > 0 && o.job_id.size() > 58) {
    return invalid_argument("--job-id '" + o.job_id + "': at most 58 characters with --max-restarts (a restart adds "
                            "-r<n>)");
  }
  if (o.max_restarts > 0 && o.external_servers) {
    return invalid_argument("--max-restarts restarts the graph-servers too: it does not work with --external-servers");
  }
  if (o.external_servers && o.job_id.empty()) {
    return invalid_argument("--external-servers needs --job-id: the one in the servers' environment files "
                            "(DGLD_JOB_ID), so the trainers find their shared memory");
  }
  if (o.external_servers && o.secret_file.empty() && !o.no_auth) {
    return invalid_argument("--external-servers needs --secret-file (the secret the running servers were given) "
                            "or --no-auth (servers started without one)");
  }
  if (!o.secret_file.empty() && o.no_auth) return invalid_argument("--secret-file and --no-auth contradict each other");
  if (!o.write_server_env.empty()) {
    if (o.job_id.empty()) return invalid_argument("--write-server-env needs --job-id (it names the units and files)");
    return Status::ok();  // no command: nothing runs
  }
  if (o.command.empty()) {
    return invalid_argument("no trainer command: put it after '--' (e.g. -- trainer-host --num-epochs 10)");
  }
  return Status::ok();
}

std::string part_file_path(const std::string& part_config, const std::string& relative) {
  const std::filesystem::path dir = std::filesystem::path(part_config).parent_path();
  return (dir / relative).lexically_normal().string();
}

std::string make_job_id(const std::string& graph_name) {
  std::string g;
  for (char c : graph_name) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') g += c;
  }
  if (g.size() > 40) g.resize(40);
  std::random_device rd;
  return fmt::format("{}{}{:08x}", g, g.empty() ? "" : "-", rd());
}

Status validate_job_id(const std::string& id) {
  const bool ok = !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  return ok ? Status::ok()
            : invalid_argument("--job-id '" + id + "': use 1 to 64 characters of [A-Za-z0-9_-]");
}

namespace {

// The value after any of `flags` in a command (--flag V or --flag=V), or "".
std::string flag_value(const std::vector<std::string>& command, std::initializer_list<const char*> flags) {
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    for (const char* flag : flags) {
      const std::string f = flag;
      if (a == f && i + 1 < command.size()) return command[i + 1];
      if (a.rfind(f + "=", 0) == 0) return a.substr(f.size() + 1);
    }
  }
  return "";
}

}  // namespace

std::string find_metrics_out(const std::vector<std::string>& command) {
  return flag_value(command, {"--metrics-out", "--metrics_out"});
}

std::map<std::string, std::string> server_env_files(const LaunchOptions& o, const JobPlan& plan) {
  std::map<std::string, std::string> files;
  const std::filesystem::path ws(o.workspace);
  for (const auto& m : plan.machines) {
    for (const auto& s : m.servers) {
      std::string text = fmt::format(
          "# graph-server {} of dgld job {}: machine {} ({}), written by dgl-launch --write-server-env.\n"
          "# Install as /etc/dgld/{}-{}.env on that machine, then: systemctl enable --now dgld-graph-server@{}-{}\n",
          s.rank, plan.job_id, m.machine, m.label, plan.job_id, s.rank, plan.job_id, s.rank);
      for (const auto& [k, v] : s.env) {
        if (k == job_env::kMachineId) continue;  // marks processes a launcher started (and sweeps)
        const bool path = k == job_env::kConfPath || k == job_env::kIpConfig;
        const std::filesystem::path p(v);
        text += k + "=" + (path && p.is_relative() ? (ws / p).lexically_normal().string() : v) + "\n";
      }
      if (!o.secret_file.empty()) {  // the path on that machine; the operator installs the file there (mode 0600)
        const std::filesystem::path p(o.secret_file);
        text += std::string(job_env::kSecretFile) + "=" + (p.is_relative() ? (ws / p).lexically_normal().string() : o.secret_file) + "\n";
      }
      std::string args;
      for (size_t i = 1; i < s.argv.size(); ++i) args += (i > 1 ? " " : "") + s.argv[i];
      text += "DGLD_GRAPH_SERVER_ARGS=" + args + "\n";
      files[fmt::format("machine-{}/{}-{}.env", m.machine, plan.job_id, s.rank)] = text;
    }
  }
  return files;
}

Result<JobPlan> make_job_plan(const LaunchOptions& o, const std::vector<MachineAddress>& machines,
                              const PartitionConfig& config) {
  const int M = static_cast<int>(machines.size());
  if (M != config.num_parts) {
    return invalid_argument(fmt::format(
        "{} lists {} machine(s) but {} has num_parts={}: machine m serves partition m, so they must match",
        o.ip_config, M, o.part_config, config.num_parts));
  }
  if (M == 0) return invalid_argument(o.ip_config + " lists no machine");
  JobPlan plan;
  plan.job_id = o.job_id.empty() ? make_job_id(config.graph_name) : o.job_id;
  DGLD_RETURN_IF_ERROR(validate_job_id(plan.job_id));
  plan.log_dir = "dgld-logs/" + plan.job_id;
  plan.metrics_out = find_metrics_out(o.command);
  const int T = o.num_trainers, S = o.num_servers, K = o.num_samplers;
  const int num_clients = T * M * (1 + K);

  std::map<std::string, int> host_count;
  std::vector<int> host_index;  // machine m is the host_index[m]-th machine of its host
  for (const auto& m : machines) host_index.push_back(host_count[m.host]++);

  std::map<std::string, std::string> common{
      {job_env::kIpConfig, o.ip_config},
      {job_env::kConfPath, o.part_config},
      {job_env::kNumServer, env_value(S)},
      {job_env::kNumSampler, env_value(K)},
      {job_env::kNumClient, env_value(num_clients)},
      {job_env::kJobId, plan.job_id},
  };
  if (!o.graph_format.empty()) common[job_env::kGraphFormat] = o.graph_format;

  // trainer-host --metrics-port N: trainer i of a machine on N + i (its
  // LOCAL_RANK), checked free and apart from the machine's other ports.
  const int trainer_metrics = std::atoi(flag_value(o.command, {"--metrics-port"}).c_str());
  for (int m = 0; m < M; ++m) {
    const MachineAddress& a = machines[static_cast<size_t>(m)];
    MachinePlan mp;
    mp.machine = m;
    mp.external_servers = o.external_servers;
    mp.address = a;
    mp.label = host_count[a.host] > 1 ? fmt::format("{}:{}", a.host, a.base_port) : a.host;
    auto with_extra = [&](std::map<std::string, std::string> env) {
      for (const auto& kv : o.extra_envs) {
        const auto eq = kv.find('=');
        env[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      return env;
    };
    for (int j = 0; j < S; ++j) {
      if (a.base_port + j > 65535) {
        return invalid_argument(fmt::format("{} line {}: port {} of server {} is out of range", o.ip_config,
                                            a.line, a.base_port + j, j));
      }
      mp.server_ports.push_back({a.host, a.base_port + j});
      if (o.external_servers) continue;
      ProcessSpec s;
      s.role = "server";
      s.rank = m * S + j;
      s.argv = {o.graph_server_bin, "--num-server-threads", std::to_string(o.num_server_threads)};
      if (o.server_metrics_port > 0) {
        // graph-server adds its index j itself; machines sharing a host take turns.
        const int first = o.server_metrics_port + host_index[static_cast<size_t>(m)] * S;
        if (first + j > 65535) {
          return invalid_argument(fmt::format("--server-metrics-port {}: server {} of machine {} would need port {}",
                                              o.server_metrics_port, j, m, first + j));
        }
        s.argv.insert(s.argv.end(), {"--metrics-port", std::to_string(first)});
        mp.other_ports.push_back({a.host, first + j, fmt::format("graph-server {} of machine {}'s metrics", j, m)});
      }
      if (o.server_log_level_set) s.argv.insert(s.argv.end(), {"--log-level", o.log.level});
      auto env = common;
      env[job_env::kRole] = "server";
      env[job_env::kServerId] = env_value(s.rank);
      env[job_env::kMachineId] = env_value(m);
      s.env = with_extra(std::move(env));
      mp.servers.push_back(std::move(s));
    }
    if (m == 0) {
      const int rendezvous = a.base_port + 900;
      if (rendezvous > 65535) {
        return invalid_argument(fmt::format("{} line {}: the trainers' rendezvous port {} (base port + 900) is out of range",
                                            o.ip_config, a.line, rendezvous));
      }
      mp.other_ports.push_back({a.host, rendezvous, "the trainers' rendezvous (base port + 900)"});
    }
    for (int i = 0; i < T; ++i) {
      if (trainer_metrics > 0) {
        mp.other_ports.push_back({a.host, trainer_metrics + i,
                                  fmt::format("trainer {} of machine {}'s metrics (--metrics-port {} + {})", i, m,
                                              trainer_metrics, i)});
      }
      ProcessSpec t;
      t.role = "trainer";
      t.rank = m * T + i;
      t.argv = o.command;
      auto env = common;
      env[job_env::kRole] = "trainer";
      env[job_env::kMachineId] = env_value(m);
      env[job_env::kTrainerRank] = env_value(t.rank);
      env[job_env::kNumTrainers] = env_value(T * M);
      // torch.distributed's env:// rendezvous, for Python trainers
      // (init_process_group): machine 0's rendezvous port, as trainer-host's.
      env["MASTER_ADDR"] = machines[0].host;
      env["MASTER_PORT"] = env_value(machines[0].base_port + 900);
      env["RANK"] = env_value(t.rank);
      env["WORLD_SIZE"] = env_value(T * M);
      env["LOCAL_RANK"] = env_value(i);
      // Idle OpenMP threads sleep instead of spinning on cores the servers and
      // samplers need (trainer-host sets this itself; Python trainers do not).
      env["OMP_WAIT_POLICY"] = "PASSIVE";
      if (o.num_omp_threads > 0) env["OMP_NUM_THREADS"] = env_value(o.num_omp_threads);
      t.env = with_extra(std::move(env));
      mp.trainers.push_back(std::move(t));
    }
    mp.files = {o.ip_config, o.part_config};
    const PartitionFiles& pf = config.parts[static_cast<size_t>(m)];
    for (const std::string* f : {&pf.part_graph, &pf.node_feats, &pf.edge_feats, &pf.link_split}) {
      if (!f->empty()) mp.files.push_back(part_file_path(o.part_config, *f));
    }
    plan.machines.push_back(std::move(mp));
  }
  DGLD_RETURN_IF_ERROR(check_port_collisions(plan, o.ip_config));
  return plan;
}

}  // namespace dgld::launch
