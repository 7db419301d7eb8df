#pragma once
// The graph-server's insides (server.h), private to it:
//   server.cpp             loading the partition, sessions, the handler table, the lifecycle
//   server_membership.cpp  register, hello, heartbeats, barriers, leave, shutdown, stats
//   server_kvstore.cpp     pull, push, create, delete, list of the tensors
//   server_graph.cpp       graph info, degrees, find_edges and neighbour sampling

#include "daemons/graph_server/server.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/sampling/sampling_spec.h"
#include "common/shm/naming.h"
#include "common/ip_config.h"
#include "common/logging.h"
#include "common/net/io_threads.h"
#include "common/net/metrics_http.h"
#include "common/net/rpc_server.h"
#include "common/part_config.h"
#include "common/process_memory.h"
#include "common/partition/partition.h"
#include "common/sampling/neighbor_sampling.h"
#include "common/sampling/thread_pool.h"
#include "daemons/graph_server/membership.h"
#include "daemons/graph_server/tensor_table.h"
#include "schemas/cluster_generated.h"
#include "schemas/graph_generated.h"
#include "schemas/kvstore_generated.h"
#include "schemas/rpc_generated.h"

namespace dgld::graph_server {

using net::Message;
using net::OutBlob;
using net::OutMessage;
using net::RequestContext;
using Clock = std::chrono::steady_clock;

inline std::shared_ptr<spdlog::logger> log() {
  static auto l = logger("graph");
  return l;
}

// Latency histogram with power-of-two microsecond buckets.
struct KindStats {
  uint64_t requests = 0, errors = 0;
  std::array<uint64_t, 32> buckets{};
  void record(double us) {
    ++requests;
    int b = 0;
    while (b < 31 && (1ull << b) < us) ++b;
    ++buckets[b];
  }
  double percentile(double p) const {
    uint64_t target = static_cast<uint64_t>(p * requests);
    uint64_t seen = 0;
    for (int b = 0; b < 32; ++b) {
      seen += buckets[b];
      if (seen > target) return static_cast<double>(1ull << b);
    }
    return 0;
  }
};


// Blob `index` of a request as int64 ids.
inline Result<std::span<const int64_t>> id_blob(const Message& m, size_t index, const char* what, size_t max_ids) {
  if (m.blobs.size() <= index) {
    return invalid_argument(std::string("request carries no ") + what + " (blob " + std::to_string(index) + ")");
  }
  const auto& b = m.blobs[index];
  if (b.size() % sizeof(int64_t) != 0) {
    return invalid_argument(std::string(what) + " blob of " + std::to_string(b.size()) +
                            " bytes is not a whole number of int64 ids");
  }
  const size_t n = b.size() / sizeof(int64_t);
  if (n > max_ids) {
    return resource_exhausted(std::string(what) + ": " + std::to_string(n) + " ids in one request, over the cap of " +
                              std::to_string(max_ids) + " (--max-ids-per-request); split the request");
  }
  return std::span<const int64_t>(reinterpret_cast<const int64_t*>(b.data()), n);
}

template <typename Builder>
OutMessage finish(fbs::MessageKind kind, flatbuffers::FlatBufferBuilder& fbb, Builder build) {
  fbb.Finish(build(fbb));
  return OutMessage(kind, fbb);
}

inline OutBlob bytes_blob(size_t n, uint8_t** data) {
  std::shared_ptr<uint8_t[]> buf(new uint8_t[n ? n : 1]);
  *data = buf.get();
  return OutBlob{buf.get(), n, std::shared_ptr<const void>(buf, buf.get())};
}

// Average bytes per contiguous run above which pull replies are sent from
// shared memory without a gather copy.
constexpr size_t kMinZeroCopyPiece = 16 << 10;

inline ClientRole to_role(fbs::Role r) { return r == fbs::Role::Sampler ? ClientRole::sampler : ClientRole::trainer; }

struct GraphServer::Impl {
  GraphServerOptions opts;
  PartitionConfig config;
  std::vector<MachineAddress> machines;
  std::unique_ptr<MappedPartition> part;
  IdRange node_range, edge_range;
  AdjacencyView inner_in;  // in-edges of inner nodes only (weights align with edge tensors)
  std::unique_ptr<TensorTable> tensors;
  std::unique_ptr<Membership> membership;  // coordinator only

