#include "client/server_api.h"

#include <unistd.h>

#include <algorithm>

#include "common/ip_config.h"
#include "common/net/io_threads.h"
#include "schemas/cluster_generated.h"
#include "schemas/graph_generated.h"
#include "schemas/kvstore_generated.h"
#include "schemas/rpc_generated.h"

namespace dgld::client {

using net::Message;
using net::OutBlob;
using net::OutMessage;
namespace K = fbs;

namespace {

template <typename T>
Result<const T*> reply_as(const Result<Message>& r, const char* type, const std::string& peer) {
  if (!r.is_ok()) return r.status();
  if (Status st = net::verify_payload<T>(*r, type); !st.is_ok()) return st.with_context(peer);
  return r->as<T>();
}

// Copies ids into a blob the connection owns (the caller's span may die
// before the write completes if a call times out).
OutBlob ids_blob(std::span<const int64_t> ids) { return OutBlob::copy_of(ids.data(), ids.size_bytes()); }

Result<std::vector<int64_t>> int64_blob(const Message& m, size_t i, const std::string& peer, size_t expect) {
  if (m.blobs.size() <= i || m.blobs[i].size() % 8 != 0 || (expect != SIZE_MAX && m.blobs[i].size() != expect * 8)) {
    return protocol_error(peer + ": reply blob " + std::to_string(i) + " has the wrong size");
  }
  const auto* p = reinterpret_cast<const int64_t*>(m.blobs[i].data());
  return std::vector<int64_t>(p, p + m.blobs[i].size() / 8);
}

fbs::Role to_fbs(Role r) { return r == Role::sampler ? fbs::Role::Sampler : fbs::Role::Trainer; }

// A FindEdges reply: (src, dst) per edge.
Result<Edges> edges_from(const Result<Message>& r, const std::string& peer) {
  if (!r.is_ok()) return r.status();
  Edges e;
  DGLD_ASSIGN_OR_RETURN(e.src, int64_blob(*r, 0, peer, SIZE_MAX));
  DGLD_ASSIGN_OR_RETURN(e.dst, int64_blob(*r, 1, peer, e.src.size()));
  return e;
}

}  // namespace

size_t PulledRows::row_bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : row_shape) n *= static_cast<size_t>(d);
  return n;
}

Result<std::unique_ptr<ServerConnection>> ServerConnection::connect(net::asio::io_context& io, const std::string& host,
                                                                    uint16_t port, int server_id,
                                                                    milliseconds connect_timeout,
                                                                    milliseconds call_timeout,
                                                                    net::SecretPtr secret,
                                                                    net::TrafficTag traffic) {
  net::ConnectOptions opts;
  opts.timeout = connect_timeout;
  opts.secret = std::move(secret);
  opts.traffic = std::move(traffic);
  DGLD_ASSIGN_OR_RETURN(auto rpc, net::RpcClient::connect(io, host, port, "graph-server " + std::to_string(server_id),
                                                          opts));
  return std::unique_ptr<ServerConnection>(new ServerConnection(std::move(rpc), call_timeout));
}

Result<Registration> ServerConnection::register_client(Role role, int machine_id, int group, int requested_rank,
                                                       int job_trainers) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateRegisterClient(fbb, to_fbs(role), machine_id, getpid(), fbb.CreateString(host), group,
                                       requested_rank, job_trainers));
  auto r = call(OutMessage(fbs::MessageKind::RegisterClient, fbb));
  DGLD_ASSIGN_OR_RETURN(const auto* rep, reply_as<fbs::RegisterReply>(r, "RegisterReply", peer()));
  return Registration{rep->client_id(), rep->rank(), milliseconds(rep->heartbeat_interval_ms()),
                      milliseconds(rep->heartbeat_timeout_ms()), rep->expected_clients()};
}

Status ServerConnection::ping(milliseconds timeout) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreatePing(fbb, std::chrono::steady_clock::now().time_since_epoch().count()));
  return reply_as<fbs::Pong>(rpc_->call(OutMessage(fbs::MessageKind::Ping, fbb), timeout), "Pong", peer()).status();
}

Status ServerConnection::hello(int client_id, Role role, int machine_id) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateHello(fbb, client_id, to_fbs(role), machine_id));
  return reply_as<fbs::HelloReply>(call(OutMessage(fbs::MessageKind::Hello, fbb)), "HelloReply", peer()).status();
}

