#include "daemons/sampler_worker/sampler_worker.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>

#include "common/process_memory.h"
#include "common/cli.h"
#include "common/cpu_time.h"
#include "client/cluster.h"
#include "client/batch_slots.h"
#include "client/data_loader.h"
#include "common/net/io_threads.h"
#include "common/net/rpc_server.h"
#include "schemas/rpc_generated.h"
#include "schemas/sampler_generated.h"
#include "common/job_env.h"

namespace dgld::sampler {
namespace po = boost::program_options;

namespace {
std::shared_ptr<spdlog::logger> log() {
  static auto l = logger("sampler");
  return l;
}
}  // namespace

ParsedOptions parse_sampler_worker_options(int argc, const char* const argv[]) {
  ParsedOptions out;
  SamplerWorkerOptions& o = out.options;
  o.log.program = "sampler-worker";
  std::string part_config, ip_config, secret_file;
  int64_t cache_mb = 256;
  int connect_ms = 30000, call_ms = 30000;
  po::options_description desc("sampler-worker options");
  desc.add_options()
      ("part-config", po::value(&part_config), "partition config JSON (env DGL_CONF_PATH)")
      ("ip-config", po::value(&ip_config), "ip_config.txt (env DGL_IP_CONFIG)")
      ("machine-id", po::value(&o.machine_id)->default_value(-1),
       "machine (ip_config line) this worker runs on; -1: detect from local addresses")
      ("num-servers", po::value(&o.num_servers)->default_value(1), "graph-servers per machine")
      ("group", po::value(&o.group)->default_value(-1), "rank of the trainer this worker serves")
      ("listen-host", po::value(&o.listen_host)->default_value(o.listen_host), "address to listen on")
      ("listen-port", po::value(&o.listen_port)->default_value(0), "port to listen on; 0: pick one and log it")
      ("num-threads", po::value(&o.num_threads)->default_value(2), "batches made at once")
      ("job-id", po::value(&o.job_id), "shared-memory job id (default: graph name and port; env DGLD_JOB_ID)")
      ("secret-file", po::value(&secret_file), "file with the job's shared secret, mode 0600 (env DGLD_SECRET_FILE)")
      ("feature-cache-mb", po::value(&cache_mb)->default_value(cache_mb),
       "MiB of other machines' feature rows kept in this process (the most connected halo nodes); 0: none")
      ("ready-fd", po::value(&o.ready_fd)->default_value(-1),
       "write the listening port and a newline to this file descriptor once ready (for a parent process)")
      ("connect-timeout-ms", po::value(&connect_ms)->default_value(connect_ms), "connecting to the servers")
      ("call-timeout-ms", po::value(&call_ms)->default_value(call_ms), "deadline of each server request");
  add_log_options(desc, o.log);
  po::variables_map vm;
  switch (parse_command_line(argc, argv, "sampler-worker", "[options]", desc, vm)) {
    case CliOutcome::exit_ok: out.exit_code = 0; return out;
    case CliOutcome::exit_error: out.exit_code = 2; return out;
    case CliOutcome::run: break;
  }
  std::string err;
  // On a malformed variable flag_from_env has set err.
  if (flag_from_env(vm, "part-config", job_env::kConfPath, part_config, err) &&
      flag_from_env(vm, "ip-config", job_env::kIpConfig, ip_config, err) &&
      flag_from_env(vm, "job-id", job_env::kJobId, o.job_id, err)) {
    if (part_config.empty()) err = "--part-config (or DGL_CONF_PATH) is required";
    else if (ip_config.empty()) err = "--ip-config (or DGL_IP_CONFIG) is required";
    else if (o.num_servers < 1) err = "--num-servers must be >= 1";
    else if (o.num_threads < 1) err = "--num-threads must be >= 1";
    else if (o.listen_port < 0 || o.listen_port > 65535) err = "--listen-port must be in 0..65535";
    else if (connect_ms < 1 || call_ms < 1) err = "timeouts must be >= 1 ms";
    else if (cache_mb < 0) err = "--feature-cache-mb must be >= 0";
  }
  if (err.empty()) {
    auto secret = net::secret_from_flag_or_env(secret_file);
    if (secret.is_ok()) o.secret = *secret;
    else err = secret.status().message();
  }
  if (!err.empty()) {
    std::cerr << "sampler-worker: " << err << "\n";
    out.exit_code = 2;
    return out;
  }
  o.part_config = part_config;
  o.ip_config = ip_config;
  o.connect_timeout = std::chrono::milliseconds(connect_ms);
  o.call_timeout = std::chrono::milliseconds(call_ms);
  o.feature_cache_bytes = static_cast<size_t>(cache_mb) << 20;
  o.log.role = "sampler/" + std::to_string(o.group);
  return out;
}

struct SamplerWorker::Impl {
  SamplerWorkerOptions opts;
  std::unique_ptr<client::Cluster> cluster;
  net::Dispatcher dispatcher;
  std::unique_ptr<net::IoThreads> io;
  std::unique_ptr<net::RpcServer> rpc;
  std::mutex builders_mu;
  std::map<std::string, std::unique_ptr<client::BatchBuilder>> builders;  // by spec
  std::atomic<uint64_t> served{0};
  std::atomic<uint64_t> served_in_slots{0};
  client::SlotMappings slots;  // the trainers' batch slots this worker writes into
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::string stop_reason;

