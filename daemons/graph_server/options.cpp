#include "daemons/graph_server/options.h"

#include <cstdlib>
#include <iostream>

#include "common/cli.h"
#include "common/job_env.h"

namespace dgld::graph_server {
namespace po = boost::program_options;


ParsedOptions parse_graph_server_options(int argc, const char* const argv[]) {
  ParsedOptions out;
  GraphServerOptions& o = out.options;
  o.log.program = "graph-server";
  std::string part_config, ip_config, secret_file;
  int hb_interval = 1000, hb_timeout = 10000, attach_timeout = 120000;
  uint64_t max_frame = o.limits.max_frame_bytes;
  bool no_verify = false;
  po::options_description desc("graph-server options");
  desc.add_options()
      ("part-config", po::value(&part_config), "partition config JSON (env DGL_CONF_PATH)")
      ("ip-config", po::value(&ip_config), "ip_config.txt (env DGL_IP_CONFIG)")
      ("server-id", po::value(&o.server_id), "global server id: machine * num_servers + j (env DGL_SERVER_ID)")
      ("num-servers", po::value(&o.num_servers)->default_value(1), "servers per machine (env DGL_NUM_SERVER)")
      ("num-clients", po::value(&o.num_clients)->default_value(0),
       "trainers + samplers in the job, 0 = unknown (env DGL_NUM_CLIENT)")
      ("num-samplers", po::value(&o.num_samplers)->default_value(0), "samplers per trainer (env DGL_NUM_SAMPLER)")
      ("num-server-threads", po::value(&o.num_threads)->default_value(2),
       "request handler threads; also the threads one sampling request spreads over")
      ("listen-any", po::bool_switch(&o.listen_any), "listen on 0.0.0.0 instead of the ip_config address")
      ("metrics-port", po::value(&o.metrics_port)->default_value(0),
       "serve the counters dgld-stats prints in Prometheus' text format at http://<ip_config address>:N+j/metrics "
       "(j: this server's index on its machine); 0: off")
      ("job-id", po::value(&o.job_id), "names shared-memory segments (env DGLD_JOB_ID; default: graph name and port)")
      ("secret-file", po::value(&secret_file),
       "file with the job's shared secret, mode 0600 (env DGLD_SECRET_FILE); clients must prove they hold it")
      ("no-verify", po::bool_switch(&no_verify), "skip the partition checksum check at start")
      ("heartbeat-interval-ms", po::value(&hb_interval)->default_value(hb_interval), "client heartbeat interval")
      ("heartbeat-timeout-ms", po::value(&hb_timeout)->default_value(hb_timeout),
       "drop a client silent for this long")
      ("attach-timeout-ms", po::value(&attach_timeout)->default_value(attach_timeout),
       "how long a backup server waits for its main server's shared memory")
      ("max-frame-bytes", po::value(&max_frame)->default_value(max_frame), "largest frame accepted")
      ("max-ids-per-request", po::value(&o.max_ids_per_request)->default_value(o.max_ids_per_request),
       "most node or edge ids one request may carry")
      ("max-tensor-bytes", po::value(&o.max_tensor_bytes)->default_value(o.max_tensor_bytes),
       "largest DistTensor a client may create (bytes of this machine's rows)")
      ("max-connections", po::value(&o.max_connections)->default_value(o.max_connections),
       "connections served at once; more are refused")
      ("max-queued-bytes", po::value(&o.max_queued_bytes_per_connection)->default_value(o.max_queued_bytes_per_connection),
       "replies queued for one connection before it is read from no more until they drain");
  add_log_options(desc, o.log);
  po::variables_map vm;
  switch (parse_command_line(argc, argv, "graph-server", "[options]", desc, vm)) {
    case CliOutcome::exit_ok: out.exit_code = 0; return out;
    case CliOutcome::exit_error: out.exit_code = 2; return out;
    case CliOutcome::run: break;
  }
  std::string err;
  bool ok = flag_from_env(vm, "part-config", job_env::kConfPath, part_config, err) &&
            flag_from_env(vm, "ip-config", job_env::kIpConfig, ip_config, err) &&
            flag_from_env(vm, "server-id", job_env::kServerId, o.server_id, err) &&
            flag_from_env(vm, "num-servers", job_env::kNumServer, o.num_servers, err) &&
            flag_from_env(vm, "num-clients", job_env::kNumClient, o.num_clients, err) &&
            flag_from_env(vm, "num-samplers", job_env::kNumSampler, o.num_samplers, err) &&
            flag_from_env(vm, "job-id", job_env::kJobId, o.job_id, err);
  if (ok && part_config.empty()) err = "--part-config (or DGL_CONF_PATH) is required", ok = false;
  if (ok && ip_config.empty()) err = "--ip-config (or DGL_IP_CONFIG) is required", ok = false;
  if (ok && o.server_id < 0) err = "--server-id (or DGL_SERVER_ID) is required and must be >= 0", ok = false;
  if (ok && o.num_servers < 1) err = "--num-servers must be >= 1", ok = false;
  if (ok && o.num_threads < 1) err = "--num-server-threads must be >= 1", ok = false;
  if (ok && (o.max_ids_per_request < 1 || o.max_connections < 1 || o.max_queued_bytes_per_connection < 1)) {
    err = "--max-ids-per-request, --max-connections and --max-queued-bytes must be >= 1", ok = false;
  }
  if (ok && (o.metrics_port < 0 || o.metrics_port > 65535)) {
    err = "--metrics-port must be a port (1-65535), or 0 for none", ok = false;
  }
  if (ok && (o.num_clients < 0 || o.num_samplers < 0)) err = "--num-clients and --num-samplers must be >= 0", ok = false;
  if (ok && (hb_interval < 1 || hb_timeout <= hb_interval)) {
    err = "--heartbeat-timeout-ms must be larger than --heartbeat-interval-ms (both > 0)", ok = false;
  }
  if (ok) {
    auto secret = net::secret_from_flag_or_env(secret_file);
    if (secret.is_ok()) o.secret = *secret;
    else err = secret.status().message(), ok = false;
  }
  if (!ok) {
    std::cerr << "graph-server: " << err << "\n";
    out.exit_code = 2;
    return out;
  }
  o.part_config = part_config;
  o.ip_config = ip_config;
  o.verify_checksums = !no_verify;
  o.heartbeat_interval = std::chrono::milliseconds(hb_interval);
  o.heartbeat_timeout = std::chrono::milliseconds(hb_timeout);
  o.attach_timeout = std::chrono::milliseconds(attach_timeout);
  o.limits.max_frame_bytes = max_frame;
  o.log.role = "server/" + std::to_string(o.server_id);
  return out;
}

}  // namespace dgld::graph_server