Result<std::vector<std::string>> ServerConnection::heartbeat(int client_id) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateHeartbeat(fbb, client_id));
  auto r = call(OutMessage(fbs::MessageKind::Heartbeat, fbb));
  DGLD_ASSIGN_OR_RETURN(const auto* rep, reply_as<fbs::HeartbeatReply>(r, "HeartbeatReply", peer()));
  std::vector<std::string> dropped;
  if (rep->dropped()) {
    for (const auto* s : *rep->dropped()) dropped.push_back(s->str());
  }
  return dropped;
}

Status ServerConnection::barrier(int client_id, Role role, const std::string& name, milliseconds timeout) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateBarrier(fbb, client_id, to_fbs(role), fbb.CreateString(name),
                                static_cast<int>(timeout.count())));
  // The coordinator answers at the barrier's own deadline at the latest.
  auto r = rpc_->call(OutMessage(fbs::MessageKind::Barrier, fbb), timeout + milliseconds(5000));
  return reply_as<fbs::BarrierReply>(r, "BarrierReply", peer()).status();
}

Status ServerConnection::leave(int client_id) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateLeave(fbb, client_id));
  return reply_as<fbs::LeaveReply>(call(OutMessage(fbs::MessageKind::Leave, fbb)), "LeaveReply", peer()).status();
}

Status ServerConnection::shutdown(const std::string& reason) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateShutdown(fbb, fbb.CreateString(reason)));
  return reply_as<fbs::ShutdownReply>(call(OutMessage(fbs::MessageKind::Shutdown, fbb)), "ShutdownReply", peer())
      .status();
}

Result<std::string> ServerConnection::stats() {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateStats(fbb));
  auto r = call(OutMessage(fbs::MessageKind::Stats, fbb));
  DGLD_ASSIGN_OR_RETURN(const auto* rep, reply_as<fbs::StatsReply>(r, "StatsReply", peer()));
  return rep->json() ? rep->json()->str() : std::string("{}");
}

net::PendingCall ServerConnection::start_pull(const std::string& name, std::span<const int64_t> ids, uint8_t* dst,
                                              size_t dst_bytes) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateKvPull(fbb, fbb.CreateString(name)));
  OutMessage m(fbs::MessageKind::KvPull, fbb);
  m.blobs.push_back(ids_blob(ids));
  return rpc_->start(std::move(m), dst, dst_bytes);
}

Result<PulledRows> ServerConnection::finish_pull(net::PendingCall& call) {
  auto r = wait(call);
  DGLD_ASSIGN_OR_RETURN(const auto* rep, reply_as<fbs::KvPullReply>(r, "KvPullReply", peer()));
  PulledRows rows;
  rows.dtype = static_cast<DType>(rep->dtype());
  if (rep->row_shape()) rows.row_shape.assign(rep->row_shape()->begin(), rep->row_shape()->end());
  if (r->blobs.empty()) return protocol_error(peer() + ": pull reply carries no rows");
  rows.data = std::move(r->blobs[0]);
  return rows;
}

Status ServerConnection::pull_into(const std::string& name, std::span<const int64_t> ids, void* out,
                                   size_t row_bytes) {
  if (row_bytes == 0) return invalid_argument("pull_into '" + name + "': row_bytes must be > 0");
  const size_t chunk = std::max<size_t>(1, kPullChunkBytes / row_bytes);
  uint8_t* dst = static_cast<uint8_t*>(out);
  std::vector<net::PendingCall> calls;
  for (size_t at = 0; at < ids.size(); at += chunk) {
    const size_t n = std::min(chunk, ids.size() - at);
    calls.push_back(start_pull(name, ids.subspan(at, n), dst + at * row_bytes, n * row_bytes));
  }
  Status first_error;
  for (auto& call : calls) {
    auto rows = finish_pull(call);  // every call is waited for, even after an error
    if (!first_error.is_ok()) continue;
    if (!rows.is_ok()) {
      first_error = rows.status();
    } else if (!rows->data.is_borrowed()) {
      // Only a reply of exactly the expected size lands in `out`.
      first_error = invalid_argument("pull_into '" + name + "': rows on " + peer() + " are " +
                                     std::to_string(rows->row_bytes()) + " bytes, the caller expects " +
                                     std::to_string(row_bytes));
    }
  }
  return first_error;
}

Result<PulledRows> ServerConnection::pull(const std::string& name, std::span<const int64_t> ids) {
  auto c = start_pull(name, ids);
  return finish_pull(c);
}

