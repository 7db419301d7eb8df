#include "daemons/graph_server/server.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/sampling/sampling_spec.h"
#include "common/shm/naming.h"
#include "common/ip_config.h"
#include "common/logging.h"
#include "common/net/io_threads.h"
#include "common/net/rpc_server.h"
#include "common/part_config.h"
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

namespace {

std::shared_ptr<spdlog::logger> log() {
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

int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Blob `index` of a request as int64 ids.
Result<std::span<const int64_t>> id_blob(const Message& m, size_t index, const char* what, size_t max_ids) {
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

OutBlob bytes_blob(size_t n, uint8_t** data) {
  std::shared_ptr<uint8_t[]> buf(new uint8_t[n ? n : 1]);
  *data = buf.get();
  return OutBlob{buf.get(), n, std::shared_ptr<const void>(buf, buf.get())};
}

// Average bytes per contiguous run above which pull replies are sent from
// shared memory without a gather copy.
constexpr size_t kMinZeroCopyPiece = 16 << 10;

ClientRole to_role(fbs::Role r) { return r == fbs::Role::Sampler ? ClientRole::sampler : ClientRole::trainer; }

}  // namespace

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

  struct Session {
    int client_id = -1;
    ClientRole role = ClientRole::trainer;
    bool left = false;
  };
  std::mutex sessions_mu;
  std::map<const void*, Session> sessions;  // by RequestContext::caller_id

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
  void request_stop(const std::string& reason);
  std::string stats_json() const;

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

Status GraphServer::Impl::init() {
  DGLD_ASSIGN_OR_RETURN(config, load_part_config(opts.part_config));
  DGLD_ASSIGN_OR_RETURN(machines, load_ip_config(opts.ip_config));
  if (static_cast<int>(machines.size()) != config.num_parts) {
    return invalid_argument(opts.ip_config.string() + " lists " + std::to_string(machines.size()) +
                            " machines but " + opts.part_config.string() + " has num_parts=" +
                            std::to_string(config.num_parts) + " (one machine per partition)");
  }
  const int m = opts.machine_id();
  if (m >= static_cast<int>(machines.size())) {
    return invalid_argument("--server-id " + std::to_string(opts.server_id) + " with --num-servers " +
                            std::to_string(opts.num_servers) + " is machine " + std::to_string(m) + ", but " +
                            opts.ip_config.string() + " lists only " + std::to_string(machines.size()));
  }
  if (opts.job_id.empty()) opts.job_id = shm::default_job_id(config, machines[m]);
  node_range = config.node_map[m];
  edge_range = config.edge_map[m];

  auto t0 = Clock::now();
  DGLD_ASSIGN_OR_RETURN(part, open_partition(config, m, opts.is_main() && opts.verify_checksums));
  const int64_t ni = part->num_inner_nodes();
  inner_in.indptr = part->in_edges().indptr.first(static_cast<size_t>(ni) + 1);
  const auto ne = static_cast<size_t>(inner_in.indptr[ni]);
  inner_in.indices = part->in_edges().indices.first(ne);
  inner_in.eids = part->in_edges().eids.first(ne);

  tensors = std::make_unique<TensorTable>(opts.job_id, m, opts.is_main(), node_range.start, node_range.size(),
                                          edge_range.start, edge_range.size(), opts.attach_timeout);
  if (config.types.present()) {
    tensors->set_node_rows([this, m](const std::string& name) { return node_tensor_range(config, m, name); });
  }
  DGLD_RETURN_IF_ERROR(tensors->init());
  if (opts.is_main()) {
    for (const auto& t : part->node_tensors()) {
      TensorSpec spec{t.name, t.dtype, t.shape, PartPolicy::node};
      const int type = node_tensor_type(config, t.name);
      spec.shape[0] = type < 0 ? config.num_nodes : config.types.ntype_count[type];
      spec.persistent = true;
      DGLD_RETURN_IF_ERROR(tensors->add(spec, t.data));
    }
    // Every node's original id (before the partitioner relabelled them), as
    // DGL's orig_nids: offline inference writes outputs in that order.
    if (!part->node_tensor(kOrigIdTensor)) {
      TensorSpec spec{kOrigIdTensor, DType::int64, {config.num_nodes}, PartPolicy::node};
      spec.persistent = true;
      DGLD_RETURN_IF_ERROR(tensors->add(spec, part->orig_node_ids().data()));
    }
    for (const auto& t : part->edge_tensors()) {
      TensorSpec spec{t.name, t.dtype, t.shape, PartPolicy::edge};
      spec.shape[0] = config.num_edges;
      spec.persistent = true;
      DGLD_RETURN_IF_ERROR(tensors->add(spec, t.data));
    }
  }
  log()->info("{} partition {} of {}: {} inner nodes, {} local nodes, {} local edges, {} node tensors ({} ms)",
              opts.is_main() ? "loaded" : "attached to", m, config.graph_name, ni, part->num_local_nodes(),
              part->num_local_edges(), part->node_tensors().size(),
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());

  if (opts.is_coordinator()) {
    MembershipOptions mo;
    const int per_trainer = 1 + opts.num_samplers;
    if (opts.num_clients > 0) {
      if (opts.num_clients % per_trainer != 0) {
        return invalid_argument("--num-clients " + std::to_string(opts.num_clients) +
                                " is not a multiple of 1 + --num-samplers (" + std::to_string(per_trainer) + ")");
      }
      mo.expected_trainers = opts.num_clients / per_trainer;
      mo.expected_samplers = opts.num_clients - mo.expected_trainers;
    }
    mo.heartbeat_interval = opts.heartbeat_interval;
    mo.heartbeat_timeout = opts.heartbeat_timeout;
    membership = std::make_unique<Membership>(mo);
  }

  sample_pool = std::make_unique<ThreadPool>(opts.num_threads);
  register_handlers();
  if (!opts.listen) return Status::ok();
  io = std::make_unique<net::IoThreads>(2);
  net::ServerOptions so;
  so.name = name();
  so.handler_threads = opts.num_threads;
  so.limits = opts.limits;
  so.secret = opts.secret;
  so.max_connections = opts.max_connections;
  so.max_queued_bytes_per_connection = opts.max_queued_bytes_per_connection;
  so.inline_kinds = {static_cast<uint16_t>(fbs::MessageKind::SampleNeighbors),
                     static_cast<uint16_t>(fbs::MessageKind::Heartbeat), static_cast<uint16_t>(fbs::MessageKind::Ping)};
  rpc = std::make_unique<net::RpcServer>(io->context(), dispatcher, so);
  rpc->set_close_callback([this](const auto& c, const Status& st) { end_session(c.get(), st); });
  const std::string host = opts.listen_any ? "0.0.0.0" : machines[m].host;
  const int port = machines[m].base_port + opts.local_server();
  if (port > 65535) return invalid_argument("port " + std::to_string(port) + " is out of range");
  DGLD_RETURN_IF_ERROR(rpc->listen(host, static_cast<uint16_t>(port)));
  log()->info("{} ({} server of machine {}) listening on {}:{}", name(), opts.is_main() ? "main" : "backup", m,
              host, port);
  if (membership) {
    sweeper = std::thread([this] {
      std::unique_lock lock(stop_mu);
      while (!stopping) {
        stop_cv.wait_for(lock, opts.heartbeat_interval / 2);
        lock.unlock();
        membership->sweep();
        lock.lock();
      }
    });
  }
  return Status::ok();
}

template <typename T>
void GraphServer::Impl::add(fbs::MessageKind kind, const char* type, bool needs_session,
                            std::function<void(const RequestContext&, Message&&)> fn) {
  dispatcher.add<T>(kind, type, [this, type, needs_session, fn](const RequestContext& ctx, Message&& m) {
    auto t0 = Clock::now();
    if (needs_session) {
      if (auto s = session_of(ctx); !s.is_ok()) {
        {
          std::lock_guard lock(stats_mu);
          ++stats[type].errors;
        }
        log()->warn("{}: refused {} request {}: {}", ctx.peer(), type, ctx.header().request_id, s.status().message());
        return ctx.reply_error(s.status());
      }
    }
    fn(ctx, std::move(m));
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    std::lock_guard lock(stats_mu);
    stats[type].record(us);
  });
}

Result<GraphServer::Impl::Session> GraphServer::Impl::session_of(const RequestContext& ctx) {
  std::lock_guard lock(sessions_mu);
  auto it = sessions.find(ctx.caller_id());
  if (it == sessions.end()) {
    return invalid_argument("unregistered client: send RegisterClient (coordinator) or Hello first");
  }
  return it->second;
}

void GraphServer::Impl::end_session(const void* caller_id, const Status& st) {
  Session s;
  {
    std::lock_guard lock(sessions_mu);
    auto it = sessions.find(caller_id);
    if (it == sessions.end()) return;
    s = it->second;
    sessions.erase(it);
  }
  if (membership && !s.left) membership->connection_lost(s.client_id, st.message());
}

void GraphServer::Impl::register_handlers() {
  using K = fbs::MessageKind;
  auto bind = [this](void (Impl::*f)(const RequestContext&, Message&&)) {
    return [this, f](const RequestContext& ctx, Message&& m) { (this->*f)(ctx, std::move(m)); };
  };
  dispatcher.add<fbs::Ping>(K::Ping, "Ping", [](const RequestContext& ctx, Message&& m) {
    flatbuffers::FlatBufferBuilder fbb;
    ctx.reply(finish(K::Pong, fbb, [&](auto& b) { return fbs::CreatePong(b, m.as<fbs::Ping>()->sent_ns()); }));
  });
  add<fbs::Hello>(K::Hello, "Hello", false, bind(&Impl::on_hello));
  add<fbs::Shutdown>(K::Shutdown, "Shutdown", false, bind(&Impl::on_shutdown));
  add<fbs::Stats>(K::Stats, "Stats", false, bind(&Impl::on_stats));
  add<fbs::GraphInfo>(K::GraphInfo, "GraphInfo", false, bind(&Impl::on_graph_info));
  if (membership) {
    add<fbs::RegisterClient>(K::RegisterClient, "RegisterClient", false, bind(&Impl::on_register));
    add<fbs::Heartbeat>(K::Heartbeat, "Heartbeat", true, bind(&Impl::on_heartbeat));
    add<fbs::Barrier>(K::Barrier, "Barrier", true, bind(&Impl::on_barrier));
  }
  add<fbs::Leave>(K::Leave, "Leave", true, bind(&Impl::on_leave));
  add<fbs::KvPull>(K::KvPull, "KvPull", true, bind(&Impl::on_pull));
  add<fbs::KvPush>(K::KvPush, "KvPush", true, bind(&Impl::on_push));
  add<fbs::KvCreate>(K::KvCreate, "KvCreate", true, bind(&Impl::on_create));
  add<fbs::KvDelete>(K::KvDelete, "KvDelete", true, bind(&Impl::on_delete));
  add<fbs::KvList>(K::KvList, "KvList", true, bind(&Impl::on_list));
  add<fbs::Degrees>(K::Degrees, "Degrees", true, bind(&Impl::on_degrees));
  add<fbs::FindEdges>(K::FindEdges, "FindEdges", true, bind(&Impl::on_find_edges));
  add<fbs::SampleNeighbors>(K::SampleNeighbors, "SampleNeighbors", true, bind(&Impl::on_sample));
}

// ---- membership -----------------------------------------------------------

void GraphServer::Impl::on_register(const RequestContext& ctx, Message&& m) {
  const auto* r = m.as<fbs::RegisterClient>();
  auto rec = membership->register_client(to_role(r->role()), r->machine_id(), r->pid(),
                                         r->host() ? r->host()->str() : "", r->group(), r->requested_rank(),
                                         r->job_trainers());
  if (!rec.is_ok()) return ctx.reply_error(rec.status());
  {
    std::lock_guard lock(sessions_mu);
    sessions[ctx.caller_id()] = Session{rec->client_id, rec->role, false};
  }
  const auto& mo = membership->options();
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::RegisterReply, fbb, [&](auto& b) {
    return fbs::CreateRegisterReply(b, rec->client_id, rec->rank, static_cast<int>(mo.heartbeat_interval.count()),
                                    static_cast<int>(mo.heartbeat_timeout.count()),
                                    rec->role == ClientRole::trainer ? mo.expected_trainers : mo.expected_samplers);
  }));
}

