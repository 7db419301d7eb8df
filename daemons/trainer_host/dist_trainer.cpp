#include "daemons/trainer_host/dist_trainer.h"

#include "daemons/trainer_host/dist_backend.h"

namespace dgld::trainer {
namespace dist {

Status DistBackend::setup_hetero(const MappedPartition& part) {
  const GraphTypeInfo& types = cluster_->config().types;
  DGLD_ASSIGN_OR_RETURN(const ModelKindInfo info, model_info(c_.model, c_.model_file));
  if (!info.uses_edge_types) {
    return invalid_argument(fmt::format("graph '{}' is heterogeneous ({} node types, {} edge types): train it with "
                                        "a model over edge types, --model rgcn (docs/heterogeneous.md), not {}",
                                        graph_name(), types.num_ntypes(), types.num_etypes(),
                                        c_.model_file.empty() ? "--model " + c_.model : c_.model_file));
  }
  const std::string target = c_.target_ntype.empty() ? types.target_ntype : c_.target_ntype;
  if (target.empty()) {
    return invalid_argument(fmt::format("graph '{}' is heterogeneous and its partition config names no target node "
                                        "type: give --target-ntype (one of: {})",
                                        graph_name(), fmt::join(types.ntypes, ", ")));
  }
  target_type_ = types.ntype_id(target);
  if (target_type_ < 0) {
    return invalid_argument(fmt::format("--target-ntype '{}' is not a node type of '{}' (known: {})", target,
                                        graph_name(), fmt::join(types.ntypes, ", ")));
  }
  target_prefix_ = target + "/";
  for (const std::string& t : types.ntypes) {
    const TensorView* f = part.node_tensor(t + "/" + c_.feature);
    type_feature_dims_.push_back(f && f->shape.size() == 2 ? f->shape[1] : 0);
  }
  DGLD_ASSIGN_OR_RETURN(typed_features_, client::open_typed_features(*cluster_, c_.feature));
  return Status::ok();
}

Result<std::vector<int64_t>> DistBackend::split(const std::string& mask, bool required) {
  // Hierarchical partitions (--num-trainers-per-machine) carry a trainer id
  // per node: the trainers of a machine split by it, as DGL's example does.
  const bool trainer_ids = cluster_->local().graph().node_tensor("_N/trainer_id") != nullptr;
  auto ids = graph_->node_split(mask, /*force_even=*/true, trainer_ids);
  if (!ids.is_ok() && !required && ids.status().code() == StatusCode::not_found) return std::vector<int64_t>{};
  if (!ids.is_ok()) return ids.status().with_context("node_split of '" + mask + "'");
  return ids;
}

Status DistBackend::check_node_tensor(const std::string& name, DType dtype, bool matrix) const {
  const MappedPartition& part = cluster_->local().graph();
  const std::string full = labelled(name);
  const TensorView* t = part.node_tensor(full);
  const std::string where = fmt::format("partition {} of '{}' ({})", cluster_->machine_id(), graph_name(),
                                        o_.part_config);
  if (!t) {
    return not_found(fmt::format("{} has no node tensor '{}' (it has: {})", where, full, node_tensor_names(part)));
  }
  if (t->dtype != dtype || (matrix ? t->shape.size() != 2 : t->row_size() != 1)) {
    return invalid_argument(fmt::format("{}: node tensor '{}' is {} [{}], expected {} {}", where, full,
                                        dtype_name(t->dtype), fmt::join(t->shape, ", "), dtype_name(dtype),
                                        matrix ? "[n, d]" : "[n]"));
  }
  return Status::ok();
}

Status DistBackend::setup() {
  client::JoinFlags join{.ip_config = o_.ip_config,
                         .part_config = o_.part_config,
                         .role = client::Role::trainer,
                         .machine_id = o_.machine_id,
                         .num_servers = o_.num_servers,
                         .rank = o_.rank,
                         .num_trainers = o_.num_trainers,
                         .job_id = o_.job_id,
                         .call_timeout = o_.collective_timeout,
                         .secret_file = o_.secret_file};
  DGLD_ASSIGN_OR_RETURN(auto co, client::join_options(join));
  auto cluster = client::Cluster::connect(co);
  if (!cluster.is_ok()) return cluster.status().with_context("joining the cluster");
  cluster_ = std::move(*cluster);
  graph_ = std::make_unique<client::DistGraph>(*cluster_);
  const int rank = cluster_->rank(), world = cluster_->num_trainers();

  // Inputs named by the flags must exist with the right types.
  const bool hetero = cluster_->config().types.present();
  const bool uses_features = c_.learnable_features != LearnableFeatures::replace && !hetero;
  const MappedPartition& part = cluster_->local().graph();
  if (hetero) DGLD_RETURN_IF_ERROR(setup_hetero(part));
  if (!hetero) {
    DGLD_ASSIGN_OR_RETURN(const ModelKindInfo info, model_info(c_.model, c_.model_file));
    if (info.uses_edge_types) {
      return invalid_argument(fmt::format("--model {} reads the edge types of a heterogeneous graph; '{}' is "
                                          "homogeneous", c_.model, graph_name()));
    }
  }
  if (uses_features) {
    DGLD_RETURN_IF_ERROR(check_node_tensor(c_.feature, DType::float32, true).with_context("--feature"));
    feat_dim_ = part.node_tensor("_N/" + c_.feature)->shape[1];
  }
  const bool link = c_.task == "link";
  int64_t max_label = link ? 0 : -1;  // link prediction reads no labels
  if (!link) {
    DGLD_RETURN_IF_ERROR(check_node_tensor(c_.label, DType::int64, false).with_context("--label"));
    for (int64_t v : part.node_tensor(labelled(c_.label))->as<int64_t>()) max_label = std::max(max_label, v);
    DGLD_ASSIGN_OR_RETURN(train_ids_, split(labelled("train_mask"), true));
  }
  const auto& book = cluster_->partition_book();
  DGLD_ASSIGN_OR_RETURN(eval_nodes_, client::node_split([](int64_t) { return true; }, book,
                                                        client::SplitRank{cluster_->machine_id(), rank, world}));

  const auto& m0 = cluster_->machines().at(0);
  const int port = o_.rendezvous_port > 0 ? o_.rendezvous_port : m0.base_port + kRendezvousPortOffset;
  const std::string own_host = cluster_->machines().at(static_cast<size_t>(cluster_->machine_id())).host;
  log_->info("rank {} of {} (machine {}): {} training seeds, {} nodes to evaluate; rendezvous at {}:{}", rank,
             world, cluster_->machine_id(), train_ids_.size(), eval_nodes_.size(), m0.host, port);
  DGLD_ASSIGN_OR_RETURN(coll_, Collectives::create(m0.host, port, own_host, rank, world, o_.collective_timeout,
                                                      cluster_->secret()));
  coll_->watch([this] { return cluster_->health(); },
               [this] { return cluster_->diagnose(std::chrono::seconds(2)); });

  // What every trainer must agree on: the class count (the largest label of
  // any machine), the machine of every rank, the steps per epoch.
  auto t = torch::tensor({max_label}, torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(t, Reduce::max, "agreeing on the class count"));
  num_classes_ = t.item<int64_t>() + 1;
  if (num_classes_ < 1) return invalid_argument("no labels in any partition ('" + labelled(c_.label) + "' is empty)");
  auto machines = torch::zeros({world}, torch::kInt64);
  machines[rank] = cluster_->machine_id();
  DGLD_RETURN_IF_ERROR(coll_->allreduce(machines, Reduce::sum, "exchanging the trainers' machines"));
  for (int r = 0; r < world; ++r) machine_of_rank_.push_back(static_cast<int>(machines[r].item<int64_t>()));
  auto run_id = torch::zeros({1}, torch::kInt64);
  if (rank == 0) run_id[0] = static_cast<int64_t>(std::random_device{}() & 0x7fffffff);
  DGLD_RETURN_IF_ERROR(coll_->broadcast(run_id, "agreeing on the run id"));
  run_id_ = run_id.item<int64_t>();

  std::vector<std::string> endpoints = o_.sampler_endpoints;
  if (endpoints.empty() && o_.num_samplers > 0 && !link) {
    SamplerChildrenOptions so;
    so.executable = o_.sampler_worker_path;
    so.count = o_.num_samplers;
    so.part_config = o_.part_config;
    so.ip_config = o_.ip_config;
    so.machine_id = cluster_->machine_id();
    so.num_servers = o_.num_servers;
    so.group = rank;
    so.job_id = cluster_->job_id();
    so.secret_file = o_.secret_file;  // empty: they inherit DGLD_SECRET_FILE
    so.log_level = o_.log_level;
    so.feature_cache_mb = o_.feature_cache_mb;
    so.nice = kSamplingThreadNice;
    DGLD_ASSIGN_OR_RETURN(samplers_, SamplerChildren::start(so));
    endpoints = samplers_->endpoints();
  }

  DGLD_ASSIGN_OR_RETURN(SamplingSpec sampling,
                        sampling_spec(c_, hetero ? cluster_->config().types.num_etypes() : 0));
  if (link) return setup_link(sampling, uses_features);
  client::DataLoaderOptions lo;
  lo.batch_size = c_.batch_size;
  lo.shuffle = true;
  lo.seed = c_.seed + static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ULL;
  lo.spec.sampling = sampling;
  lo.spec.feature = uses_features || hetero ? c_.feature : "";
  lo.spec.label = labelled(c_.label);
  lo.spec.feature_cache_bytes = static_cast<size_t>(o_.feature_cache_mb) << 20;
  lo.prefetch_bytes = static_cast<size_t>(o_.prefetch_mb) << 20;
  lo.prefetch = o_.prefetch;
  lo.samplers = endpoints;
  lo.local_threads = 2;
  lo.local_thread_nice = kSamplingThreadNice;
  auto loader = client::DistDataLoader::create(*cluster_, train_ids_, lo);
  if (!loader.is_ok()) return loader.status().with_context("creating the data loader");
  loader_ = std::move(*loader);

  auto steps = torch::tensor({loader_->num_batches_per_epoch()}, torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(steps, Reduce::min, "agreeing on the steps per epoch"));
  steps_per_epoch_ = steps.item<int64_t>();
  if (steps_per_epoch_ < 1) return invalid_argument("a trainer has no training seeds (steps per epoch is 0)");
  if (steps_per_epoch_ < loader_->num_batches_per_epoch()) {
    log_->info("{} of this trainer's {} batches per epoch are left out to match the trainer with the fewest",
               loader_->num_batches_per_epoch() - steps_per_epoch_, loader_->num_batches_per_epoch());
  }
  return Status::ok();
}

Status DistBackend::setup_link(const SamplingSpec& sampling, bool uses_features) {
  const auto& config = cluster_->config();
  if (!config.link_split.present) {
    return invalid_argument(fmt::format("--task link: partition config {} has no link split (partition with "
                                        "dgl-partition --link-split TRAIN,VALID,TEST, or an OGB edge split)",
                                        o_.part_config));
  }
  const int rank = coll_->rank(), world = coll_->world();
  const int machine = cluster_->machine_id();
  DGLD_ASSIGN_OR_RETURN(auto train_eids, graph_->edge_split("train_mask", true));
  DGLD_ASSIGN_OR_RETURN(LinkSplitPart held, read_link_split(config, machine));
  // This trainer's share of its machine's held-out edges: the machine's
  // trainers take every T-th edge.
  const int per_machine = std::max(1, world / cluster_->num_machines());
  const int local = rank % per_machine;
  auto share = [&](const LinkEdges& all) {
    LinkEdges mine;
    mine.num_negatives = all.num_negatives;
    for (size_t i = static_cast<size_t>(local); i < all.src.size(); i += static_cast<size_t>(per_machine)) {
      mine.src.push_back(all.src[i]);
      mine.dst.push_back(all.dst[i]);
      if (!all.orig_src.empty()) mine.orig_src.push_back(all.orig_src[i]);
      if (!all.orig_dst.empty()) mine.orig_dst.push_back(all.orig_dst[i]);
      const auto k = static_cast<size_t>(all.num_negatives);
      mine.neg_dst.insert(mine.neg_dst.end(), all.neg_dst.begin() + static_cast<std::ptrdiff_t>(i * k),
                          all.neg_dst.begin() + static_cast<std::ptrdiff_t>((i + 1) * k));
    }
    return mine;
  };
  link_valid_ = share(held.valid);
  link_test_ = share(held.test);

  client::LinkLoaderOptions lo;
  lo.batch_size = c_.batch_size;
  lo.seed = c_.seed + static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ULL;
  lo.sampling = sampling;
  lo.feature = uses_features ? c_.feature : "";
  lo.feature_cache_bytes = static_cast<size_t>(o_.feature_cache_mb) << 20;
  lo.num_negatives = c_.num_negatives;
  DGLD_ASSIGN_OR_RETURN(lo.negative_sampler, client::parse_negative_sampler(c_.neg_sampler));
  lo.exclude_positives = c_.neg_exclude_positives;
  lo.exclude_reverse = c_.exclude != "self";  // DGL's 'self': the batch's edges alone
  lo.threads = 2;
  lo.thread_nice = kSamplingThreadNice;
  lo.next_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o_.collective_timeout) * 2;
  if (lo.exclude_positives) {
    // Every machine's held-out edges, on every trainer: negatives must miss them all.
    std::vector<int64_t> mine;
    for (const LinkEdges* e : {&held.valid, &held.test}) {
      for (size_t i = 0; i < e->src.size(); ++i) {
        mine.push_back(e->src[i]);
        mine.push_back(e->dst[i]);
      }
    }
    DGLD_ASSIGN_OR_RETURN(auto all, allgather(*this, ids_tensor(mine), "exchanging the held-out edges"));
    const int64_t total = all.numel();
    auto set = std::make_shared<EdgePairSet>();
    set->reserve(static_cast<size_t>(total / 2));
    const int64_t* p = all.data_ptr<int64_t>();
    for (int64_t i = 0; i + 1 < total; i += 2) set->add(p[i], p[i + 1]);
    lo.held_out = std::move(set);
  }
  auto loader = client::DistEdgeDataLoader::create(*cluster_, std::move(train_eids), lo);
  if (!loader.is_ok()) return loader.status().with_context("creating the edge loader");
  link_loader_ = std::move(*loader);
  auto steps = torch::tensor({link_loader_->num_batches_per_epoch()}, torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(steps, Reduce::min, "agreeing on the steps per epoch"));
  steps_per_epoch_ = steps.item<int64_t>();
  if (steps_per_epoch_ < 1) return invalid_argument("a trainer has no training edges (steps per epoch is 0)");
  log_->info("link prediction: {} training edges in {} batches per epoch ({} used), {} validation and {} test edges "
             "of this machine to evaluate ({} negatives each)",
             link_loader_->num_edges(), link_loader_->num_batches_per_epoch(), steps_per_epoch_,
             link_valid_.src.size(), link_test_.src.size(), link_test_.num_negatives);
  return Status::ok();
}

MemoryReport DistBackend::memory() const {
  MemoryReport m;
  m.partition_bytes = partition_file_bytes(cluster_->config(), cluster_->machine_id());
  if (loader_) {
    const auto lm = loader_->memory();
    m.feature_cache_bytes = static_cast<int64_t>(lm.feature_cache);
    m.largest_batch_bytes = static_cast<int64_t>(lm.largest_batch);
    m.idle_buffer_bytes = static_cast<int64_t>(lm.idle_buffers);
  }
  m.prefetch_limit_bytes = o_.prefetch_mb << 20;
  return m;
}

Status DistBackend::finish() {
  // Everyone is done with the servers before rank 0 may shut them down.
  DGLD_RETURN_IF_ERROR(
      cluster_->barrier("dgld-train-end", o_.collective_timeout).with_context("end-of-training barrier"));
  // The run's DistTensors (the embedding) go; the servers may serve another run.
  for (const auto& name : std::vector<std::string>(created_)) DGLD_RETURN_IF_ERROR(destroy_tensor(name));
  if (loader_) {
    const auto stats = loader_->stats();
    log_->info("batches made by sampler-workers: {}, by this trainer: {}, re-issued after a worker failed: {}",
               stats.batches_by_workers, stats.batches_by_trainer, stats.reissued);
    if (const auto [hits, misses] = loader_->feature_cache_hits_misses(); hits + misses > 0) {
      log_->info("feature cache (this trainer's batches): {} remote rows served from it, {} requested ({:.1f}% hits)",
                 hits, misses, 100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses));
    }
  }
  loader_.reset();
  link_loader_.reset();
  if (samplers_) {
    // A sampler-worker that died mid-run had its batches re-issued: a warning.
    if (Status st = samplers_->stop(); !st.is_ok()) log_->warn("stopping the sampler-workers: {}", st.message());
  }
  const bool shutdown = rank() == 0 && o_.shutdown_servers;
  if (!shutdown) DGLD_RETURN_IF_ERROR(cluster_->leave().with_context("leaving the cluster"));
  // The other trainers have left (their Leave answered) before rank 0 stops
  // the servers, so no Leave races the shutdown.
  auto left = torch::ones({1}, torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(left, Reduce::sum, "waiting for every trainer to leave"));
  if (shutdown) {
    // A server that closes the connection before its ShutdownReply arrives is
    // stopping as asked (the reply can lose the race with its exit), so
    // `closed` is only a warning.
    Status st = cluster_->shutdown_servers("training finished");
    if (!st.is_ok() && st.code() == StatusCode::closed) {
      log_->warn("shutting down the servers: {} (taken as stopped)", st.message());
    } else {
      DGLD_RETURN_IF_ERROR(st.with_context("shutting down the servers"));
    }
  }
  return Status::ok();
}

}  // namespace dist

Result<TrainResult> train_distributed(const DistTrainOptions& options, const TrainConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_train_config(config));
  if (options.ip_config.empty()) return invalid_argument("--ip-config is required for distributed training");
  if (options.part_config.empty()) return invalid_argument("--part-config is required");
  try {
    // A model file that cannot work fails here, before any server is contacted.
    if (!config.model_file.empty()) {
      DGLD_RETURN_IF_ERROR(check_model_file(config.model_file).with_context("--model-file"));
    }
    set_torch_threads(resolve_num_threads(config.num_threads));
    dist::DistBackend backend(options, config);
    DGLD_RETURN_IF_ERROR(backend.setup());
    DGLD_ASSIGN_OR_RETURN(TrainResult result, run_training(backend, config));
    DGLD_RETURN_IF_ERROR(backend.finish());
    return result;
  } catch (const c10::Error& e) {
    return internal_error(std::string("distributed training failed in LibTorch: ") +
                          first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return internal_error(std::string("distributed training failed: ") + e.what());
  }
}

}  // namespace dgld::trainer
