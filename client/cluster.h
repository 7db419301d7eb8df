#pragma once
// Cluster: a trainer's or sampler's membership in a dgld job, DGL's
// dgl.distributed.initialize(). It reads ip_config and the partition config,
// finds which machine it runs on, connects to every graph-server (with
// deadlines), registers with the coordinator (server 0) and says Hello to the
// others, and keeps a heartbeat thread going. Remote requests to a machine go
// to one of its servers picked at random at connect time (load balancing over
// backup servers); KvCreate/KvDelete/KvList go to its main server. The
// machine's own partition is read with no request through LocalPartition.
//
// A Cluster owns its connections and its LocalPartition; DistGraph,
// DistTensor and DistNeighborSource borrow it and must not outlive it.
// Methods are safe to call from several threads.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/server_api.h"
#include "common/ip_config.h"
#include "common/net/auth.h"
#include "common/part_config.h"
#include "common/partition/partition_book.h"
#include "common/status.h"

namespace dgld::net {
class IoThreads;
}

namespace dgld::client {

class LocalPartition;

struct ClusterOptions {
  std::filesystem::path ip_config;
  std::filesystem::path part_config;
  Role role = Role::trainer;
  int machine_id = -1;      // -1: the one ip_config line naming a local interface
  int num_servers = 1;      // graph-servers per machine
  int requested_rank = -1;  // -1: the coordinator's next free rank
  int group = -1;           // a sampler's trainer rank
  int num_trainers = 0;     // in the job; 0: the coordinator's count, else one per machine
  std::string job_id;       // shared-memory job id; empty: default_job_id()
  std::chrono::milliseconds connect_timeout{30000};
  std::chrono::milliseconds call_timeout{60000};
  std::chrono::milliseconds attach_timeout{30000};  // waiting for shared memory
  uint64_t balance_seed = 0;                        // 0: random; else fixes the server picks
  int io_threads = 2;
  net::SecretPtr secret;  // the job's shared secret; every connection authenticates with it (null: none)
};

// The one place a process's flags become its ClusterOptions (trainer-host,
// sampler-worker and the Python package all join through it), so every
// member of a job joins with the same rules: shared memory is waited for as
// long as the servers are, and the secret comes from --secret-file, else
// DGLD_SECRET_FILE, else none. invalid_argument for a sampler without its
// trainer's rank, a non-positive timeout, or an unreadable secret file.
struct JoinFlags {
  std::filesystem::path ip_config, part_config;
  Role role = Role::trainer;
  int machine_id = -1, num_servers = 1, rank = -1, group = -1, num_trainers = 0;
  std::string job_id;
  std::chrono::milliseconds connect_timeout{30000}, call_timeout{60000};
  std::string secret_file;  // empty: DGLD_SECRET_FILE, else none
  net::SecretPtr secret;    // already read (wins over secret_file)
};
Result<ClusterOptions> join_options(const JoinFlags& flags);

// IPv4 addresses of this host's interfaces (getifaddrs), "127.0.0.1" included.
Result<std::vector<std::string>> local_ipv4_addresses();
// The machine whose ip_config line resolves to one of `local_addresses`;
// when several lines do (one box simulating several machines), the first,
// with a warning (DGL's rule). invalid_argument, asking for --machine-id,
// when no line matches. `source` names the file.
Result<int> detect_machine_id(const std::vector<MachineAddress>& machines,
                              const std::vector<std::string>& local_addresses,
                              const std::string& source);

class Cluster {
 public:
  static Result<std::unique_ptr<Cluster>> connect(const ClusterOptions& options);
  // Leaves (if not done yet) and closes every connection.
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  Role role() const { return options_.role; }
  int machine_id() const { return machine_id_; }
  int client_id() const { return reg_.client_id; }
  int rank() const { return reg_.rank; }
  int num_trainers() const { return num_trainers_; }
  int num_machines() const { return static_cast<int>(machines_.size()); }
  int num_servers() const { return options_.num_servers; }
  const std::string& job_id() const { return job_id_; }
  // The job's secret (null: none), for connections to the job's other processes.
  const net::SecretPtr& secret() const { return options_.secret; }
  const PartitionConfig& config() const { return config_; }
  const RangePartitionBook& partition_book() const { return *book_; }
  const std::vector<MachineAddress>& machines() const { return machines_; }
  LocalPartition& local() { return *local_; }
  bool has_local() const { return local_ != nullptr; }
  // This process's traffic over its server connections, by machine (traffic.h);
  // also for the process's other connections to peers of the job.
  const std::shared_ptr<net::TrafficCounters>& traffic() const { return traffic_; }

  // Server `local_index` of `machine`; its main server (index 0); the server
  // this client sends that machine's requests to.
  ServerConnection& server(int machine, int local_index) { return *servers_[machine][local_index]; }
  ServerConnection& main_server(int machine) { return server(machine, 0); }
  ServerConnection& server_for(int machine) { return server(machine, pick_[machine]); }

  // Runs fn(m) for every machine in `machines` at once (one thread each, the
  // last on the caller's) and returns the first error; every call finishes.
  Status for_each_machine(const std::vector<int>& machines, const std::function<Status(int)>& fn);

  // Waits until every client of this role reached barrier `name`.
  Status barrier(const std::string& name, std::chrono::milliseconds timeout);
  // ok while heartbeats succeed and the coordinator has dropped nobody;
  // afterwards the first failure (sticky), naming the server or the client.
  Status health() const;
  // Every server answers a ping within `timeout` (all pinged at once), or an
  // error naming each one that does not: "graph-server 1 (machine 1,
  // 10.0.0.2:30050) does not answer: ...".
  Status check_servers(std::chrono::milliseconds timeout);
  // What is wrong with the job, for the message of an error whose cause lies
  // elsewhere (a collective that failed because a peer died): health() after
  // a heartbeat sent now, and check_servers(); ok when both are.
  Status diagnose(std::chrono::milliseconds timeout);
  // Orderly leave: stops heartbeats and tells the coordinator. Idempotent.
  Status leave();
  // Leaves, then asks every server to exit (the coordinator last). Rank 0
  // calls this at the end of a job.
  Status shutdown_servers(const std::string& reason);
  // Closes every server connection at once, without leaving: calls in flight
  // fail with `closed` now instead of at their deadline. For a process that
  // is being interrupted (Ctrl-C); afterwards every call fails (the
  // coordinator notices the missing heartbeats).
  void close_connections();

 private:
  Cluster() = default;
  Status start(const ClusterOptions& options);
  void heartbeat_loop();
  void heartbeat_once();  // updates health()
  void set_health(Status st);

  ClusterOptions options_;
  PartitionConfig config_;
  std::vector<MachineAddress> machines_;
  std::unique_ptr<RangePartitionBook> book_;
  int machine_id_ = -1;
  int num_trainers_ = 0;
  std::string job_id_;
  Registration reg_;
  std::unique_ptr<net::IoThreads> io_;  // declared before the connections: destroyed after them
  std::shared_ptr<net::TrafficCounters> traffic_ = std::make_shared<net::TrafficCounters>();
  std::vector<std::vector<std::unique_ptr<ServerConnection>>> servers_;  // [machine][local index]
  std::vector<int> pick_;                                                // [machine]
  std::unique_ptr<LocalPartition> local_;

  struct Heartbeat;
  std::unique_ptr<Heartbeat> hb_;
};

}  // namespace dgld::client