void GraphServer::Impl::on_hello(const RequestContext& ctx, Message&& m) {
  const auto* h = m.as<fbs::Hello>();
  if (membership && !membership->find(h->client_id())) {
    return ctx.reply_error(not_found("client " + std::to_string(h->client_id()) +
                                     " is not registered with the coordinator (or was dropped)"));
  }
  {
    std::lock_guard lock(sessions_mu);
    sessions[ctx.caller_id()] = Session{h->client_id(), to_role(h->role()), false};
  }
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::HelloReply, fbb,
                   [&](auto& b) { return fbs::CreateHelloReply(b, opts.server_id, opts.machine_id()); }));
}

void GraphServer::Impl::on_heartbeat(const RequestContext& ctx, Message&& m) {
  if (Status st = membership->heartbeat(m.as<fbs::Heartbeat>()->client_id()); !st.is_ok()) {
    return ctx.reply_error(st);
  }
  auto dropped = membership->dropped_trainers();
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::HeartbeatReply, fbb, [&](auto& b) {
    return fbs::CreateHeartbeatReply(b, b.CreateVectorOfStrings(dropped));
  }));
}

void GraphServer::Impl::on_barrier(const RequestContext& ctx, Message&& m) {
  const auto* b = m.as<fbs::Barrier>();
  const int timeout_ms = b->timeout_ms() > 0 ? b->timeout_ms() : 600000;
  membership->barrier(b->client_id(), to_role(b->role()), b->name() ? b->name()->str() : "",
                      Clock::now() + std::chrono::milliseconds(timeout_ms),
                      [ctx](const Status& st, int arrived) {
                        if (!st.is_ok()) return ctx.reply_error(st);
                        flatbuffers::FlatBufferBuilder fbb;
                        ctx.reply(finish(fbs::MessageKind::BarrierReply, fbb,
                                         [&](auto& bb) { return fbs::CreateBarrierReply(bb, arrived); }));
                      });
}

