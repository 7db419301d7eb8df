#pragma once
// graph-server's configuration, from flags or from DGL's environment variables
// (DGL_SERVER_ID, DGL_NUM_SERVER, DGL_CONF_PATH, DGL_IP_CONFIG, DGL_NUM_CLIENT,
// DGL_NUM_SAMPLER; DGLD_JOB_ID from dgl-launch) when the flags are absent, so DGL
// launch scripts keep working.

#include <chrono>
#include <filesystem>
#include <string>

#include "common/logging.h"
#include "common/net/auth.h"
#include "common/net/frame.h"
#include "common/status.h"

namespace dgld::graph_server {

struct GraphServerOptions {
  std::filesystem::path part_config;
  std::filesystem::path ip_config;
  int server_id = -1;        // global: machine * num_servers + local index (DGL's numbering)
  int num_servers = 1;       // servers per machine
  int num_clients = 0;       // trainers + samplers in the whole job (0 = unknown)
  int num_samplers = 0;      // samplers per trainer
  int num_threads = 2;       // request handler threads, and sampling threads (counting the caller)
  bool listen_any = false;   // bind 0.0.0.0 instead of the ip_config address
  // Prometheus' text format of stats_json over HTTP (GET /metrics) on
  // metrics_port + local_server() of the same address; 0: off.
  int metrics_port = 0;
  bool listen = true;        // false: no socket and no heartbeat sweeper; requests only through
                             // GraphServer::handle (fuzzers)
  std::string job_id;        // names shared-memory segments; default from graph and port
  bool verify_checksums = true;
  // Stop once num_clients clients have been served and every one of them
  // has left or gone (DGL's DistGraphServer with keep_alive=False); off: the
  // server runs until a Shutdown request or a signal (dgl-launch stops it).
  bool exit_when_clients_leave = false;
  // With exit_when_clients_leave: when no client is connected and fewer than
  // num_clients ever came, how long the server waits for the rest before it
  // stops with an error naming how many came (a launcher whose trainer died
  // before connecting gets an error, not a server that never returns).
  std::chrono::milliseconds client_wait{600000};
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds attach_timeout{120000};  // backup waiting for the main server
  net::FrameLimits limits;
  // Caps (resource_exhausted errors, or backpressure, instead of growth).
  size_t max_ids_per_request = size_t{1} << 24;
  uint64_t max_tensor_bytes = uint64_t{256} << 30;  // one DistTensor's rows on this machine
  size_t max_connections = 4096;
  size_t max_queued_bytes_per_connection = size_t{256} << 20;
  net::SecretPtr secret;     // the job's shared secret (--secret-file); null: connections are not authenticated
  LogOptions log;

  int machine_id() const { return server_id / num_servers; }
  int local_server() const { return server_id % num_servers; }
  bool is_main() const { return local_server() == 0; }
  bool is_coordinator() const { return server_id == 0; }
};

// Parses argv (and the DGL environment); exit_code is set when the program
// should exit right away (--help, --version, or a usage error already printed).
struct ParsedOptions {
  GraphServerOptions options;
  int exit_code = -1;
};
ParsedOptions parse_graph_server_options(int argc, const char* const argv[]);

}  // namespace dgld::graph_server