Status ServerConnection::push(const std::string& name, std::span<const int64_t> ids, DType dtype, const void* rows,
                              size_t row_bytes, bool ack) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateKvPush(fbb, fbb.CreateString(name), static_cast<uint32_t>(dtype)));
  OutMessage m(fbs::MessageKind::KvPush, fbb);
  m.blobs.push_back(ids_blob(ids));
  m.blobs.push_back(OutBlob::copy_of(rows, ids.size() * row_bytes));
  if (!ack) {
    return rpc_->send_one_way(std::move(m)) ? Status::ok() : closed_error("connection to " + peer() + " is closed");
  }
  return reply_as<fbs::KvPushReply>(call(std::move(m)), "KvPushReply", peer()).status();
}

Result<bool> ServerConnection::create_tensor(const CreateTensor& s) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateKvCreate(fbb, fbb.CreateString(s.name), fbb.CreateVector(s.shape),
                                 static_cast<uint32_t>(s.dtype),
                                 s.policy == Policy::edge ? fbs::PartPolicy::Edge : fbs::PartPolicy::Node,
                                 static_cast<fbs::InitKind>(s.init), s.init_a, s.init_b,
                                 static_cast<int64_t>(s.seed), s.persistent));
  auto r = call(OutMessage(fbs::MessageKind::KvCreate, fbb));
  DGLD_ASSIGN_OR_RETURN(const auto* rep, reply_as<fbs::KvCreateReply>(r, "KvCreateReply", peer()));
  return rep->created();
}

Status ServerConnection::delete_tensor(const std::string& name) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateKvDelete(fbb, fbb.CreateString(name)));
  return reply_as<fbs::KvDeleteReply>(call(OutMessage(fbs::MessageKind::KvDelete, fbb)), "KvDeleteReply", peer())
      .status();
}

Result<std::vector<TensorInfo>> ServerConnection::list_tensors() {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateKvList(fbb));
  auto r = call(OutMessage(fbs::MessageKind::KvList, fbb));
  DGLD_ASSIGN_OR_RETURN(const auto* rep, reply_as<fbs::KvListReply>(r, "KvListReply", peer()));
  std::vector<TensorInfo> out;
  if (rep->tensors()) {
    for (const auto* t : *rep->tensors()) {
      TensorInfo i;
      i.name = t->name() ? t->name()->str() : "";
      i.dtype = static_cast<DType>(t->dtype());
      if (t->shape()) i.shape.assign(t->shape()->begin(), t->shape()->end());
      i.policy = t->policy() == fbs::PartPolicy::Edge ? Policy::edge : Policy::node;
      i.persistent = t->persistent();
      i.shm_name = t->shm_name() ? t->shm_name()->str() : "";
      out.push_back(std::move(i));
    }
  }
  return out;
}

Result<ServerGraphInfo> ServerConnection::graph_info() {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateGraphInfo(fbb));
  auto r = call(OutMessage(fbs::MessageKind::GraphInfo, fbb));
  DGLD_ASSIGN_OR_RETURN(const auto* rep, reply_as<fbs::GraphInfoReply>(r, "GraphInfoReply", peer()));
  return ServerGraphInfo{rep->graph_name() ? rep->graph_name()->str() : "", rep->num_nodes(), rep->num_edges(),
                         rep->part_id(), rep->num_parts(), rep->server_id(), rep->num_inner_nodes(),
                         rep->num_inner_edges(), rep->part_config() ? rep->part_config()->str() : ""};
}

Result<ServerGraphInfo> query_graph_info(const std::string& ip_config, const std::string& secret_file,
                                         milliseconds timeout) {
  DGLD_ASSIGN_OR_RETURN(auto machines, load_ip_config(ip_config));
  net::SecretPtr secret;
  if (!secret_file.empty()) {
    DGLD_ASSIGN_OR_RETURN(secret, net::load_secret_file(secret_file));
  }
  net::IoThreads io(1);
  DGLD_ASSIGN_OR_RETURN(auto conn, ServerConnection::connect(io.context(), machines[0].host, machines[0].base_port, 0,
                                                             timeout, timeout, std::move(secret)));
  auto info = conn->graph_info();
  conn.reset();
  io.stop();
  return info;
}

Result<std::vector<int64_t>> ServerConnection::degrees(std::span<const int64_t> nodes, bool out) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateDegrees(fbb, out));
  OutMessage m(fbs::MessageKind::Degrees, fbb);
  m.blobs.push_back(ids_blob(nodes));
  auto r = call(std::move(m));
  DGLD_RETURN_IF_ERROR(reply_as<fbs::DegreesReply>(r, "DegreesReply", peer()).status());
  return int64_blob(*r, 0, peer(), nodes.size());
}

Result<Edges> ServerConnection::find_edges(std::span<const int64_t> eids) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateFindEdges(fbb));
  OutMessage m(fbs::MessageKind::FindEdges, fbb);
  m.blobs.push_back(ids_blob(eids));
  auto r = call(std::move(m));
  DGLD_RETURN_IF_ERROR(reply_as<fbs::FindEdgesReply>(r, "FindEdgesReply", peer()).status());
  return edges_from(r, peer());
}