void GraphServer::Impl::on_leave(const RequestContext& ctx, Message&& m) {
  int id = m.as<fbs::Leave>()->client_id();
  {
    std::lock_guard lock(sessions_mu);
    sessions[ctx.caller_id()].left = true;
  }
  if (membership) {
    if (Status st = membership->leave(id); !st.is_ok()) return ctx.reply_error(st);
  }
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::LeaveReply, fbb, [](auto& b) { return fbs::CreateLeaveReply(b); }));
}

void GraphServer::Impl::on_shutdown(const RequestContext& ctx, Message&& m) {
  const auto* s = m.as<fbs::Shutdown>();
  std::string reason = "shutdown requested by " + ctx.peer();
  if (s->reason() && s->reason()->size()) reason += ": " + s->reason()->str();
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::ShutdownReply, fbb, [](auto& b) { return fbs::CreateShutdownReply(b); }));
  request_stop(reason);
}

void GraphServer::Impl::on_stats(const RequestContext& ctx, Message&&) {
  std::string j = stats_json();
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::StatsReply, fbb,
                   [&](auto& b) { return fbs::CreateStatsReply(b, b.CreateString(j)); }));
}

std::string GraphServer::Impl::stats_json() const {
  nlohmann::json j;
  j["server_id"] = opts.server_id;
  j["machine_id"] = opts.machine_id();
  j["uptime_s"] = std::chrono::duration<double>(Clock::now() - started).count();
  j["rss_bytes"] = rss_bytes();
  j["connections"] = rpc ? rpc->num_connections() : 0;
  j["bytes_in"] = rpc ? rpc->bytes_in() : 0;
  j["bytes_out"] = rpc ? rpc->bytes_out() : 0;
  j["queued_reply_bytes"] = rpc ? rpc->queued_bytes() : 0;
  j["read_pauses"] = rpc ? rpc->read_pauses() : 0;
  j["refused_connections"] = rpc ? rpc->auth_failures() : 0;
  if (membership) j["registered_clients"] = membership->num_active();
  {
    std::lock_guard lock(stats_mu);
    for (const auto& [kind, s] : stats) {
      j["requests"][kind] = {{"count", s.requests},
                             {"errors", s.errors},
                             {"p50_us", s.percentile(0.5)},
                             {"p99_us", s.percentile(0.99)}};
    }
  }
  return j.dump();
}

