#include "daemons/trainer_host/dist_trainer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "client/cluster.h"
#include "client/data_loader.h"
#include "client/dist_graph.h"
#include "client/local_partition.h"
#include "client/split.h"
#include "common/logging.h"
#include "common/partition/partition.h"
#include "daemons/trainer_host/sampler_children.h"
#include "daemons/trainer_host/training_loop.h"

namespace dgld::trainer {

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The collectives of one job: a TCPStore rendezvous and a Gloo process group.
class Collectives {
 public:
  static Result<std::unique_ptr<Collectives>> create(const std::string& master_host, int port,
                                                     const std::string& own_host, int rank, int world,
                                                     std::chrono::milliseconds timeout) {
    auto c = std::unique_ptr<Collectives>(new Collectives);
    c->rank_ = rank;
    c->world_ = world;
    c->timeout_ = timeout;
    c->peer_ = fmt::format("the trainers' process group (store {}:{}, rank {} of {})", master_host, port, rank,
                           world);
    try {
      c10d::TCPStoreOptions so;
      so.port = static_cast<uint16_t>(port);
      so.isServer = rank == 0;
      so.numWorkers = static_cast<size_t>(world);
      so.waitWorkers = false;
      so.timeout = timeout;
      c->store_ = c10::make_intrusive<c10d::TCPStore>(master_host, so);
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(own_host));
      c->pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(c->store_, rank, world, opts);
    } catch (const std::exception& e) {
      return closed_error(fmt::format("joining {} failed: {}", c->peer_, first_line(e.what())));
    }
    return c;
  }

  int rank() const { return rank_; }
  int world() const { return world_; }
  // `health` is checked before every collective: once it fails (the
  // coordinator dropped a trainer, or is gone) the job stops there instead of
  // training on. `diagnose` runs after a collective failed and says what else
  // is wrong (a lost graph-server is often why a peer died).
  void watch(std::function<Status()> health, std::function<Status()> diagnose) {
    health_ = std::move(health);
    diagnose_ = std::move(diagnose);
  }

  Status allreduce(torch::Tensor& t, Reduce op, const std::string& what) {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = op == Reduce::sum ? c10d::ReduceOp::SUM : op == Reduce::min ? c10d::ReduceOp::MIN
                                                                             : c10d::ReduceOp::MAX;
    o.timeout = timeout_;
    return run(what, [&] { return pg_->allreduce(v, o); });
  }
  Status broadcast(torch::Tensor& t, const std::string& what) {
    std::vector<at::Tensor> v{t};
    c10d::BroadcastOptions o;
    o.rootRank = 0;
    o.timeout = timeout_;
    return run(what, [&] { return pg_->broadcast(v, o); });
  }
  // Rows of `in` go to the ranks in order, in_splits[r] of them to rank r;
  // `out` receives out_splits[r] rows from rank r.
  Status alltoall(torch::Tensor& out, torch::Tensor& in, std::vector<int64_t> out_splits,
                  std::vector<int64_t> in_splits, const std::string& what) {
    c10d::AllToAllOptions o;
    o.timeout = timeout_;
    return run(what, [&] { return pg_->alltoall_base(out, in, out_splits, in_splits, o); });
  }

 private:
  Collectives() = default;
  template <typename F>
  Status run(const std::string& what, F&& start) {
    if (health_) {
      if (Status h = health_(); !h.is_ok()) return h.with_context(what);
    }
    try {
      auto work = start();
      if (!work->wait(timeout_)) {
        return timeout_error(fmt::format("{}: {} did not complete within {} ms (a trainer died or hangs){}", what,
                                         peer_, timeout_.count(), diagnosis()));
      }
    } catch (const std::exception& e) {
      std::string msg = e.what();
      if (auto nl = msg.find("\nException raised from"); nl != std::string::npos) msg.resize(nl);
      return closed_error(fmt::format("{}: {} failed (a trainer died?): {}{}", what, peer_, msg, diagnosis()));
    }
    return Status::ok();
  }
  std::string diagnosis() const {
    if (!diagnose_) return "";
    Status d = diagnose_();
    return d.is_ok() ? "" : "; " + d.message();
  }