  Result<const client::BatchBuilder*> builder_for(const client::BatchSpec& spec) {
    const std::string key = spec.feature + "|" + spec.label + "|" + spec.sampling.to_string();
    std::lock_guard lock(builders_mu);
    auto it = builders.find(key);
    if (it == builders.end()) {
      client::BatchSpec with_cache = spec;
      with_cache.feature_cache_bytes = opts.feature_cache_bytes;
      DGLD_ASSIGN_OR_RETURN(auto b, client::BatchBuilder::create(*cluster, with_cache));
      it = builders.emplace(key, std::move(b)).first;
    }
    return it->second.get();
  }

  void on_sample_batch(const net::RequestContext& ctx, net::Message&& m) {
    auto parsed = client::decode_sample_batch(m, ctx.peer());
    if (!parsed.is_ok()) return ctx.reply_error(parsed.status());
    const client::SampleBatchRequest& req = *parsed;
    auto b = builder_for(req.spec);
    if (!b.is_ok()) return ctx.reply_error(b.status());
    if (req.prepare) {
      log()->debug("{}: prepared for batches of {}", ctx.peer(), req.spec.sampling.to_string());
      return ctx.reply(client::encode_prepare_reply());
    }
    const client::BatchBuilder& builder = **b;
    auto batch = builder.sample(req.batch_id, req.seeds, req.rng_seed);
    int64_t slot_bytes_needed = 0;
    if (batch.is_ok() && !req.reply_slot.empty()) {
      auto written = write_to_slot(req.reply_slot, builder, *batch);
      if (!written.is_ok()) {
        batch = written.status();
      } else if (*written == 0) {
        log()->debug("{}: batch {} (request {}) written to {}", ctx.peer(), req.batch_id, ctx.header().request_id,
                     req.reply_slot);
        ++served;
        ++served_in_slots;
        return ctx.reply(client::encode_slot_batch_reply(*batch));
      } else {
        slot_bytes_needed = *written;  // < 0: no slot here; > 0: too small
      }
    }
    if (batch.is_ok()) {
      if (Status st = builder.fetch(*batch, req.skip_features_of); !st.is_ok()) batch = st;
    }
    if (!batch.is_ok()) {
      log()->warn("{}: batch {} (request {}) failed: {}", ctx.peer(), req.batch_id,
                  ctx.header().request_id, batch.status().to_string());
      return ctx.reply_error(batch.status());
    }
    log()->debug("{}: batch {} (request {}): {} seeds, {} input nodes", ctx.peer(), req.batch_id,
                 ctx.header().request_id, req.seeds.size(), batch->mini_batch.input_nodes.size());
    ++served;
    ctx.reply(client::encode_sample_batch_reply(std::move(*batch), std::max<int64_t>(0, slot_bytes_needed)));
  }