  // Threads a large sampling request spreads over while no other request
  // holds them (see on_sample).
  std::unique_ptr<ThreadPool> sample_pool;
  net::Dispatcher dispatcher;
  std::unique_ptr<net::IoThreads> io;
  std::unique_ptr<net::RpcServer> rpc;
  std::unique_ptr<net::MetricsHttpServer> metrics;  // --metrics-port

  struct Session {
    int client_id = -1;
    ClientRole role = ClientRole::trainer;
    bool left = false;
  };
  std::mutex sessions_mu;
  std::map<const void*, Session> sessions;  // by RequestContext::caller_id
  std::set<int> clients_gone;               // client ids that left or whose connection closed

  mutable std::mutex stats_mu;
  std::map<std::string, KindStats> stats;
  Clock::time_point started = Clock::now();

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::string stop_reason;
  std::thread sweeper;

  std::string name() const { return "graph-server " + std::to_string(opts.server_id); }

  Status init();
  void register_handlers();
  template <typename T>
  void add(fbs::MessageKind kind, const char* type, bool needs_session,
           std::function<void(const RequestContext&, Message&&)> fn);
  Result<Session> session_of(const RequestContext& ctx);
  void end_session(const void* caller_id, const Status& st);
  // opts.exit_when_clients_leave: stops the server once every expected client
  // is gone and no session is open (called with sessions_mu held).
  void stop_when_clients_gone_locked();
  void request_stop(const std::string& reason);
  // Until the server stops; with exit_when_clients_leave an error when the
  // clients it still expects do not come within opts.client_wait.
  Status wait_for_stop();
  std::string stats_json() const { return stats_object().dump(); }
  nlohmann::json stats_object() const;
  // --metrics-port: the Prometheus endpoint beside the RPC port.
  Status start_metrics(const std::string& host);
  // The process's memory as read (common/process_memory.h), its partition
  // files' bytes and the bytes of the tensors it serves from shared memory.
  nlohmann::json memory_json(const ProcessMemory& now) const;

  // Handlers.
  void on_register(const RequestContext& ctx, Message&& m);
  void on_hello(const RequestContext& ctx, Message&& m);
  void on_heartbeat(const RequestContext& ctx, Message&& m);
  void on_barrier(const RequestContext& ctx, Message&& m);
  void on_leave(const RequestContext& ctx, Message&& m);
  void on_shutdown(const RequestContext& ctx, Message&& m);
  void on_stats(const RequestContext& ctx, Message&& m);
  void on_pull(const RequestContext& ctx, Message&& m);
  void on_push(const RequestContext& ctx, Message&& m);
  void on_create(const RequestContext& ctx, Message&& m);
  void on_delete(const RequestContext& ctx, Message&& m);
  void on_list(const RequestContext& ctx, Message&& m);
  void on_graph_info(const RequestContext& ctx, Message&& m);
  void on_degrees(const RequestContext& ctx, Message&& m);
  void on_find_edges(const RequestContext& ctx, Message&& m);
  void on_sample(const RequestContext& ctx, Message&& m);

  // Global ids -> local rows of `t`, or an error naming the first foreign id.
  Result<std::vector<int64_t>> local_rows(const ServedTensor& t, std::span<const int64_t> ids, const char* op) const {
    std::vector<int64_t> rows(ids.size());
    const int64_t first = t.first_global_row, n = t.num_rows();
    for (size_t i = 0; i < ids.size(); ++i) {
      // Compared before subtracting: a hostile id such as INT64_MIN must not overflow.
      if (ids[i] < first || ids[i] - first >= n) {
        return invalid_argument(std::string(op) + " '" + t.name + "': id " + std::to_string(ids[i]) +
                                " is not owned by machine " + std::to_string(opts.machine_id()) + " (owns [" +
                                std::to_string(first) + ", " + std::to_string(first + n) + "))");
      }
      rows[i] = ids[i] - first;
    }
    return rows;
  }

  // Global node id -> inner local id, or an error naming the id and the range.
  Result<int64_t> local_node(int64_t gid) const {
    if (gid < node_range.start || gid >= node_range.end) {
      return invalid_argument("node id " + std::to_string(gid) + " is not owned by machine " +
                              std::to_string(opts.machine_id()) + " (owns [" + std::to_string(node_range.start) +
                              ", " + std::to_string(node_range.end) + "))");
    }
    return gid - node_range.start;
  }
};

}  // namespace dgld::graph_server
