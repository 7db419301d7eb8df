#include "daemons/trainer_host/dist_trainer.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "common/client/cluster.h"
#include "common/client/data_loader.h"
#include "common/client/dist_graph.h"
#include "common/client/local_partition.h"
#include "common/logging.h"
#include "common/partition/partition.h"
#include "daemons/trainer_host/model_impl.h"

namespace dgld::trainer {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void set_threads(int n) {
  at::set_num_threads(n);
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
}

torch::Tensor ids_tensor(std::span<const int64_t> ids) {
  auto t = torch::empty({static_cast<int64_t>(ids.size())}, torch::kInt64);
  if (!ids.empty()) std::memcpy(t.data_ptr<int64_t>(), ids.data(), ids.size() * sizeof(int64_t));
  return t;
}

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
      return closed_error(fmt::format("joining {} failed: {}", c->peer_, e.what()));
    }
    return c;
  }

  int rank() const { return rank_; }
  int world() const { return world_; }

  // In place; `what` names the step for the error.
  Status allreduce(torch::Tensor& t, c10d::ReduceOp op, const std::string& what) {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = op;
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

 private:
  Collectives() = default;
  template <typename F>
  Status run(const std::string& what, F&& start) {
    try {
      auto work = start();
      if (!work->wait(timeout_)) {
        return timeout_error(fmt::format("{}: {} did not complete within {} ms (a trainer died or hangs)", what,
                                         peer_, timeout_.count()));
      }
    } catch (const std::exception& e) {
      std::string msg = e.what();
      if (auto nl = msg.find("\nException raised from"); nl != std::string::npos) msg.resize(nl);
      return closed_error(fmt::format("{}: {} failed (a trainer died?): {}", what, peer_, msg));
    }
    return Status::ok();
  }

  int rank_ = 0, world_ = 1;
  std::chrono::milliseconds timeout_{60000};
  std::string peer_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

class DistRun {
 public:
  DistRun(const DistTrainOptions& o, const TrainConfig& c) : o_(o), c_(c), log_(logger("trainer")) {}
  Result<DistTrainResult> run();

 private:
  Status setup();
  Status train_epoch(int epoch, EpochMetrics& m, double& allreduce_s);
  Result<EvalMetrics> evaluate(int epoch);
  Status count_correct(std::span<const int64_t> ids, int64_t& correct);
  Result<std::vector<int64_t>> split(const std::string& mask, bool required);

  const DistTrainOptions& o_;
  const TrainConfig& c_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<client::Cluster> cluster_;
  std::unique_ptr<client::DistGraph> graph_;
  std::unique_ptr<Collectives> coll_;
  std::unique_ptr<client::DistDataLoader> loader_;
  std::unique_ptr<client::BatchBuilder> eval_builder_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::vector<int64_t> train_ids_, val_ids_, test_ids_;
  int64_t feat_dim_ = 0, num_classes_ = 0, steps_per_epoch_ = 0;
};

Result<std::vector<int64_t>> DistRun::split(const std::string& mask, bool required) {
  auto ids = graph_->node_split(mask, /*force_even=*/true);
  if (!ids.is_ok() && !required && ids.status().code() == StatusCode::not_found) return std::vector<int64_t>{};
  if (!ids.is_ok()) return ids.status().with_context("node_split of '" + mask + "'");
  return ids;
}

Status DistRun::setup() {
  client::ClusterOptions co;
  co.ip_config = o_.ip_config;
  co.part_config = o_.part_config;
  co.role = client::Role::trainer;
  co.machine_id = o_.machine_id;
  co.num_servers = o_.num_servers;
  co.requested_rank = o_.rank;
  co.num_trainers = o_.num_trainers;
  co.call_timeout = o_.collective_timeout;
  auto cluster = client::Cluster::connect(co);
  if (!cluster.is_ok()) return cluster.status().with_context("joining the cluster");
  cluster_ = std::move(*cluster);
  graph_ = std::make_unique<client::DistGraph>(*cluster_);
  const int rank = cluster_->rank(), world = cluster_->num_trainers();

  // Shapes from this machine's partition; the class count agreed below.
  const MappedPartition& part = cluster_->local().graph();
  const TensorView* feats = part.node_tensor("_N/features");
  if (!feats || feats->dtype != DType::float32 || feats->shape.size() != 2) {
    return invalid_argument("partition " + std::to_string(cluster_->machine_id()) +
                            " needs a float32 [n, d] node tensor '_N/features'");
  }
  feat_dim_ = feats->shape[1];
  const TensorView* labels = part.node_tensor("_N/labels");
  if (!labels || labels->dtype != DType::int64) {
    return invalid_argument("partition " + std::to_string(cluster_->machine_id()) +
                            " needs an int64 node tensor '_N/labels'");
  }
  int64_t max_label = -1;
  for (int64_t v : labels->as<int64_t>()) max_label = std::max(max_label, v);

  DGLD_ASSIGN_OR_RETURN(train_ids_, split("train_mask", true));
  DGLD_ASSIGN_OR_RETURN(val_ids_, split("val_mask", false));
  DGLD_ASSIGN_OR_RETURN(test_ids_, split("test_mask", false));

  const auto& m0 = cluster_->machines().at(0);
  const int port = o_.rendezvous_port > 0 ? o_.rendezvous_port : m0.base_port + kRendezvousPortOffset;
  const std::string own_host = cluster_->machines().at(static_cast<size_t>(cluster_->machine_id())).host;
  log_->info("rank {} of {} (machine {}): {} train / {} val / {} test seeds; rendezvous at {}:{}", rank, world,
             cluster_->machine_id(), train_ids_.size(), val_ids_.size(), test_ids_.size(), m0.host, port);
  DGLD_ASSIGN_OR_RETURN(coll_, Collectives::create(m0.host, port, own_host, rank, world, o_.collective_timeout));

  // The class count: MAX of every machine's largest label.
  auto t = torch::tensor({max_label}, torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(t, c10d::ReduceOp::MAX, "agreeing on the class count"));
  num_classes_ = t.item<int64_t>() + 1;
  if (num_classes_ < 1) return invalid_argument("no labels in any partition");

  DGLD_ASSIGN_OR_RETURN(auto fanouts, parse_fan_out(c_.fan_out));
  client::DataLoaderOptions lo;
  lo.batch_size = c_.batch_size;
  lo.shuffle = true;
  lo.seed = c_.seed + static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ULL;
  lo.spec.fanouts = fanouts;
  lo.spec.replace = c_.replace;
  lo.samplers = o_.sampler_endpoints;
  lo.local_threads = 2;
  auto loader = client::DistDataLoader::create(*cluster_, train_ids_, lo);
  if (!loader.is_ok()) return loader.status().with_context("creating the data loader");
  loader_ = std::move(*loader);

  client::BatchSpec eval_spec;
  eval_spec.fanouts.assign(fanouts.size(), -1);
  auto eb = client::BatchBuilder::create(*cluster_, eval_spec);
  if (!eb.is_ok()) return eb.status().with_context("creating the evaluation sampler");
  eval_builder_ = std::move(*eb);

  // Steps per epoch: the minimum over trainers (so nobody waits in an allreduce
  // for a peer that has run out of batches).
  auto steps = torch::tensor({loader_->num_batches_per_epoch()}, torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(steps, c10d::ReduceOp::MIN, "agreeing on the steps per epoch"));
  steps_per_epoch_ = steps.item<int64_t>();
  if (steps_per_epoch_ < 1) return invalid_argument("a trainer has no training seeds (steps per epoch is 0)");

  DGLD_ASSIGN_OR_RETURN(ModelKind kind, parse_model_kind(c_.model));
  ModelConfig mc;
  mc.kind = kind;
  mc.in_dim = feat_dim_;
  mc.num_hidden = c_.num_hidden;
  mc.num_classes = num_classes_;
  mc.num_layers = c_.num_layers;
  mc.dropout = c_.dropout;
  mc.num_heads = c_.num_heads;
  torch::manual_seed(c_.seed);
  DGLD_ASSIGN_OR_RETURN(model_, Model::create(mc));
  // Every trainer starts from rank 0's weights.
  {
    torch::NoGradGuard no_grad;
    auto params = model_->impl().net->parameters();
    std::vector<torch::Tensor> flat;
    for (auto& p : params) flat.push_back(p.detach().reshape({-1}));
    auto bucket = torch::cat(flat);
    DGLD_RETURN_IF_ERROR(coll_->broadcast(bucket, "broadcasting rank 0's initial weights"));
    int64_t off = 0;
    for (auto& p : params) {
      p.copy_(bucket.narrow(0, off, p.numel()).view_as(p));
      off += p.numel();
    }
  }
  torch::manual_seed(c_.seed + 1 + static_cast<uint64_t>(rank));  // dropout differs per trainer
  optimizer_ = std::make_unique<torch::optim::Adam>(
      model_->impl().net->parameters(), torch::optim::AdamOptions(c_.lr).weight_decay(c_.weight_decay));
  log_->info("training {} data-parallel on '{}' with {} trainers: {} steps per epoch (min over trainers)",
             model_->describe(), cluster_->config().graph_name, world, steps_per_epoch_);
  return Status::ok();
}

Status DistRun::train_epoch(int epoch, EpochMetrics& m, double& allreduce_s) {
  const auto t_epoch = Clock::now();
  auto& net = model_->impl().net;
  net->train();
  auto params = net->parameters();
  loader_->start_epoch(epoch);
  double loss_sum = 0;
  int64_t correct = 0, seeds = 0;
  for (int64_t step = 0; step < steps_per_epoch_; ++step) {
    const std::string where = fmt::format("epoch {} step {}", epoch, step);
    auto t0 = Clock::now();
    auto next = loader_->next();
    if (!next.is_ok()) return next.status().with_context(where);
    if (!next->has_value()) return internal_error(where + ": the data loader ran out of batches");
    client::Batch& b = **next;
    m.sample_s += b.timings.sample_s;  // on whoever made the batch (prefetched)
    const auto t_input = Clock::now();
    auto input = make_model_input(b.mini_batch, b.features, b.feature_dim);
    if (!input.is_ok()) return input.status().with_context(where);
    const auto labels = ids_tensor(b.labels);
    m.fetch_s += b.timings.fetch_s + seconds_since(t_input);
    (void)t0;

    t0 = Clock::now();
    auto logits = forward_checked(*model_, *input);
    if (!logits.is_ok()) return logits.status().with_context(where);
    auto loss = torch::nn::functional::cross_entropy(*logits, labels);
    const double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) {
      return internal_error(fmt::format("the loss became {} at {} (lr {}): training stopped; try a lower --lr",
                                        loss_value, where, c_.lr));
    }
    optimizer_->zero_grad();
    loss.backward();

    // One bucket of every gradient, averaged over the trainers.
    const auto t_ar = Clock::now();
    std::vector<torch::Tensor> flat;
    for (auto& p : params) {
      flat.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
    }
    auto bucket = torch::cat(flat);
    DGLD_RETURN_IF_ERROR(coll_->allreduce(bucket, c10d::ReduceOp::SUM, where + ": gradient allreduce"));
    bucket.div_(static_cast<double>(coll_->world()));
    {
      torch::NoGradGuard no_grad;
      int64_t off = 0;
      for (auto& p : params) {
        auto g = bucket.narrow(0, off, p.numel()).view_as(p);
        if (p.grad().defined()) {
          p.mutable_grad().copy_(g);
        } else {
          p.mutable_grad() = g.clone();
        }
        off += p.numel();
      }
    }
    allreduce_s += seconds_since(t_ar);
    optimizer_->step();
    const int64_t batch_correct = logits->argmax(1).eq(labels).sum().item<int64_t>();
    m.compute_s += seconds_since(t0);

    loss_sum += loss_value;
    correct += batch_correct;
    seeds += static_cast<int64_t>(b.labels.size());
    if (c_.log_every > 0 && (step + 1) % c_.log_every == 0) {
      log_->info("Part {} | Epoch {:05d} | Step {:05d} | Loss {:.4f} | Train Acc {:.4f}", cluster_->machine_id(),
                 epoch, step, loss_value,
                 b.labels.empty() ? 0.0 : static_cast<double>(batch_correct) / static_cast<double>(b.labels.size()));
    }
  }
  // Loss and accuracy over every trainer's batches.
  auto sums = torch::tensor({loss_sum, static_cast<double>(steps_per_epoch_), static_cast<double>(correct),
                             static_cast<double>(seeds)},
                            torch::kFloat64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(sums, c10d::ReduceOp::SUM, fmt::format("epoch {}: metrics", epoch)));
  auto s = sums.accessor<double, 1>();
  m.loss = s[1] > 0 ? s[0] / s[1] : 0.0;
  m.train_acc = s[3] > 0 ? s[2] / s[3] : 0.0;
  m.time_s = seconds_since(t_epoch);
  m.seeds_per_s = m.time_s > 0 ? s[3] / m.time_s : 0.0;
  return Status::ok();
}