void GraphServer::Impl::request_stop(const std::string& reason) {
  std::lock_guard lock(stop_mu);
  if (stopping) return;
  stopping = true;
  stop_reason = reason;
  stop_cv.notify_all();
}

// ---- KVStore ---------------------------------------------------------------

void GraphServer::Impl::on_pull(const RequestContext& ctx, Message&& m) {
  const auto* req = m.as<fbs::KvPull>();
  const std::string tname = req->name() ? req->name()->str() : "";
  auto t = tensors->find(tname);
  if (!t.is_ok()) return ctx.reply_error(t.status());
  auto ids = id_blob(m, 0, "ids", opts.max_ids_per_request);
  if (!ids.is_ok()) return ctx.reply_error(ids.status());
  const std::shared_ptr<ServedTensor>& tensor = *t;
  auto local = local_rows(*tensor, *ids, "pull");
  if (!local.is_ok()) return ctx.reply_error(local.status());
  // Runs of consecutive rows big enough go out straight from shared memory
  // (the tensor stays alive until written); small scattered rows are cheaper
  // to gather into one buffer than to hand the kernel piece by piece
  // (measured: 400-byte pieces halve the bandwidth).
  const size_t rb = tensor->row_bytes();
  const auto* base = static_cast<const uint8_t*>(tensor->storage->data());
  auto pieces = std::make_shared<std::vector<net::OutPiece>>();
  for (size_t i = 0; i < local->size();) {
    size_t j = i + 1;
    while (j < local->size() && (*local)[j] == (*local)[j - 1] + 1) ++j;
    pieces->push_back({base + static_cast<size_t>((*local)[i]) * rb, (j - i) * rb});
    i = j;
  }
  OutBlob blob;
  if (!pieces->empty() && local->size() * rb / pieces->size() >= kMinZeroCopyPiece) {
    blob.size = local->size() * rb;
    blob.pieces = std::move(pieces);
    blob.keep_alive = tensor;
  } else {
    uint8_t* out = nullptr;
    blob = bytes_blob(local->size() * rb, &out);
    if (Status st = tensor->storage->gather_rows(*local, out); !st.is_ok()) return ctx.reply_error(st);
  }
  auto shape = tensor->shape();
  std::vector<int64_t> row_shape(shape.begin() + 1, shape.end());
  flatbuffers::FlatBufferBuilder fbb;
  OutMessage reply = finish(fbs::MessageKind::KvPullReply, fbb, [&](auto& b) {
    return fbs::CreateKvPullReply(b, static_cast<uint32_t>(tensor->dtype()), b.CreateVector(row_shape));
  });
  reply.blobs.push_back(std::move(blob));
  ctx.reply(std::move(reply));
}

