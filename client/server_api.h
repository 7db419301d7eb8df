#pragma once
// Typed calls to one graph-server over one connection: every message of
// schemas/cluster.fbs, kvstore.fbs and graph.fbs as a function with a
// deadline. This is the layer DistGraph / DistTensor build on; tests and
// benchmarks use it directly. Errors name the server.

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/kvstore_types.h"
#include "common/net/auth.h"
#include "common/net/rpc_client.h"
#include "common/sampling/sampling_spec.h"
#include "common/status.h"

namespace dgld::client {

using std::chrono::milliseconds;

using dgld::CreateTensor;
using dgld::Init;
using dgld::kOrigIdTensor;
using dgld::Policy;
using dgld::Role;

struct Registration {
  int client_id = -1;
  int rank = -1;
  milliseconds heartbeat_interval{0};
  milliseconds heartbeat_timeout{0};
  int expected_clients = 0;
};

struct ServerGraphInfo {
  std::string graph_name;
  int64_t num_nodes = 0, num_edges = 0;
  int part_id = 0, num_parts = 0, server_id = 0;
  int64_t num_inner_nodes = 0, num_inner_edges = 0;
  std::string part_config;  // the config the server loaded (absolute, on its machine); empty from older servers
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::float32;
  std::vector<int64_t> shape;  // local shape on the server's machine
  Policy policy = Policy::node;
  bool persistent = false;
  std::string shm_name;
};

// Rows pulled from a server: `data` holds ids.size() rows of row_bytes each.
struct PulledRows {
  DType dtype = DType::float32;
  std::vector<int64_t> row_shape;
  net::ByteBuffer data;
  size_t row_bytes() const;
};

struct Edges {
  std::vector<int64_t> src, dst, eid;
};

// One server's answer to SampleNeighbors: the sampled edges of each seed,
// in the request's seed order, one seed's run after another.
struct SampledNeighbors {
  net::ByteBuffer nbr_bytes, eid_bytes;  // int64: neighbour (global id), edge id
  net::ByteBuffer etype_bytes;           // int32 edge types (per-edge-type sampling only), else empty
  std::vector<int64_t> counts;           // edges per seed, parallel to the seeds
  std::span<const int64_t> nbr() const { return as_ids(nbr_bytes); }
  std::span<const int64_t> eid() const { return as_ids(eid_bytes); }
  std::span<const int32_t> etype() const {
    return {reinterpret_cast<const int32_t*>(etype_bytes.data()), etype_bytes.size() / sizeof(int32_t)};
  }
  // ok when there is one count per seed, none negative, adding up to the
  // edges, and as many edge ids as neighbours; otherwise says what is wrong.
  Status check(size_t num_seeds) const;

 private:
  static std::span<const int64_t> as_ids(const net::ByteBuffer& b) {
    return {reinterpret_cast<const int64_t*>(b.data()), b.size() / sizeof(int64_t)};
  }
};

// One (src, dst, eid) triple per edge of `s`, the answer for `seeds`; an
// out-edge goes from its seed, an in-edge to it. invalid_argument when the
// counts do not fit the seeds and edges (finish_sample's replies always do).
Result<Edges> to_edges(const SampledNeighbors& s, std::span<const int64_t> seeds, bool out_edges);

// One layer of sampling on one server: the layer's SamplingSpec (one fanout,
// or one row of per-edge-type fanouts) and the layer's random seed.
struct SampleRequest {
  SamplingSpec spec{.fanouts = {10}};
  uint64_t seed = 0;
};

class ServerConnection {
 public:
  // Connects with backoff until `connect_timeout`.
  // With `secret`, the connection authenticates (net/auth.h) first.
  static Result<std::unique_ptr<ServerConnection>> connect(net::asio::io_context& io, const std::string& host,
                                                           uint16_t port, int server_id,
                                                           milliseconds connect_timeout = milliseconds(30000),
                                                           milliseconds call_timeout = milliseconds(60000),
                                                           net::SecretPtr secret = nullptr,
                                                           net::TrafficTag traffic = {});