  int rank_ = 0, world_ = 1;
  std::chrono::milliseconds timeout_{60000};
  std::string peer_;
  std::function<Status()> health_, diagnose_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

// Which trainer owns each embedding row: one of the trainers of the machine
// that owns the node (by id modulo their count); a machine without trainers
// leaves its rows to rank id % world.
class RowOwners {
 public:
  RowOwners(const RangePartitionBook& book, const std::vector<int>& machine_of_rank)
      : book_(book), by_machine_(static_cast<size_t>(book.num_partitions())),
        world_(static_cast<int>(machine_of_rank.size())) {
    for (int r = 0; r < world_; ++r) by_machine_[static_cast<size_t>(machine_of_rank[r])].push_back(r);
  }
  int owner(int64_t id) const {
    const auto& ranks = by_machine_[static_cast<size_t>(book_.node_partition(id))];
    if (ranks.empty()) return static_cast<int>(id % world_);
    return ranks[static_cast<size_t>(id % static_cast<int64_t>(ranks.size()))];
  }
  std::vector<int64_t> owned_by(int rank) const {
    std::vector<int64_t> ids;
    for (int64_t id = 0; id < book_.num_nodes(); ++id) {
      if (owner(id) == rank) ids.push_back(id);
    }
    return ids;
  }

 private:
  const RangePartitionBook& book_;
  std::vector<std::vector<int>> by_machine_;
  int world_;
};

// A learnable embedding's tables as DistTensors; gradients routed to the row
// owners with an all-to-all.
class DistEmbeddingStore final : public EmbeddingStore {
 public:
  DistEmbeddingStore(std::vector<client::DistTensor> tables, Collectives& coll, RowOwners owners)
      : tables_(std::move(tables)), coll_(coll), owners_(std::move(owners)) {}

  int64_t num_rows() const override { return tables_[0].num_rows(); }
  int num_tables() const override { return static_cast<int>(tables_.size()); }
  int64_t dim(int table) const override { return tables_[static_cast<size_t>(table)].shape()[1]; }
  Status read(int table, std::span<const int64_t> ids, float* out) const override {
    return tables_[static_cast<size_t>(table)].pull_into(ids, out);
  }
  Status write(int table, std::span<const int64_t> ids, const float* rows) override {
    return tables_[static_cast<size_t>(table)].push(ids, rows);
  }
  int world_size() const override { return coll_.world(); }
  std::vector<int64_t> owned_ids() const override { return owners_.owned_by(coll_.rank()); }
  Status sync() override {
    auto one = torch::ones({1}, torch::kInt64);
    return coll_.allreduce(one, Reduce::sum, "embedding update barrier");
  }

  Status route(const std::vector<int64_t>& ids, const torch::Tensor& grads, std::vector<int64_t>& owned_ids,
               torch::Tensor& owned_grads) override {
    const int world = coll_.world();
    const int64_t d = grads.size(1);
    // Order the rows by owner.
    std::vector<int> owner(ids.size());
    std::vector<int64_t> send_counts(static_cast<size_t>(world), 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      owner[i] = owners_.owner(ids[i]);
      ++send_counts[static_cast<size_t>(owner[i])];
    }
    std::vector<int64_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return owner[a] < owner[b]; });
    auto send_ids = torch::empty({static_cast<int64_t>(ids.size())}, torch::kInt64);
    for (size_t i = 0; i < order.size(); ++i) send_ids.data_ptr<int64_t>()[i] = ids[static_cast<size_t>(order[i])];
    auto send_grads = grads.index_select(0, ids_tensor(order)).contiguous();