void GraphServer::Impl::on_push(const RequestContext& ctx, Message&& m) {
  const auto* req = m.as<fbs::KvPush>();
  const std::string tname = req->name() ? req->name()->str() : "";
  auto t = tensors->find(tname);
  if (!t.is_ok()) return ctx.reply_error(t.status());
  ServedTensor& tensor = **t;
  if (req->dtype() != static_cast<uint32_t>(tensor.dtype())) {
    return ctx.reply_error(invalid_argument("push '" + tname + "': rows are " +
                                            dtype_name(static_cast<DType>(req->dtype())) + ", the tensor is " +
                                            dtype_name(tensor.dtype())));
  }
  auto ids = id_blob(m, 0, "ids", opts.max_ids_per_request);
  if (!ids.is_ok()) return ctx.reply_error(ids.status());
  if (m.blobs.size() < 2 || m.blobs[1].size() != ids->size() * tensor.row_bytes()) {
    return ctx.reply_error(invalid_argument(
        "push '" + tname + "': expected " + std::to_string(ids->size()) + " rows of " +
        std::to_string(tensor.row_bytes()) + " bytes in blob 1, got " +
        (m.blobs.size() < 2 ? std::string("no blob") : std::to_string(m.blobs[1].size()) + " bytes")));
  }
  auto local = local_rows(tensor, *ids, "push");
  if (!local.is_ok()) return ctx.reply_error(local.status());
  const std::vector<int64_t>& rows = *local;
  if (Status st = tensor.storage->scatter_rows(rows, m.blobs[1].data()); !st.is_ok()) return ctx.reply_error(st);
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::KvPushReply, fbb,
                   [&](auto& b) { return fbs::CreateKvPushReply(b, static_cast<int64_t>(rows.size())); }));
}

