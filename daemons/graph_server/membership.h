#pragma once
// The coordinator's view of the job (server 0 of machine 0 only): who has
// registered, their ranks, heartbeats and barriers. Unlike DGL, a client that
// stops heartbeating or drops its connection is removed, and every barrier
// that waits on it fails with an error naming it. Once every client has left
// or was dropped, the next registration starts a new job with a clean slate,
// so long-lived servers (systemd) serve job after job. Thread-safe.

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dgld::graph_server {

enum class ClientRole { trainer = 0, sampler = 1 };
const char* role_name(ClientRole r);

struct ClientRecord {
  int client_id = -1;
  ClientRole role = ClientRole::trainer;
  int rank = -1;
  int machine_id = -1;
  int64_t pid = 0;
  std::string host;
  int group = -1;
  std::chrono::steady_clock::time_point last_seen;
  bool left = false;
  // "trainer 1 (client 3, pid 4242 on node-2)"
  std::string describe() const;
};

struct MembershipOptions {
  int expected_trainers = 0;  // 0 = unknown: barriers wait for those registered
  int expected_samplers = 0;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  // A server for one job (DGL's DistGraphServer, keep_alive False): clients
  // that leave do not start a new job, and every client gets a rank of its
  // own, in order of registration (DGL's clients all join before any leaves,
  // so theirs are distinct); off: long-lived servers serve job after job.
  bool one_job = false;
};

class Membership {
 public:
  using Clock = std::chrono::steady_clock;
  // Completes a barrier wait: ok, or the error that broke it.
  using BarrierDone = std::function<void(const Status&, int arrived)>;

  explicit Membership(MembershipOptions opts) : opts_(opts) {}

  // job_trainers: the job's trainer count as the client was told (0:
  // unknown); without MembershipOptions::expected_trainers the coordinator
  // waits for the largest announced count at trainer barriers, so a barrier
  // cannot complete before every trainer of the job has registered.
  Result<ClientRecord> register_client(ClientRole role, int machine_id, int64_t pid, const std::string& host,
                                       int group, int requested_rank, int job_trainers = 0);
  // Refreshes a client's heartbeat; not_found if it is unknown or was dropped.
  Status heartbeat(int client_id);
  // Arrives at barrier `name` of `role`. `done` is called once, possibly right
  // away, possibly later from another thread (when the last client arrives,
  // a client is dropped, or sweep() sees the deadline pass).
  void barrier(int client_id, ClientRole role, const std::string& name, Clock::time_point deadline,
               BarrierDone done);
  // An orderly leave: no error for anyone.
  Status leave(int client_id);
  // The client's connection closed: drop it unless it left.
  void connection_lost(int client_id, const std::string& why);
  // Drops clients whose last heartbeat is older than the timeout and expires
  // overdue barriers. Call periodically.
  void sweep(Clock::time_point now = Clock::now());

  std::optional<ClientRecord> find(int client_id) const;
  // Every client dropped in this job, and the trainers alone (what the
  // heartbeat reply tells clients: a dead sampler-worker is its trainer's
  // data loader's business, not a reason to stop the job).
  std::vector<std::string> dropped() const;
  std::vector<std::string> dropped_trainers() const;
  int num_active() const;
  const MembershipOptions& options() const { return opts_; }

 private:
  struct PendingBarrier {
    std::map<int, BarrierDone> waiters;  // client id -> completion
    Clock::time_point deadline;
  };
  void drop_locked(ClientRecord& c, const std::string& why, std::vector<std::function<void()>>& fire);
  void try_complete_locked(ClientRole role, const std::string& name, std::vector<std::function<void()>>& fire);
  int expected(ClientRole role) const;
  int active_count_locked(ClientRole role) const;

  MembershipOptions opts_;
  mutable std::mutex mu_;
  std::map<int, ClientRecord> clients_;
  std::map<std::pair<int, std::string>, PendingBarrier> barriers_;  // (role, name)
  std::vector<std::string> dropped_;  // descriptions of dropped clients, in order
  std::vector<std::string> dropped_trainers_;
  std::map<int, std::string> first_drop_by_role_;
  std::map<int, std::string> dropped_by_id_;  // client id -> why, so a dropped client that wakes up hears why
  int next_id_ = 0;
  int announced_trainers_ = 0;  // the largest job_trainers of this job's registrations
};

}  // namespace dgld::graph_server