    auto counts_in = torch::tensor(send_counts, torch::kInt64);
    auto counts_out = torch::empty({world}, torch::kInt64);
    const std::vector<int64_t> ones(static_cast<size_t>(world), 1);
    DGLD_RETURN_IF_ERROR(coll_.alltoall(counts_out, counts_in, ones, ones, "embedding gradients: counts"));
    std::vector<int64_t> recv_counts(counts_out.data_ptr<int64_t>(), counts_out.data_ptr<int64_t>() + world);
    const int64_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
    auto recv_ids = torch::empty({total}, torch::kInt64);
    owned_grads = torch::empty({total, d}, torch::kFloat32);
    DGLD_RETURN_IF_ERROR(coll_.alltoall(recv_ids, send_ids, recv_counts, send_counts, "embedding gradients: ids"));
    DGLD_RETURN_IF_ERROR(
        coll_.alltoall(owned_grads, send_grads, recv_counts, send_counts, "embedding gradients: rows"));
    owned_ids.assign(recv_ids.data_ptr<int64_t>(), recv_ids.data_ptr<int64_t>() + total);
    return Status::ok();
  }

 private:
  std::vector<client::DistTensor> tables_;
  Collectives& coll_;
  RowOwners owners_;
};

std::string node_tensor_names(const MappedPartition& part) {
  std::string names;
  for (const auto& t : part.node_tensors()) names += (names.empty() ? "" : ", ") + t.name;
  return names.empty() ? "none" : names;
}

class DistBackend final : public TrainingBackend {
 public:
  DistBackend(const DistTrainOptions& o, const TrainConfig& c) : o_(o), c_(c), log_(logger("trainer")) {}
  Status setup();
  Status finish();