void GraphServer::Impl::on_create(const RequestContext& ctx, Message&& m) {
  if (!opts.is_main()) {
    return ctx.reply_error(invalid_argument(name() + " is a backup server: send KvCreate to server 0 of machine " +
                                            std::to_string(opts.machine_id())));
  }
  const auto* r = m.as<fbs::KvCreate>();
  TensorSpec spec;
  spec.name = r->name() ? r->name()->str() : "";
  spec.dtype = static_cast<DType>(r->dtype());
  if (r->shape()) spec.shape.assign(r->shape()->begin(), r->shape()->end());
  spec.policy = r->policy() == fbs::PartPolicy::Edge ? PartPolicy::edge : PartPolicy::node;
  spec.init = static_cast<InitKind>(r->init());
  spec.init_a = r->init_a();
  spec.init_b = r->init_b();
  spec.seed = static_cast<uint64_t>(r->seed());
  spec.persistent = r->persistent();
  // A heterogeneous graph's "<ntype>/..." tensor has one row per node of the type.
  const int ntype = spec.policy == PartPolicy::node ? node_tensor_type(config, spec.name) : -1;
  const int64_t total = spec.policy == PartPolicy::edge ? config.num_edges
                        : ntype >= 0                   ? config.types.ntype_count[ntype]
                                                       : config.num_nodes;
  if (!spec.shape.empty() && spec.shape[0] != total) {
    return ctx.reply_error(invalid_argument(
        "create '" + spec.name + "': dim 0 is " + std::to_string(spec.shape[0]) + " but the graph has " +
        std::to_string(total) +
        (spec.policy == PartPolicy::edge ? " edges"
         : ntype >= 0                     ? " nodes of type '" + config.types.ntypes[ntype] + "'"
                                          : " nodes")));
  }
  // This machine's rows of it, against the cap.
  const IdRange range = spec.policy == PartPolicy::node ? node_tensor_range(config, opts.machine_id(), spec.name) : edge_range;
  double bytes = static_cast<double>(range.end - range.start) * static_cast<double>(dtype_size(spec.dtype));
  for (size_t i = 1; i < spec.shape.size(); ++i) bytes *= static_cast<double>(std::max<int64_t>(spec.shape[i], 0));
  if (bytes > static_cast<double>(opts.max_tensor_bytes)) {
    return ctx.reply_error(resource_exhausted("create '" + spec.name + "': " + std::to_string(bytes / (1 << 20)) +
                                              " MiB on machine " + std::to_string(opts.machine_id()) +
                                              ", over the cap of " + std::to_string(opts.max_tensor_bytes >> 20) +
                                              " MiB (--max-tensor-bytes)"));
  }
  auto created = tensors->create(spec);
  if (!created.is_ok()) return ctx.reply_error(created.status());
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::KvCreateReply, fbb,
                   [&](auto& b) { return fbs::CreateKvCreateReply(b, *created); }));
}

void GraphServer::Impl::on_delete(const RequestContext& ctx, Message&& m) {
  if (!opts.is_main()) {
    return ctx.reply_error(invalid_argument(name() + " is a backup server: send KvDelete to server 0 of machine " +
                                            std::to_string(opts.machine_id())));
  }
  const auto* r = m.as<fbs::KvDelete>();
  if (Status st = tensors->remove(r->name() ? r->name()->str() : ""); !st.is_ok()) return ctx.reply_error(st);
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::KvDeleteReply, fbb, [](auto& b) { return fbs::CreateKvDeleteReply(b); }));
}

void GraphServer::Impl::on_list(const RequestContext& ctx, Message&&) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fbs::TensorInfo>> infos;
  for (const auto& t : tensors->list()) {
    auto shape = t->shape();
    infos.push_back(fbs::CreateTensorInfo(fbb, fbb.CreateString(t->name), static_cast<uint32_t>(t->dtype()),
                                          fbb.CreateVector(shape),
                                          t->policy == PartPolicy::edge ? fbs::PartPolicy::Edge : fbs::PartPolicy::Node,
                                          t->persistent, fbb.CreateString(tensors->segment_for(t->name, t->policy))));
  }
  auto vec = fbb.CreateVector(infos);
  ctx.reply(finish(fbs::MessageKind::KvListReply, fbb, [&](auto& b) { return fbs::CreateKvListReply(b, vec); }));
}

// ---- graph queries and sampling -------------------------------------------

void GraphServer::Impl::on_graph_info(const RequestContext& ctx, Message&&) {
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::GraphInfoReply, fbb, [&](auto& b) {
    return fbs::CreateGraphInfoReply(b, b.CreateString(config.graph_name), config.num_nodes, config.num_edges,
                                     opts.machine_id(), config.num_parts, opts.server_id, part->num_inner_nodes(),
                                     part->num_inner_edges());
  }));
}

