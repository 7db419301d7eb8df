#include "daemons/graph_server/server_impl.h"

#include "common/prometheus.h"

namespace dgld::graph_server {

// ---- membership -----------------------------------------------------------

void GraphServer::Impl::on_register(const RequestContext& ctx, Message&& m) {
  const auto* r = m.as<fbs::RegisterClient>();
  auto rec = membership->register_client(to_role(r->role()), r->machine_id(), r->pid(),
                                         r->host() ? r->host()->str() : "", r->group(), r->requested_rank(),
                                         r->job_trainers());
  if (!rec.is_ok()) return ctx.reply_error(rec.status());
  if (rpc) rpc->identify_peer(ctx, r->machine_id());
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
  if (rpc) rpc->identify_peer(ctx, h->machine_id());
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
  if (membership) {
    if (Status st = membership->leave(id); !st.is_ok()) return ctx.reply_error(st);
  }
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::LeaveReply, fbb, [](auto& b) { return fbs::CreateLeaveReply(b); }));
  std::lock_guard lock(sessions_mu);
  sessions[ctx.caller_id()].left = true;
  clients_gone.insert(id);
  stop_when_clients_gone_locked();
}

void GraphServer::Impl::on_shutdown(const RequestContext& ctx, Message&& m) {
  const auto* s = m.as<fbs::Shutdown>();
  std::string reason = "shutdown requested by " + ctx.peer();
  if (s->reason() && s->reason()->size()) reason += ": " + s->reason()->str();
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::ShutdownReply, fbb, [](auto& b) { return fbs::CreateShutdownReply(b); }));
  request_stop(reason);
}

nlohmann::json GraphServer::Impl::memory_json(const ProcessMemory& now) const {
  nlohmann::json m = to_json(now);
  m["partition_bytes"] = partition_file_bytes(config, opts.machine_id());
  int64_t shared = 0;
  if (tensors) {
    for (const auto& t : tensors->list()) shared += static_cast<int64_t>(t->storage->data_bytes());
  }
  m["tensor_bytes"] = shared;
  return m;
}

void GraphServer::Impl::on_stats(const RequestContext& ctx, Message&&) {
  std::string j = stats_json();
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::StatsReply, fbb,
                   [&](auto& b) { return fbs::CreateStatsReply(b, b.CreateString(j)); }));
}

nlohmann::json GraphServer::Impl::stats_object() const {
  nlohmann::json j;
  j["server_id"] = opts.server_id;
  j["machine_id"] = opts.machine_id();
  j["uptime_s"] = std::chrono::duration<double>(Clock::now() - started).count();
  j["memory"] = memory_json(read_process_memory());
  j["rss_bytes"] = j["memory"]["rss_bytes"];
  j["connections"] = rpc ? rpc->num_connections() : 0;
  j["bytes_in"] = rpc ? rpc->bytes_in() : 0;
  j["bytes_out"] = rpc ? rpc->bytes_out() : 0;
  j["queued_reply_bytes"] = rpc ? rpc->queued_bytes() : 0;
  j["read_pauses"] = rpc ? rpc->read_pauses() : 0;
  j["refused_connections"] = rpc ? rpc->auth_failures() : 0;
  // Frames by the client's machine and message kind (common/net/traffic.h).
  if (rpc && rpc->traffic()) j["traffic"] = nlohmann::json::parse(net::traffic_json(rpc->traffic()->snapshot()));
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
  return j;
}

Status GraphServer::Impl::start_metrics(const std::string& host) {
  const int port = opts.metrics_port + opts.local_server();
  if (port > 65535) return invalid_argument("--metrics-port: port " + std::to_string(port) + " is out of range");
  const prom::Labels labels = {{"machine", std::to_string(opts.machine_id())}, {"server", std::to_string(opts.server_id)}};
  net::MetricsHttpOptions mo;
  mo.name = name() + " metrics";
  // On the RPC io threads: rendering takes stats_mu as a request's bookkeeping does, nothing longer.
  metrics = std::make_unique<net::MetricsHttpServer>(
      io->context(), [this, labels] { return prom::graph_server_text(stats_object(), labels); }, mo);
  DGLD_RETURN_IF_ERROR(metrics->listen(host, static_cast<uint16_t>(port)));
  log()->info("{}: Prometheus metrics at http://{}:{}/metrics", name(), host, metrics->port());
  return Status::ok();
}

void GraphServer::Impl::request_stop(const std::string& reason) {
  std::lock_guard lock(stop_mu);
  if (stopping) return;
  stopping = true;
  stop_reason = reason;
  stop_cv.notify_all();
}

}  // namespace dgld::graph_server