  // Writes `batch` (sampled) with its features and labels into the
  // requester's slot: 0 when done, the bytes the batch needs when the slot
  // is smaller, -1 when the slot cannot be mapped here (the requester is on
  // another machine: the reply carries the batch instead). Errors from
  // fetching the rows fail the request.
  Result<int64_t> write_to_slot(const std::string& name, const client::BatchBuilder& builder, client::Batch& batch) {
    auto seg = slots.writable(name);
    if (!seg.is_ok()) {
      log()->warn("cannot write batches into {} ({}): sending them in replies", name, seg.status().to_string());
      return int64_t{-1};
    }
    auto* base = static_cast<std::byte*>((*seg)->mutable_data());
    // A heterogeneous batch: its rows per node type (positions now, rows pulled into the slot below).
    client::TypedPlan typed;
    if (builder.heterogeneous()) {
      DGLD_ASSIGN_OR_RETURN(typed, builder.plan_typed(batch));
    }
    DGLD_ASSIGN_OR_RETURN(auto layout, client::write_blocks_to_slot(batch, base, (*seg)->size(), typed.rows));
    if (layout.total > (*seg)->size()) return static_cast<int64_t>(layout.total);
    std::vector<float*> typed_rows;
    for (const auto& o : layout.typed) typed_rows.push_back(reinterpret_cast<float*>(base + o.rows));
    batch.timings.fetch_s = batch.timings.fetch_cpu_s = 0;
    StageTimer stage;
    DGLD_RETURN_IF_ERROR(builder.fetch_into(batch, reinterpret_cast<float*>(base + layout.features),
                                            reinterpret_cast<int64_t*>(base + layout.labels),
                                            builder.heterogeneous() ? &typed : nullptr, typed_rows, &batch.traffic));
    stage.lap(&batch.timings.fetch_s, &batch.timings.fetch_cpu_s);
    batch.typed_features = std::move(typed.rows);  // their sizes go in the reply; the rows are in the slot
    return int64_t{0};
  }

  void request_stop(const std::string& reason) {
    std::lock_guard lock(stop_mu);
    if (stopping) return;
    stopping = true;
    stop_reason = reason;
    stop_cv.notify_all();
  }
};

SamplerWorker::SamplerWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<SamplerWorker>> SamplerWorker::create(const SamplerWorkerOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  client::JoinFlags join{.ip_config = opts.ip_config,
                         .part_config = opts.part_config,
                         .role = client::Role::sampler,
                         .machine_id = opts.machine_id,
                         .num_servers = opts.num_servers,
                         .group = opts.group,
                         .job_id = opts.job_id,
                         .connect_timeout = opts.connect_timeout,
                         .call_timeout = opts.call_timeout,
                         .secret = opts.secret};
  DGLD_ASSIGN_OR_RETURN(auto co, client::join_options(join));
  DGLD_ASSIGN_OR_RETURN(impl->cluster, client::Cluster::connect(co));
  set_log_role("sampler/" + std::to_string(impl->cluster->rank()) + ":" + std::to_string(opts.group));

  Impl* p = impl.get();
  impl->dispatcher.add<fbs::SampleBatch>(fbs::MessageKind::SampleBatch, "SampleBatch",
                                         [p](const net::RequestContext& ctx, net::Message&& m) {
                                           p->on_sample_batch(ctx, std::move(m));
                                         });
  impl->io = std::make_unique<net::IoThreads>(2);
  net::ServerOptions so;
  so.name = "sampler-worker";
  so.handler_threads = opts.num_threads;
  so.secret = opts.secret;
  impl->rpc = std::make_unique<net::RpcServer>(impl->io->context(), impl->dispatcher, so);
  DGLD_RETURN_IF_ERROR(impl->rpc->listen(opts.listen_host, static_cast<uint16_t>(opts.listen_port)));
  log()->info("sampler-worker for trainer {} on machine {} listening on {}:{}", opts.group,
              impl->cluster->machine_id(), opts.listen_host, impl->rpc->port());
  return std::unique_ptr<SamplerWorker>(new SamplerWorker(std::move(impl)));
}

SamplerWorker::~SamplerWorker() {
  stop("sampler-worker destroyed");
  impl_->rpc->stop();
  impl_->io->stop();
  if (Status st = impl_->cluster->leave(); !st.is_ok()) log()->warn("leave: {}", st.to_string());
  impl_->builders.clear();
  impl_->cluster.reset();
}

uint16_t SamplerWorker::port() const { return impl_->rpc->port(); }
uint64_t SamplerWorker::batches_served() const { return impl_->served.load(); }

Status SamplerWorker::wait() {
  std::unique_lock lock(impl_->stop_mu);
  impl_->stop_cv.wait(lock, [&] { return impl_->stopping; });
  log()->info("sampler-worker stopping: {} ({} batches served, {} of them through shared memory)", impl_->stop_reason,
              impl_->served.load(), impl_->served_in_slots.load());
  size_t cache = 0;
  {
    std::lock_guard lock(impl_->builders_mu);
    for (const auto& [key, b] : impl_->builders) cache += b->feature_cache_bytes();
  }
  log()->info("memory: {}; feature cache {:.0f} MiB", describe(read_process_memory()),
              static_cast<double>(cache) / (1 << 20));
  return Status::ok();
}

void SamplerWorker::stop(const std::string& reason) { impl_->request_stop(reason); }

}  // namespace dgld::sampler