void GraphServer::Impl::on_degrees(const RequestContext& ctx, Message&& m) {
  const bool out = m.as<fbs::Degrees>()->out();
  auto ids = id_blob(m, 0, "node ids", opts.max_ids_per_request);
  if (!ids.is_ok()) return ctx.reply_error(ids.status());
  const AdjacencyView& adj = out ? part->out_edges() : inner_in;
  std::vector<int64_t> deg(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    auto local = local_node((*ids)[i]);
    if (!local.is_ok()) return ctx.reply_error(local.status());
    deg[i] = adj.degree(*local);
  }
  flatbuffers::FlatBufferBuilder fbb;
  OutMessage reply =
      finish(fbs::MessageKind::DegreesReply, fbb, [](auto& b) { return fbs::CreateDegreesReply(b); });
  reply.blobs.push_back(OutBlob::from_vector(std::move(deg)));
  ctx.reply(std::move(reply));
}

void GraphServer::Impl::on_find_edges(const RequestContext& ctx, Message&& m) {
  auto ids = id_blob(m, 0, "edge ids", opts.max_ids_per_request);
  if (!ids.is_ok()) return ctx.reply_error(ids.status());
  std::vector<int64_t> src(ids->size()), dst(ids->size());
  const auto globals = part->node_global_ids();
  for (size_t i = 0; i < ids->size(); ++i) {
    const int64_t eid = (*ids)[i];
    if (eid < edge_range.start || eid >= edge_range.end) {
      return ctx.reply_error(invalid_argument("edge id " + std::to_string(eid) + " is not owned by machine " +
                                              std::to_string(opts.machine_id()) + " (owns [" +
                                              std::to_string(edge_range.start) + ", " +
                                              std::to_string(edge_range.end) + "))"));
    }
    // Inner edges sit at positions [0, num_inner_edges) of the in-CSC, in global id order.
    const int64_t pos = eid - edge_range.start;
    auto row = std::upper_bound(inner_in.indptr.begin(), inner_in.indptr.end(), pos) - inner_in.indptr.begin() - 1;
    src[i] = globals[inner_in.indices[pos]];
    dst[i] = globals[row];
  }
  flatbuffers::FlatBufferBuilder fbb;
  OutMessage reply =
      finish(fbs::MessageKind::FindEdgesReply, fbb, [](auto& b) { return fbs::CreateFindEdgesReply(b); });
  reply.blobs.push_back(OutBlob::from_vector(std::move(src)));
  reply.blobs.push_back(OutBlob::from_vector(std::move(dst)));
  ctx.reply(std::move(reply));
}