Status DistRun::count_correct(std::span<const int64_t> ids, int64_t& correct) {
  auto& net = model_->impl().net;
  correct = 0;
  int64_t batch_id = 0;
  for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(c_.batch_size_eval), ++batch_id) {
    const size_t len = std::min(static_cast<size_t>(c_.batch_size_eval), ids.size() - start);
    auto b = eval_builder_->build(batch_id, ids.subspan(start, len), 0);
    if (!b.is_ok()) return b.status().with_context("evaluation sampling");
    auto input = make_model_input(b->mini_batch, b->features, b->feature_dim);
    if (!input.is_ok()) return input.status().with_context("evaluation");
    auto logits = forward_checked(*model_, *input);
    if (!logits.is_ok()) return logits.status().with_context("evaluation");
    correct += logits->argmax(1).eq(ids_tensor(b->labels)).sum().item<int64_t>();
    (void)net;
  }
  return Status::ok();
}

Result<EvalMetrics> DistRun::evaluate(int epoch) {
  const auto t0 = Clock::now();
  auto& net = model_->impl().net;
  net->eval();
  torch::NoGradGuard no_grad;
  int64_t val_correct = 0, test_correct = 0;
  Status st = count_correct(val_ids_, val_correct);
  if (st.is_ok()) st = count_correct(test_ids_, test_correct);
  net->train();
  DGLD_RETURN_IF_ERROR(st.with_context(fmt::format("epoch {}", epoch)));
  auto counts = torch::tensor({val_correct, static_cast<int64_t>(val_ids_.size()), test_correct,
                               static_cast<int64_t>(test_ids_.size())},
                              torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(counts, c10d::ReduceOp::SUM, fmt::format("epoch {}: evaluation", epoch)));
  auto c = counts.accessor<int64_t, 1>();
  EvalMetrics e;
  e.epoch = epoch;
  e.val_acc = c[1] > 0 ? static_cast<double>(c[0]) / static_cast<double>(c[1]) : 0.0;
  e.test_acc = c[3] > 0 ? static_cast<double>(c[2]) / static_cast<double>(c[3]) : 0.0;
  e.time_s = seconds_since(t0);
  return e;
}

