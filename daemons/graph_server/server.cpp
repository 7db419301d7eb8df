#include "daemons/graph_server/server.h"

#include "daemons/graph_server/server_impl.h"

namespace dgld::graph_server {

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
    tensors->set_edge_rows([this, m](const std::string& name) { return edge_tensor_range(config, m, name); });
  }
  DGLD_RETURN_IF_ERROR(tensors->init());
  if (opts.is_main()) {
    // The rows live on in shared memory: their file pages are let go as they
    // are copied (the page cache keeps them).
    const TensorTable::CopiedFn release = [this](const void* p, size_t n) { part->release_pages(p, n); };
    for (const auto& t : part->node_tensors()) {
      TensorSpec spec{t.name, t.dtype, t.shape, PartPolicy::node};
      const int type = node_tensor_type(config, t.name);
      spec.shape[0] = type < 0 ? config.num_nodes : config.types.ntype_count[type];
      spec.persistent = true;
      DGLD_RETURN_IF_ERROR(tensors->add(spec, t.data, release));
    }
    // Every node's original id (before the partitioner relabelled them), as
    // DGL's orig_nids: offline inference writes outputs in that order.
    if (!part->node_tensor(kOrigIdTensor)) {
      TensorSpec spec{kOrigIdTensor, DType::int64, {config.num_nodes}, PartPolicy::node};
      spec.persistent = true;
      DGLD_RETURN_IF_ERROR(tensors->add(spec, part->orig_node_ids().data(), release));
    }
    for (const auto& t : part->edge_tensors()) {
      TensorSpec spec{t.name, t.dtype, t.shape, PartPolicy::edge};
      const int type = edge_tensor_type(config, t.name);
      spec.shape[0] = type < 0 ? config.num_edges : config.types.etype_count[type];
      spec.persistent = true;
      DGLD_RETURN_IF_ERROR(tensors->add(spec, t.data, release));
    }
  }
  log()->info("{} partition {} of {}: {} inner nodes, {} local nodes, {} local edges, {} node tensors ({} ms)",
              opts.is_main() ? "loaded" : "attached to", m, config.graph_name, ni, part->num_local_nodes(),
              part->num_local_edges(), part->node_tensors().size(),
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
  log()->info("memory after loading: {}", describe(read_process_memory()));

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
    mo.one_job = opts.exit_when_clients_leave;
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
  so.traffic = std::make_shared<net::TrafficCounters>();
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
  if (opts.metrics_port > 0) DGLD_RETURN_IF_ERROR(start_metrics(host));
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
    clients_gone.insert(s.client_id);
    stop_when_clients_gone_locked();
  }
  if (membership && !s.left) membership->connection_lost(s.client_id, st.message());
}

void GraphServer::Impl::stop_when_clients_gone_locked() {
  if (!opts.exit_when_clients_leave || opts.num_clients <= 0) return;
  if (static_cast<int>(clients_gone.size()) < opts.num_clients) return;
  for (const auto& [caller, s] : sessions) {
    if (!s.left) return;
  }
  request_stop(fmt::format("all {} clients of the job left", opts.num_clients));
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

// ---- lifecycle --------------------------------------------------------------

Result<std::unique_ptr<GraphServer>> GraphServer::create(const GraphServerOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  Status st = impl->init();
  if (!st.is_ok()) {
    if (impl->metrics) impl->metrics->stop();
    if (impl->rpc) impl->rpc->stop();
    return st.with_context("graph-server " + std::to_string(opts.server_id));
  }
  return std::unique_ptr<GraphServer>(new GraphServer(std::move(impl)));
}

GraphServer::GraphServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GraphServer::~GraphServer() {
  stop("server destroyed");
  if (impl_->sweeper.joinable()) impl_->sweeper.join();
  if (impl_->metrics) impl_->metrics->stop();
  if (impl_->rpc) impl_->rpc->stop();
  if (impl_->io) impl_->io->stop();
}

Status GraphServer::wait() {
  Status result = impl_->wait_for_stop();
  log()->info("{} stopping: {}", impl_->name(), impl_->stop_reason);
  const ProcessMemory now = read_process_memory();
  const nlohmann::json m = impl_->memory_json(now);
  log()->info("memory: {}; partition files {:.0f} MiB, tensors served {:.0f} MiB", describe(now),
              m["partition_bytes"].get<double>() / (1 << 20), m["tensor_bytes"].get<double>() / (1 << 20));
  return result;
}

Status GraphServer::Impl::wait_for_stop() {
  std::unique_lock lock(stop_mu);
  if (!opts.exit_when_clients_leave || opts.num_clients <= 0 || opts.client_wait.count() <= 0) {
    stop_cv.wait(lock, [&] { return stopping; });
    return Status::ok();
  }
  // Waiting for clients that may never come has a deadline: it runs while no
  // client is connected and fewer than num_clients came.
  auto idle_since = std::chrono::steady_clock::now();
  while (!stopping) {
    stop_cv.wait_for(lock, std::min<std::chrono::milliseconds>(opts.client_wait, std::chrono::seconds(1)));
    if (stopping) break;
    lock.unlock();  // sessions_mu is taken before stop_mu elsewhere
    size_t came = 0;
    bool connected = false;
    {
      std::lock_guard s(sessions_mu);
      std::set<int> ids(clients_gone);
      for (const auto& [caller, session] : sessions) {
        ids.insert(session.client_id);
        connected = connected || !session.left;
      }
      came = ids.size();
    }
    lock.lock();
    const auto now = std::chrono::steady_clock::now();
    if (connected || static_cast<int>(came) >= opts.num_clients) {
      idle_since = now;
      continue;
    }
    if (now - idle_since >= opts.client_wait && !stopping) {
      const std::string why = fmt::format(
          "{} of the {} clients the job expects came, and none connected for {} s: the others never joined (a "
          "trainer or sampler that failed before connecting?)",
          came, opts.num_clients, std::chrono::duration_cast<std::chrono::seconds>(opts.client_wait).count());
      stopping = true;
      stop_reason = why;
      stop_cv.notify_all();
      return timeout_error(name() + ": " + why);
    }
  }
  return Status::ok();
}

void GraphServer::stop(const std::string& reason) { impl_->request_stop(reason); }
uint16_t GraphServer::port() const { return impl_->rpc ? impl_->rpc->port() : 0; }
std::string GraphServer::stats_json() const { return impl_->stats_json(); }

void GraphServer::handle(const RequestContext& ctx, Message&& m) { impl_->dispatcher.dispatch(ctx, std::move(m)); }

void GraphServer::end_session(const void* caller_id, const Status& why) { impl_->end_session(caller_id, why); }

}  // namespace dgld::graph_server