  const std::string& peer() const { return rpc_->peer(); }
  net::RpcClient& rpc() { return *rpc_; }
  void set_call_timeout(milliseconds t) { timeout_ = t; }

  // Liveness: a Pong within `timeout`, or an error naming the server.
  Status ping(milliseconds timeout);

  // Membership (coordinator).
  Result<Registration> register_client(Role role, int machine_id, int group = -1, int requested_rank = -1,
                                       int job_trainers = 0);
  Status hello(int client_id, Role role, int machine_id);
  // Returns the coordinator's list of dropped clients.
  Result<std::vector<std::string>> heartbeat(int client_id);
  Status barrier(int client_id, Role role, const std::string& name, milliseconds timeout);
  Status leave(int client_id);
  Status shutdown(const std::string& reason);
  Result<std::string> stats();

  // KVStore.
  Result<PulledRows> pull(const std::string& name, std::span<const int64_t> ids);
  // Rows straight into `out` (ids.size() * row_bytes bytes); the tensor's row
  // size must be `row_bytes`. Large pulls are split into requests of about
  // kPullChunkBytes that are all in flight at once, so the server gathers
  // later chunks while earlier ones are on the wire.
  Status pull_into(const std::string& name, std::span<const int64_t> ids, void* out, size_t row_bytes);
  static constexpr size_t kPullChunkBytes = 4 << 20;
  // Starts a pull without waiting; finish with finish_pull(). Lets a caller
  // keep requests to several servers in flight at once.
  // With `dst`, rows of the expected size are received straight into it.
  net::PendingCall start_pull(const std::string& name, std::span<const int64_t> ids, uint8_t* dst = nullptr,
                              size_t dst_bytes = 0);
  Result<PulledRows> finish_pull(net::PendingCall& call);
  // ack=false: fire-and-forget (errors are logged by the server only).
  Status push(const std::string& name, std::span<const int64_t> ids, DType dtype, const void* rows,
              size_t row_bytes, bool ack = true);
  Result<bool> create_tensor(const CreateTensor& spec);
  Status delete_tensor(const std::string& name);
  Result<std::vector<TensorInfo>> list_tensors();

  // Graph.
  Result<ServerGraphInfo> graph_info();
  Result<std::vector<int64_t>> degrees(std::span<const int64_t> nodes, bool out);
  Result<Edges> find_edges(std::span<const int64_t> eids);
  // One (src, dst, eid) triple per sampled edge, grouped by seed in seed order.
  Result<Edges> sample_neighbors(std::span<const int64_t> seeds, const SampleRequest& req);
  // The same in two steps, as the server sends it; `num_seeds` is the number
  // of seeds the call was started with (the reply is checked against it).
  net::PendingCall start_sample(std::span<const int64_t> seeds, const SampleRequest& req);
  // `typed`: the request had etype_fanouts (the reply then carries edge types).
  Result<SampledNeighbors> finish_sample(net::PendingCall& call, size_t num_seeds, bool typed = false);

 private:
  explicit ServerConnection(std::shared_ptr<net::RpcClient> rpc, milliseconds t) : rpc_(std::move(rpc)), timeout_(t) {}
  Result<net::Message> call(net::OutMessage m) { return rpc_->call(std::move(m), timeout_); }
  Result<net::Message> wait(net::PendingCall& c) { return rpc_->wait(c, net::Clock::now() + timeout_); }

  std::shared_ptr<net::RpcClient> rpc_;
  milliseconds timeout_;
};

// Machine 0's main server's graph info over a connection made for the
// purpose (authenticated with `secret_file` when given): how a process that
// was given no partition config learns the job's (DGL's DistGraph takes the
// graph from its servers). Errors name the server or the file.
Result<ServerGraphInfo> query_graph_info(const std::string& ip_config, const std::string& secret_file,
                                         milliseconds timeout);

}  // namespace dgld::client