void GraphServer::Impl::on_sample(const RequestContext& ctx, Message&& m) {
  const auto* req = m.as<fbs::SampleNeighbors>();
  auto parsed = read_sampling_spec(req->spec(), "SampleNeighbors from " + ctx.peer());
  if (!parsed.is_ok()) return ctx.reply_error(parsed.status());
  const SamplingSpec& spec = *parsed;
  if (spec.num_layers() != 1) {
    return ctx.reply_error(invalid_argument("sample_neighbors: a request samples one layer, this one has " +
                                            std::to_string(spec.num_layers())));
  }
  auto seeds = id_blob(m, 0, "seed ids", opts.max_ids_per_request);
  if (!seeds.is_ok()) return ctx.reply_error(seeds.status());
  const int64_t fanout = spec.fanouts[0];
  if (fanout > INT32_MAX) {
    return ctx.reply_error(invalid_argument("sample_neighbors: fanout " + std::to_string(fanout) + " is out of range"));
  }
  // With replacement each seed gives `fanout` edges whatever its degree: the
  // reply (two int64 ids per edge) is capped like an id list.
  if (spec.replace && fanout > 0 && static_cast<uint64_t>(fanout) * seeds->size() > opts.max_ids_per_request) {
    return ctx.reply_error(resource_exhausted(
        "sample_neighbors: fanout " + std::to_string(fanout) + " with replacement for " +
        std::to_string(seeds->size()) + " seeds is over the cap of " + std::to_string(opts.max_ids_per_request) +
        " sampled edges per request (--max-ids-per-request)"));
  }
  std::vector<int64_t> rows(seeds->size());
  for (size_t i = 0; i < seeds->size(); ++i) {
    auto local = local_node((*seeds)[i]);
    if (!local.is_ok()) return ctx.reply_error(local.status().with_context("sample_neighbors"));
    rows[i] = *local;
  }
  SampleOptions so;
  so.fanout = fanout;
  so.replace = spec.replace;
  so.rng_seed = static_cast<uint64_t>(req->seed());
  SampleExtras extras;
  extras.stream_keys = *seeds;
  const bool typed = !spec.etype_fanouts.empty();
  if (typed) {
    const auto num_etypes = static_cast<size_t>(config.types.num_etypes());
    if (part->edge_types().empty()) {
      return ctx.reply_error(invalid_argument("sample_neighbors: per-edge-type fanouts, but graph '" +
                                              config.graph_name + "' has no edge types (it is homogeneous)"));
    }
    if (spec.etype_fanouts[0].size() != num_etypes) {
      return ctx.reply_error(invalid_argument("sample_neighbors: " + std::to_string(spec.etype_fanouts[0].size()) +
                                              " per-edge-type fanouts for " + std::to_string(num_etypes) +
                                              " edge types"));
    }
    so.etype_fanouts = spec.etype_fanouts[0];
    extras.etypes = part->edge_types().first(inner_in.indices.size());
  }
  // Seeds are spread over the sampling threads when they are free (one
  // request at a time; others meanwhile run on their I/O thread alone). The
  // per-seed random streams make the result the same either way.
  extras.pool = sample_pool.get();
  const AdjacencyView& adj = spec.out_edges ? part->out_edges() : inner_in;
  if (!spec.prob.empty()) {
    auto t = tensors->find(spec.prob);
    if (!t.is_ok()) return ctx.reply_error(t.status().with_context("sample_neighbors prob"));
    if ((*t)->policy != PartPolicy::edge || (*t)->dtype() != DType::float32 || (*t)->row_bytes() != sizeof(float)) {
      return ctx.reply_error(invalid_argument("sample_neighbors prob '" + spec.prob +
                                              "' must be a float32 edge tensor with one value per edge"));
    }
    extras.weights = std::span<const float>(static_cast<const float*>((*t)->storage->data()),
                                            static_cast<size_t>((*t)->num_rows()));
  }
  std::vector<int64_t> counts;
  extras.seed_counts = &counts;
  auto edges = sample_neighbors(adj, rows, so, extras);
  if (!edges.is_ok()) return ctx.reply_error(edges.status());
  // The kernel reports (neighbour, seed). The seeds are the request's, so the
  // reply carries each seed's edge count instead of a seed id per edge.
  if (Status st = map_to_global(edges->src, part->node_global_ids()); !st.is_ok()) return ctx.reply_error(st);
  flatbuffers::FlatBufferBuilder fbb;
  OutMessage reply = finish(fbs::MessageKind::SampleNeighborsReply, fbb,
                            [](auto& b) { return fbs::CreateSampleNeighborsReply(b); });
  reply.blobs.push_back(OutBlob::from_vector(std::move(edges->src)));
  reply.blobs.push_back(OutBlob::from_vector(std::move(edges->eid)));
  reply.blobs.push_back(OutBlob::from_vector(std::move(counts)));
  if (typed) reply.blobs.push_back(OutBlob::from_vector(std::move(edges->etype)));
  ctx.reply(std::move(reply));
}

// ---- lifecycle --------------------------------------------------------------

Result<std::unique_ptr<GraphServer>> GraphServer::create(const GraphServerOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  Status st = impl->init();
  if (!st.is_ok()) {
    if (impl->rpc) impl->rpc->stop();
    return st.with_context("graph-server " + std::to_string(opts.server_id));
  }
  return std::unique_ptr<GraphServer>(new GraphServer(std::move(impl)));
}

GraphServer::GraphServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GraphServer::~GraphServer() {
  stop("server destroyed");
  if (impl_->sweeper.joinable()) impl_->sweeper.join();
  if (impl_->rpc) impl_->rpc->stop();
  if (impl_->io) impl_->io->stop();
}

Status GraphServer::wait() {
  std::unique_lock lock(impl_->stop_mu);
  impl_->stop_cv.wait(lock, [&] { return impl_->stopping; });
  log()->info("{} stopping: {}", impl_->name(), impl_->stop_reason);
  return Status::ok();
}

void GraphServer::stop(const std::string& reason) { impl_->request_stop(reason); }
uint16_t GraphServer::port() const { return impl_->rpc ? impl_->rpc->port() : 0; }
std::string GraphServer::stats_json() const { return impl_->stats_json(); }

void GraphServer::handle(const RequestContext& ctx, Message&& m) { impl_->dispatcher.dispatch(ctx, std::move(m)); }

void GraphServer::end_session(const void* caller_id, const Status& why) { impl_->end_session(caller_id, why); }

}  // namespace dgld::graph_server