net::PendingCall ServerConnection::start_sample(std::span<const int64_t> seeds, const SampleRequest& q) {
  flatbuffers::FlatBufferBuilder fbb;
  const auto spec = write_sampling_spec(fbb, q.spec);
  fbb.Finish(fbs::CreateSampleNeighbors(fbb, spec, static_cast<int64_t>(q.seed)));
  OutMessage m(fbs::MessageKind::SampleNeighbors, fbb);
  m.blobs.push_back(ids_blob(seeds));
  return rpc_->start(std::move(m));
}

Result<SampledNeighbors> ServerConnection::finish_sample(net::PendingCall& call, size_t num_seeds, bool typed) {
  auto r = wait(call);
  DGLD_RETURN_IF_ERROR(reply_as<fbs::SampleNeighborsReply>(r, "SampleNeighborsReply", peer()).status());
  auto bad = [&](const std::string& what) { return protocol_error(peer() + ": sample_neighbors reply " + what); };
  const size_t want = typed ? 4 : 3;
  if (r->blobs.size() != want) {
    return bad("has " + std::to_string(r->blobs.size()) + " blobs, expected " + std::to_string(want));
  }
  if (r->blobs[0].size() % 8 != 0 || r->blobs[1].size() % 8 != 0) {
    return bad("has neighbour and edge id blobs of " + std::to_string(r->blobs[0].size()) + " and " +
               std::to_string(r->blobs[1].size()) + " bytes, expected multiples of 8");
  }
  SampledNeighbors out;
  DGLD_ASSIGN_OR_RETURN(out.counts, int64_blob(*r, 2, peer(), SIZE_MAX));
  out.nbr_bytes = std::move(r->blobs[0]);
  out.eid_bytes = std::move(r->blobs[1]);
  if (typed) {
    out.etype_bytes = std::move(r->blobs[3]);
    if (out.etype_bytes.size() != out.eid_bytes.size() / 2) {
      return bad("has " + std::to_string(out.etype_bytes.size()) + " bytes of edge types for " +
                 std::to_string(out.eid_bytes.size() / 8) + " edges");
    }
  }
  if (Status st = out.check(num_seeds); !st.is_ok()) return bad(st.message());
  return out;
}

Status SampledNeighbors::check(size_t num_seeds) const {
  const size_t edges = nbr().size();
  if (eid().size() != edges) {
    return invalid_argument("has " + std::to_string(edges) + " neighbours but " + std::to_string(eid().size()) +
                            " edge ids");
  }
  if (counts.size() != num_seeds) {
    return invalid_argument("has " + std::to_string(counts.size()) + " edge counts for " +
                            std::to_string(num_seeds) + " seeds");
  }
  uint64_t total = 0;
  for (int64_t c : counts) {
    if (c < 0 || static_cast<uint64_t>(c) > edges) {
      return invalid_argument("has an edge count of " + std::to_string(c) + " (counts must be 0 to " +
                              std::to_string(edges) + ")");
    }
    total += static_cast<uint64_t>(c);
  }
  if (total != edges) {
    return invalid_argument("counts " + std::to_string(total) + " edges but carries " + std::to_string(edges));
  }
  return Status::ok();
}

Result<Edges> ServerConnection::sample_neighbors(std::span<const int64_t> seeds, const SampleRequest& req) {
  auto c = start_sample(seeds, req);
  DGLD_ASSIGN_OR_RETURN(SampledNeighbors s, finish_sample(c, seeds.size(), !req.spec.etype_fanouts.empty()));
  return to_edges(s, seeds, req.spec.out_edges);
}

Result<Edges> to_edges(const SampledNeighbors& s, std::span<const int64_t> seeds, bool out_edges) {
  if (Status st = s.check(seeds.size()); !st.is_ok()) return st.with_context("to_edges: the sampled edges");
  const auto nbr = s.nbr(), eid = s.eid();
  Edges e;
  e.eid.assign(eid.begin(), eid.end());
  std::vector<int64_t>& neighbours = out_edges ? e.dst : e.src;
  std::vector<int64_t>& own = out_edges ? e.src : e.dst;
  neighbours.assign(nbr.begin(), nbr.end());
  own.reserve(nbr.size());
  for (size_t i = 0; i < seeds.size(); ++i) {
    own.insert(own.end(), static_cast<size_t>(s.counts[i]), seeds[i]);
  }
  return e;
}

}  // namespace dgld::client