  int rank() const override { return coll_->rank(); }
  int world_size() const override { return coll_->world(); }
  int part_id() const override { return cluster_->machine_id(); }
  const std::string& graph_name() const override { return cluster_->config().graph_name; }
  int64_t num_nodes() const override { return cluster_->partition_book().num_nodes(); }
  int64_t feat_dim() const override { return feat_dim_; }
  int64_t num_classes() const override { return num_classes_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  void start_epoch(int epoch) override {
    if (link_loader_) {
      link_loader_->start_epoch(epoch);
    } else {
      loader_->start_epoch(epoch);
    }
  }
  Result<client::Batch> next_batch() override {
    auto next = loader_->next();
    if (!next.is_ok()) return next.status();
    if (!next->has_value()) return internal_error("the data loader ran out of batches");
    return std::move(**next);
  }
  Status allreduce(torch::Tensor& t, Reduce op, const std::string& what) override {
    return coll_->allreduce(t, op, what);
  }
  Status broadcast(torch::Tensor& t, const std::string& what) override { return coll_->broadcast(t, what); }
  Result<EvalCounts> layerwise(Model& model, const Layer0Input& input, const LayerwiseRequest& request) override;
  Status original_node_ids(int64_t start, int64_t count, int64_t* out) override;
  Result<std::unique_ptr<EmbeddingStore>> create_embedding_store(const std::vector<int64_t>& dims,
                                                                 uint64_t seed) override;
  Result<client::LinkBatch> next_link_batch() override {
    auto next = link_loader_->next();
    if (!next.is_ok()) return next.status();
    if (!next->has_value()) return internal_error("the edge loader ran out of batches");
    return std::move(**next);
  }
  Result<LinkEdges> link_eval_edges(bool test) override { return test ? link_test_ : link_valid_; }
  const GraphTypeInfo* graph_types() const override {
    return cluster_->config().types.present() ? &cluster_->config().types : nullptr;
  }
  std::vector<int64_t> type_feature_dims() const override { return type_feature_dims_; }

 private:
  // Node tensor `name` of the labelled nodes: "_N/<name>", or on a
  // heterogeneous graph "<target type>/<name>".
  std::string labelled(const std::string& name) const { return target_prefix_ + name; }
  // Heterogeneous graphs: the target type, the features' widths, the sampler's per-type fanouts.
  Status setup_hetero(const MappedPartition& part);
  // --task link: the edge loader over this trainer's edge_split of
  // the edge tensor train_mask, and its share of the held-out edges.
  Status setup_link(const SamplingSpec& sampling, bool uses_features);
  Result<std::vector<int64_t>> split(const std::string& mask, bool required);
  Status check_node_tensor(const std::string& name, DType dtype, bool matrix) const;
  // Collective; the tensor is deleted by destroy_tensor() or finish().
  Result<client::DistTensor> create_tensor(const std::string& name, int64_t dim, client::Init init, uint64_t seed);
  Status destroy_tensor(const std::string& name);
  Status count_correct(std::span<const int64_t> nodes, const torch::Tensor& logits, EvalCounts& counts) const;

  const DistTrainOptions& o_;
  const TrainConfig& c_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<client::Cluster> cluster_;
  std::unique_ptr<client::DistGraph> graph_;
  std::unique_ptr<Collectives> coll_;
  std::unique_ptr<SamplerChildren> samplers_;
  std::unique_ptr<client::DistDataLoader> loader_;
  std::unique_ptr<client::DistEdgeDataLoader> link_loader_;
  LinkEdges link_valid_, link_test_;
  std::vector<int64_t> train_ids_, eval_nodes_;
  std::vector<int> machine_of_rank_;
  int64_t run_id_ = 0;                // names this run's DistTensors apart from any other run's
  std::vector<std::string> created_;  // DistTensors this run created and must delete
  int64_t feat_dim_ = 0, num_classes_ = 0, steps_per_epoch_ = 0;
  int eval_round_ = 0;
  std::string target_prefix_ = "_N/";
  int target_type_ = -1;                         // heterogeneous graphs: the labelled node type
  std::vector<int64_t> type_feature_dims_;        // heterogeneous graphs: by node type, 0 without features
  std::vector<client::DistTensor> typed_features_;  // heterogeneous graphs: the per-type feature tensors
};

Status DistBackend::setup_hetero(const MappedPartition& part) {
  const GraphTypeInfo& types = cluster_->config().types;
  if (c_.model != "rgcn") {
    return invalid_argument(fmt::format("graph '{}' is heterogeneous ({} node types, {} edge types): train it with "
                                        "--model rgcn (docs/heterogeneous.md), not --model {}",
                                        graph_name(), types.num_ntypes(), types.num_etypes(), c_.model));
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
  if (o_.num_samplers > 0 || !o_.sampler_endpoints.empty()) {
    return invalid_argument("--num-samplers: sampler-workers do not make heterogeneous batches yet; run with "
                            "--num-samplers 0 (the trainer samples in its own threads)");
  }
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
  if (!hetero && c_.model == "rgcn") {
    return invalid_argument(fmt::format("--model rgcn needs a heterogeneous graph; '{}' is homogeneous", graph_name()));
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
  DGLD_ASSIGN_OR_RETURN(coll_, Collectives::create(m0.host, port, own_host, rank, world, o_.collective_timeout));
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
  lo.exclude_seed_edges = c_.exclude != "none";
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

Result<client::DistTensor> DistBackend::create_tensor(const std::string& name, int64_t dim, client::Init init,
                                                      uint64_t seed) {
  client::CreateTensor spec;
  spec.name = name;
  spec.dtype = DType::float32;
  spec.shape = {num_nodes(), dim};
  spec.policy = client::Policy::node;
  spec.init = init;
  spec.init_a = -1.0;
  spec.init_b = 1.0;
  spec.seed = seed;
  auto t = client::DistTensor::create(*cluster_, spec, o_.collective_timeout);
  if (t.is_ok()) created_.push_back(name);
  return t;
}

Status DistBackend::destroy_tensor(const std::string& name) {
  created_.erase(std::remove(created_.begin(), created_.end(), name), created_.end());
  DGLD_ASSIGN_OR_RETURN(auto t, client::DistTensor::open(*cluster_, name));
  return t.destroy(o_.collective_timeout).with_context("deleting DistTensor '" + name + "'");
}

Result<std::unique_ptr<EmbeddingStore>> DistBackend::create_embedding_store(const std::vector<int64_t>& dims,
                                                                            uint64_t seed) {
  std::vector<client::DistTensor> tables;
  for (size_t i = 0; i < dims.size(); ++i) {
    DGLD_ASSIGN_OR_RETURN(auto t, create_tensor(fmt::format("dgld.{}.embedding.{}", run_id_, i), dims[i],
                                                i == 0 ? client::Init::uniform : client::Init::zeros, seed));
    tables.push_back(std::move(t));
  }
  return std::unique_ptr<EmbeddingStore>(
      new DistEmbeddingStore(std::move(tables), *coll_, RowOwners(cluster_->partition_book(), machine_of_rank_)));
}

Status DistBackend::count_correct(std::span<const int64_t> nodes, const torch::Tensor& logits,
                                  EvalCounts& counts) const {
  DGLD_ASSIGN_OR_RETURN(auto labels_t, graph_->ndata(labelled(c_.label)));
  DGLD_ASSIGN_OR_RETURN(auto labels, labels_t.pull_as<int64_t>(nodes));
  const auto pred = logits.argmax(1);
  const int64_t* p = pred.data_ptr<int64_t>();
  for (const char* mask : {"val_mask", "test_mask"}) {
    auto mt = graph_->ndata(labelled(mask));
    if (!mt.is_ok()) continue;  // no such split
    DGLD_ASSIGN_OR_RETURN(auto m, mt->pull_as<uint8_t>(nodes));
    int64_t& correct = mask[0] == 'v' ? counts.val_correct : counts.test_correct;
    int64_t& total = mask[0] == 'v' ? counts.val_total : counts.test_total;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!m[i]) continue;
      ++total;
      correct += p[i] == labels[i] ? 1 : 0;
    }
  }
  return Status::ok();
}

Result<EvalCounts> DistBackend::layerwise(Model& model, const Layer0Input& input, const LayerwiseRequest& request) {
  const int round = eval_round_++;
  client::DistNeighborSource source(*cluster_);
  MultiLayerNeighborSampler full({c_.eval_fan_out});
  const GraphTypeInfo& types = cluster_->config().types;
  if (types.present()) {
    full.set_etype_fanouts({std::vector<int64_t>(static_cast<size_t>(types.num_etypes()), c_.eval_fan_out)});
  }
  // The last layer's output is needed for the labelled type only (unless kept).
  std::vector<int64_t> target_nodes;
  if (target_type_ >= 0) {
    const auto& book = cluster_->partition_book();
    for (int64_t v : eval_nodes_) {
      if (book.node_type(v) == target_type_) target_nodes.push_back(v);
    }
  }
  std::optional<client::DistTensor> features;
  if (feat_dim_ > 0) {
    DGLD_ASSIGN_OR_RETURN(features, graph_->ndata(c_.feature));
  }
  EvalCounts counts;
  const int L = model.num_layers();
  auto kept = [&](int l) { return std::find(request.keep.begin(), request.keep.end(), l) != request.keep.end(); };
  // outs[l]: layer l's output for every node, while a later layer or the
  // caller still needs it.
  std::vector<std::optional<client::DistTensor>> outs(static_cast<size_t>(L));
  std::vector<float> rows;
  for (int l = 0; l < L; ++l) {
    const bool last = l == L - 1;
    auto& cur = outs[static_cast<size_t>(l)];
    if (!last || kept(l)) {
      DGLD_ASSIGN_OR_RETURN(cur, create_tensor(fmt::format("dgld.{}.eval{}.h{}", run_id_, round, l),
                                               model.impl().layer_out_dim(l), client::Init::zeros, 0));
    }
    const std::vector<int64_t>& nodes = last && !kept(l) && target_type_ >= 0 ? target_nodes : eval_nodes_;
    for (size_t start = 0; start < nodes.size(); start += static_cast<size_t>(c_.batch_size_eval)) {
      const size_t len = std::min(static_cast<size_t>(c_.batch_size_eval), nodes.size() - start);
      const std::span<const int64_t> chunk(nodes.data() + start, len);
      auto batch = full.sample(source, chunk, 0);
      if (!batch.is_ok()) return batch.status().with_context(fmt::format("layer {}: sampling", l));
      auto bt = make_block_graph(batch->blocks[0], types.num_etypes());
      if (!bt.is_ok()) return bt.status().with_context(fmt::format("layer {}", l));
      const auto& src = batch->input_nodes;
      const int64_t n = static_cast<int64_t>(src.size());
      torch::Tensor h_src;
      if (l == 0) {
        rows.resize(static_cast<size_t>(n * feat_dim_));
        if (features) DGLD_RETURN_IF_ERROR(features->pull_into(src, rows.data()).with_context("layer 0: features"));
        std::vector<client::TypedRows> typed;
        if (!typed_features_.empty()) {
          DGLD_ASSIGN_OR_RETURN(typed, client::pull_typed_rows(*cluster_, typed_features_, src));
        }
        DGLD_ASSIGN_OR_RETURN(h_src, input(src, rows_tensor(rows, n, feat_dim_), typed));
      } else {
        const auto& prev = outs[static_cast<size_t>(l - 1)];
        h_src = torch::empty({n, prev->shape()[1]}, torch::kFloat32);
        DGLD_RETURN_IF_ERROR(
            prev->pull_into(src, h_src.data_ptr<float>()).with_context(fmt::format("layer {}: inputs", l)));
      }
      auto h = model.impl().forward_layer(l, *bt, h_src).contiguous();
      if (last && request.count) DGLD_RETURN_IF_ERROR(count_correct(chunk, h, counts));
      if (cur) {
        DGLD_RETURN_IF_ERROR(cur->push(chunk, h.data_ptr<float>()).with_context(fmt::format("layer {}: outputs", l)));
      }
    }
    // Layer l is complete everywhere before anyone reads it.
    auto one = torch::ones({1}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(coll_->allreduce(one, Reduce::sum, fmt::format("layer-wise inference: layer {} barrier", l)));
    if (l > 0 && outs[static_cast<size_t>(l - 1)] && !kept(l - 1)) {
      DGLD_RETURN_IF_ERROR(destroy_tensor(outs[static_cast<size_t>(l - 1)]->name()));
      outs[static_cast<size_t>(l - 1)].reset();
    }
  }
  for (const int l : request.keep) {
    auto& out = outs[static_cast<size_t>(l)];
    if ((rank() == 0 || request.every_rank) && request.on_kept) {
      const RowReader read = [&out](std::span<const int64_t> ids, float* dst) { return out->pull_into(ids, dst); };
      DGLD_RETURN_IF_ERROR(request.on_kept(l, out->shape()[1], read));
    }
    auto one = torch::ones({1}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(
        coll_->allreduce(one, Reduce::sum, fmt::format("layer-wise inference: layer {} used", l)));
  }
  for (auto& out : outs) {
    if (out) DGLD_RETURN_IF_ERROR(destroy_tensor(out->name()));
  }
  if (!request.count) return counts;
  auto t = torch::tensor({counts.val_correct, counts.val_total, counts.test_correct, counts.test_total},
                         torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(t, Reduce::sum, "evaluation: counts"));
  return EvalCounts{t[0].item<int64_t>(), t[1].item<int64_t>(), t[2].item<int64_t>(), t[3].item<int64_t>()};
}

Status DistBackend::original_node_ids(int64_t start, int64_t count, int64_t* out) {
  DGLD_ASSIGN_OR_RETURN(auto t, graph_->ndata("orig_id"));
  std::vector<int64_t> ids(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) ids[static_cast<size_t>(i)] = start + i;
  return t.pull_into(ids, out);
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

}  // namespace

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
    DistBackend backend(options, config);
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
