#include "daemons/trainer_host/options.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "common/cli.h"
#include "common/job_env.h"

namespace dgld::trainer {
namespace po = boost::program_options;

ParsedTrainerHostOptions parse_trainer_host_options(int argc, const char* const argv[]) {
  ParsedTrainerHostOptions out;
  TrainerHostOptions& o = out.options;
  TrainConfig& t = o.train;
  std::string learnable;
  bool no_progress = false;
  o.log.program = "trainer-host";
  po::options_description desc("trainer-host options");
  desc.add_options()
      ("standalone", po::bool_switch(&o.standalone), "train on one partition in this process, no servers")
      ("part-config", po::value(&o.part_config), "partition config JSON (env DGL_CONF_PATH)")
      ("metrics-out", po::value(&o.metrics_out), "write per-epoch metrics and accuracy as JSON here")
      ("metrics-port", po::value(&o.metrics_port)->default_value(o.metrics_port),
       "while it runs, serve epoch, step, loss, throughput, the last epoch's figures and memory in Prometheus' text "
       "format at http://<this machine's ip_config address, or 127.0.0.1>:N+LOCAL_RANK/metrics; 0: off")
      ("num-epochs", po::value(&t.num_epochs)->default_value(t.num_epochs), "training epochs")
      ("num-hidden", po::value(&t.num_hidden)->default_value(t.num_hidden), "hidden units")
      ("num-layers", po::value(&t.num_layers)->default_value(t.num_layers), "GNN layers (= number of fanouts)")
      ("fan-out", po::value(&t.fan_out)->default_value(t.fan_out), "fanout per layer, input layer first; -1 all")
      ("batch-size", po::value(&t.batch_size)->default_value(t.batch_size), "seeds per training batch")
      ("eval-fan-out", po::value(&t.eval_fan_out)->default_value(t.eval_fan_out),
       "neighbours per node (per edge type on a heterogeneous graph) in layer-wise evaluation; -1: all "
       "(DGL's inference), 0: none (with --fan-out 0,0: a model of each node's own features)")
      ("batch-size-eval", po::value(&t.batch_size_eval)->default_value(t.batch_size_eval),
       "the most nodes per chunk of layer-wise inference")
      ("eval-memory-mb", po::value(&t.eval_memory_mb)->default_value(t.eval_memory_mb),
       "the working set of a chunk of layer-wise inference (its sampled edges, input and output rows), MiB: "
       "chunks are cut to fit it")
      ("lr", po::value(&t.lr)->default_value(t.lr), "Adam learning rate")
      ("dropout", po::value(&t.dropout)->default_value(t.dropout), "dropout between layers")
      ("eval-every", po::value(&t.eval_every)->default_value(t.eval_every), "evaluate every N epochs and at the end (0: at the end only, -1: never)")
      ("log-every", po::value(&t.log_every)->default_value(t.log_every), "log every N steps (0: never)")
      ("model", po::value(&t.model)->default_value(t.model),
       "built-in model (python/dgld/models, docs/models.md): sage | gcn | gat | rgcn (heterogeneous graphs, "
       "docs/heterogeneous.md), or another kind registered there")
      ("num-bases", po::value(&t.num_bases)->default_value(t.num_bases),
       "rgcn: basis matrices shared by the relations; 0: as many as relations")
      ("target-ntype", po::value(&t.target_ntype),
       "heterogeneous graphs: the labelled node type to classify (default: the partition config's target_ntype)")
      ("model-file", po::value(&t.model_file),
       "train (or with --infer, run) this TorchScript model instead of a built-in one (docs/models.md)")
      ("save-model", po::value(&t.save_model), "write the trained model here as TorchScript (torch.jit.load, "
       "--model-file)")
      ("infer", po::bool_switch(&t.infer), "no training: layer-wise inference of --model-file over every node, "
       "outputs in --output-dir")
      ("output-dir", po::value(&t.output_dir), "write every node's output of the last layer here (logits.npy + "
       ".json, by original node id); after training, or with --infer")
      ("embeddings-layer", po::value(&t.embeddings_layer)->default_value(t.embeddings_layer),
       "also write layer K's output (embeddings-K.npy); -1: none")
      ("task", po::value(&t.task)->default_value(t.task), "node (node classification) | link (link prediction "
       "over a dgl-partition --link-split)")
      ("scorer", po::value(&t.scorer)->default_value(t.scorer), "link: score of an edge from its ends' embeddings: "
       "dot | mlp")
      ("num-negatives", po::value(&t.num_negatives)->default_value(t.num_negatives),
       "link: negative destinations per training edge")
      ("neg-sampler", po::value(&t.neg_sampler)->default_value(t.neg_sampler),
       "link: uniform (over every node) | local-uniform (over this machine's nodes)")
      ("exclude", po::value(&t.exclude)->default_value(t.exclude),
       "link: the batch's edges left out of its blocks: reverse_id (them and their reverse edges) | self (them "
       "alone) | none")
      ("keep-best", po::value(&t.keep_best)->default_value(t.keep_best),
       "model selection: keep the weights of the evaluation with the best validation metric and report its "
       "figures: off (the last) | acc (--task node) | mrr | auc (--task link)")
      ("neg-exclude-positives", po::bool_switch(&t.neg_exclude_positives),
       "link: redraw a negative that is the edge itself, another positive of the batch or a held-out edge")
      ("seed", po::value(&t.seed)->default_value(t.seed), "random seed (weights, shuffling, sampling, dropout)")
      ("num-threads", po::value(&t.num_threads)->default_value(t.num_threads),
       "LibTorch (and OpenBLAS) threads of the model step; 0: OMP_NUM_THREADS or all cores. A distributed "
       "trainer also runs 2 sampling threads (or its --num-samplers workers) at nice 10: they prefetch batches "
       "on the cores the model step leaves idle and never slow it")
      ("num-heads", po::value(&t.num_heads)->default_value(t.num_heads), "GAT attention heads")
      ("kernels", po::value(&t.kernels)->default_value(t.kernels),
       "message passing: fused (one pass over each block's CSR) | reference (index_select + index_add_)")
      ("weight-decay", po::value(&t.weight_decay)->default_value(t.weight_decay), "Adam weight decay")
      ("row-normalize", po::bool_switch(&t.row_normalize), "divide each feature row by its sum")
      ("replace", po::bool_switch(&t.replace), "sample neighbours with replacement")
      ("sample-prob", po::value(&t.sample_prob),
       "float32 edge tensor of sampling weights: neighbours are drawn in proportion (DGL's prob=); default uniform")
      ("feature", po::value(&t.feature)->default_value(t.feature), "float32 node tensor of input features")
      ("label", po::value(&t.label)->default_value(t.label), "int64 node tensor of labels")
      ("learnable-features", po::value(&learnable)->default_value("off"),
       "a trained node embedding (DistEmbedding): off | replace (instead of the features) | concat")
      ("embed-dim", po::value(&t.embed_dim)->default_value(t.embed_dim), "learnable embedding size")
      ("sparse-optimizer", po::value(&t.sparse_optimizer)->default_value(t.sparse_optimizer),
       "optimiser of the embedding: adagrad (SparseAdagrad) | adam (SparseAdam)")
      ("sparse-lr", po::value(&t.sparse_lr)->default_value(t.sparse_lr), "learning rate of the embedding")
      ("checkpoint-dir", po::value(&t.checkpoint_dir), "write checkpoints here (one directory per trainer rank): model, optimiser, "
       "RNG, position, learnable embedding rows; with --task link the scorer too, with --model rgcn the node "
       "types' projections and embeddings (refused with --keep-best)")
      ("checkpoint-every", po::value(&t.checkpoint_every)->default_value(t.checkpoint_every),
       "with --checkpoint-dir: a checkpoint after every N-th epoch (and the last)")
      ("profile-steps", po::value(&t.profile_steps)->default_value(t.profile_steps),
       "profile this many model steps of the second epoch (the first when there is one) by operator: a table in "
       "the log and metrics.json's \"profile\" (docs/performance.md)")
      ("measure-peak", po::value(&t.measure_peak)->default_value(t.measure_peak),
       "measure the GEMM rate of the model's shapes on the first batch (about 0.2 s): each epoch then reports its "
       "model step's share of it")
      ("checkpoint-every-steps", po::value(&t.checkpoint_every_steps)->default_value(t.checkpoint_every_steps),
       "with --checkpoint-dir: also a checkpoint after every N-th step (0: none); a resumed run continues "
       "from that step")
      ("checkpoint-replicas", po::value(&t.checkpoint_replicas)->default_value(t.checkpoint_replicas),
       "with --checkpoint-dir: copy each trainer's committed checkpoint to a trainer on each of the next N machines "
       "(ip_config order), into <checkpoint-dir>/replica/ there, so that a machine lost with its disk is resumed "
       "from its copies (0: none; docs/reliability.md)")
      ("resume", po::bool_switch(&t.resume),
       "continue from the newest checkpoint in --checkpoint-dir every trainer holds intact (also when dgl-launch "
       "--max-restarts starts the job again: env DGLD_RESTART > 0)")
      ("no-progress", po::bool_switch(&no_progress), "no progress bar, even on a terminal");
  DistTrainOptions& d = o.dist;
  std::string sampler_endpoints;
  int collective_timeout_s = 60;
  desc.add_options()
      ("ip-config", po::value(&d.ip_config), "distributed: ip_config.txt (one machine per line)")
      ("machine-id", po::value(&d.machine_id)->default_value(d.machine_id),
       "distributed: this machine's ip_config line (0-based); -1: detect from local addresses")
      ("num-servers", po::value(&d.num_servers)->default_value(d.num_servers), "distributed: graph-servers per machine")
      ("rank", po::value(&d.rank)->default_value(d.rank), "distributed: requested trainer rank; -1: coordinator's choice")
      ("num-trainers", po::value(&d.num_trainers)->default_value(d.num_trainers),
       "distributed: trainers in the job (0: the coordinator's count)")
      ("num-samplers", po::value(&d.num_samplers)->default_value(d.num_samplers),
       "distributed: sampler-workers this trainer starts (0: it samples itself; env DGL_NUM_SAMPLER)")
      ("sampler-endpoints", po::value(&sampler_endpoints),
       "distributed: host:port,... of sampler-workers already running (instead of starting them)")
      ("sampler-worker", po::value(&d.sampler_worker_path), "distributed: sampler-worker executable (default: next to "
       "trainer-host)")
      ("job-id", po::value(&d.job_id), "distributed: shared-memory job id (env DGLD_JOB_ID; default: graph name and port)")
      ("feature-cache-mb", po::value(&d.feature_cache_mb)->default_value(d.feature_cache_mb),
       "distributed: MiB of other machines' feature rows kept by this trainer and each sampler-worker (the most "
       "connected halo nodes); 0: none")
      ("prefetch-mb", po::value(&d.prefetch_mb)->default_value(d.prefetch_mb),
       "distributed: MiB of mini-batches made ahead of training, at most (at least one batch is always "
       "made; 0: no bound, up to --prefetch batches)")
      ("prefetch", po::value(&d.prefetch)->default_value(d.prefetch),
       "distributed: mini-batches in flight or ready ahead of training, at most")
      ("secret-file", po::value(&d.secret_file),
       "distributed: file with the job's shared secret, mode 0600 (env DGLD_SECRET_FILE)")
      ("rendezvous-port", po::value(&d.rendezvous_port)->default_value(d.rendezvous_port),
       "distributed: the trainers' rendezvous store port on machine 0 (0: its base port + 900)")
      ("collective-timeout-s", po::value(&collective_timeout_s)->default_value(collective_timeout_s),
       "distributed: timeout of the rendezvous and of every allreduce")
      ("shutdown-servers", po::bool_switch(&d.shutdown_servers), "distributed: rank 0 stops the graph-servers at the end");
  add_log_options(desc, o.log);
  po::variables_map vm;
  switch (parse_command_line(argc, argv, "trainer-host", "(--standalone | --ip-config FILE) --part-config FILE [options]", desc, vm)) {
    case CliOutcome::exit_ok: out.exit_code = 0; return out;
    case CliOutcome::exit_error: out.exit_code = 2; return out;
    case CliOutcome::run: break;
  }
  auto fail = [&](const std::string& message) {
    std::cerr << "trainer-host: " << message << "\n";
    out.exit_code = 2;
    return out;
  };
  // DGL's launcher passes settings as environment variables; dgl-launch adds
  // the machine, the rank and the job's trainer count.
  std::string env_error;
  if (!flag_from_env(vm, "part-config", job_env::kConfPath, o.part_config, env_error) ||
      !flag_from_env(vm, "ip-config", job_env::kIpConfig, d.ip_config, env_error) ||
      !flag_from_env(vm, "num-servers", job_env::kNumServer, d.num_servers, env_error) ||
      !flag_from_env(vm, "num-samplers", job_env::kNumSampler, d.num_samplers, env_error) ||
      !flag_from_env(vm, "machine-id", job_env::kMachineId, d.machine_id, env_error) ||
      !flag_from_env(vm, "rank", job_env::kTrainerRank, d.rank, env_error) ||
      !flag_from_env(vm, "num-trainers", job_env::kNumTrainers, d.num_trainers, env_error) ||
      !flag_from_env(vm, "job-id", job_env::kJobId, d.job_id, env_error)) {
    return fail(env_error);
  }
  // Started again by dgl-launch --max-restarts: continue from the checkpoints.
  if (job_env::restart_count() > 0 && !t.checkpoint_dir.empty()) t.resume = true;
  auto lf = parse_learnable_features(learnable);
  if (!lf.is_ok()) return fail(lf.status().message());
  t.learnable_features = *lf;
  t.progress = !no_progress;
  if (o.metrics_port < 0 || o.metrics_port > 65535) return fail("--metrics-port must be a port, or 0 for none");
  if (o.part_config.empty()) return fail("--part-config (or DGL_CONF_PATH) is required");
  if (Status st = validate_train_config(t); !st.is_ok()) return fail(st.message());
  if (o.standalone) {
    o.log.role = "trainer/0";
    return out;
  }
  if (d.ip_config.empty()) {
    return fail("--ip-config (or DGL_IP_CONFIG) is required without --standalone (distributed training)");
  }
  if (d.num_servers < 1) return fail("--num-servers must be >= 1");
  if (d.num_samplers < 0) return fail("--num-samplers must be >= 0");
  if (d.feature_cache_mb < 0) return fail("--feature-cache-mb must be >= 0");
  if (d.prefetch_mb < 0) return fail("--prefetch-mb must be >= 0");
  if (d.prefetch < 1) return fail("--prefetch must be >= 1");
  if (collective_timeout_s < 1) return fail("--collective-timeout-s must be >= 1");
  d.collective_timeout = std::chrono::seconds(collective_timeout_s);
  d.part_config = o.part_config;
  size_t pos = 0;
  while (pos < sampler_endpoints.size()) {
    const size_t comma = sampler_endpoints.find(',', pos);
    std::string item = sampler_endpoints.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) {
      if (item.find(':') == std::string::npos) return fail("--sampler-endpoints: '" + item + "' is not host:port");
      d.sampler_endpoints.push_back(item);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (!d.sampler_endpoints.empty() && vm.count("num-samplers") && !vm["num-samplers"].defaulted() &&
      static_cast<size_t>(d.num_samplers) != d.sampler_endpoints.size()) {
    return fail("--num-samplers " + std::to_string(d.num_samplers) + " but --sampler-endpoints gives " +
                std::to_string(d.sampler_endpoints.size()) + " endpoints");
  }
  d.log_level = o.log.level;
  o.log.role = d.rank >= 0 ? "trainer/" + std::to_string(d.rank) : "trainer";
  return out;
}

}  // namespace dgld::trainer