Result<DistTrainResult> DistRun::run() {
  const auto t_start = Clock::now();
  set_threads(resolve_num_threads(c_.num_threads));
  DGLD_RETURN_IF_ERROR(setup());
  DistTrainResult out;
  out.rank = coll_->rank();
  out.num_trainers = coll_->world();
  TrainResult& r = out.result;
  r.graph_name = cluster_->config().graph_name;
  r.config = c_;
  r.num_classes = num_classes_;
  r.num_parameters = model_->num_parameters();
  for (int epoch = 0; epoch < c_.num_epochs; ++epoch) {
    EpochMetrics m;
    m.epoch = epoch;
    double allreduce_s = 0;
    DGLD_RETURN_IF_ERROR(train_epoch(epoch, m, allreduce_s));
    log_->info("Epoch {:05d} | Loss {:.4f} | Train Acc {:.4f} | Time {:.3f} s (sample {:.3f}, fetch {:.3f}, "
               "compute {:.3f}, allreduce {:.3f}) | {:.0f} seeds/s (all trainers)",
               epoch, m.loss, m.train_acc, m.time_s, m.sample_s, m.fetch_s, m.compute_s, allreduce_s, m.seeds_per_s);
    r.epochs.push_back(m);
    out.allreduce_s.push_back(allreduce_s);
    const bool last = epoch == c_.num_epochs - 1;
    if (last || (c_.eval_every > 0 && (epoch + 1) % c_.eval_every == 0)) {
      DGLD_ASSIGN_OR_RETURN(EvalMetrics e, evaluate(epoch));
      log_->info("Epoch {:05d} | Val Acc {:.4f} | Test Acc {:.4f} | eval {:.3f} s", epoch, e.val_acc, e.test_acc,
                 e.time_s);
      r.val_acc = e.val_acc;
      r.test_acc = e.test_acc;
      r.evals.push_back(e);
    }
  }
  r.total_time_s = seconds_since(t_start);
  // Everyone is done with the servers before rank 0 may shut them down.
  DGLD_RETURN_IF_ERROR(cluster_->barrier("dgld-train-end", o_.collective_timeout).with_context("end-of-training barrier"));
  loader_.reset();
  eval_builder_.reset();
  const bool shutdown = out.rank == 0 && o_.shutdown_servers;
  if (!shutdown) DGLD_RETURN_IF_ERROR(cluster_->leave().with_context("leaving the cluster"));
  // The other trainers have left (their Leave answered) before rank 0 stops the
  // servers, so no Leave races the shutdown.
  auto left = torch::ones({1}, torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(left, c10d::ReduceOp::SUM, "waiting for every trainer to leave"));
  if (shutdown) {
    // Every server is asked even when one fails. A server that closes the
    // connection before its ShutdownReply arrives is stopping as asked (the
    // graph-server's reply can lose the race with its own exit), so `closed`
    // is only a warning.
    Status st = cluster_->shutdown_servers("training finished");
    if (!st.is_ok() && st.code() == StatusCode::closed) {
      log_->warn("shutting down the servers: {} (taken as stopped)", st.message());
    } else {
      DGLD_RETURN_IF_ERROR(st.with_context("shutting down the servers"));
    }
  }
  return out;
}

}  // namespace

Result<DistTrainResult> train_distributed(const DistTrainOptions& options, const TrainConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_train_config(config));
  if (config.row_normalize) return invalid_argument("--row-normalize is only supported with --standalone");
  if (options.ip_config.empty()) return invalid_argument("--ip-config is required for distributed training");
  if (options.part_config.empty()) return invalid_argument("--part-config is required");
  try {
    DistRun run(options, config);
    return run.run();
  } catch (const c10::Error& e) {
    return internal_error(std::string("distributed training failed in LibTorch: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return internal_error(std::string("distributed training failed: ") + e.what());
  }
}

std::string dist_metrics_json(const DistTrainResult& result) {
  auto j = nlohmann::json::parse(metrics_json(result.result));
  j["num_trainers"] = result.num_trainers;
  j["rank"] = result.rank;
  auto& epochs = j["epochs"];
  for (size_t i = 0; i < epochs.size() && i < result.allreduce_s.size(); ++i) {
    epochs[i]["allreduce_s"] = result.allreduce_s[i];
  }
  j["evaluation"] = "node_split of val/test masks, full-neighbour sampling, counts summed over trainers";
  return j.dump(2) + "\n";
}

}  // namespace dgld::trainer
