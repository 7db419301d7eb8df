#include "daemons/trainer_host/options.h"

#include <cstdlib>
#include <iostream>

#include "common/cli.h"

namespace dgld::trainer {
namespace po = boost::program_options;

ParsedTrainerHostOptions parse_trainer_host_options(int argc, const char* const argv[]) {
  ParsedTrainerHostOptions out;
  TrainerHostOptions& o = out.options;
  TrainConfig& t = o.train;
  o.log.program = "trainer-host";
  po::options_description desc("trainer-host options");
  desc.add_options()
      ("standalone", po::bool_switch(&o.standalone), "train on one partition in this process, no servers")
      ("part-config", po::value(&o.part_config), "partition config JSON (env DGL_CONF_PATH)")
      ("metrics-out", po::value(&o.metrics_out), "write per-epoch metrics and accuracy as JSON here")
      ("num-epochs", po::value(&t.num_epochs)->default_value(t.num_epochs), "training epochs")
      ("num-hidden", po::value(&t.num_hidden)->default_value(t.num_hidden), "hidden units")
      ("num-layers", po::value(&t.num_layers)->default_value(t.num_layers), "GNN layers (= number of fanouts)")
      ("fan-out", po::value(&t.fan_out)->default_value(t.fan_out), "fanout per layer, input layer first; -1 all")
      ("batch-size", po::value(&t.batch_size)->default_value(t.batch_size), "seeds per training batch")
      ("batch-size-eval", po::value(&t.batch_size_eval)->default_value(t.batch_size_eval),
       "nodes per chunk of layer-wise inference")
      ("lr", po::value(&t.lr)->default_value(t.lr), "Adam learning rate")
      ("dropout", po::value(&t.dropout)->default_value(t.dropout), "dropout between layers")
      ("eval-every", po::value(&t.eval_every)->default_value(t.eval_every), "evaluate every N epochs (0: at the end)")
      ("log-every", po::value(&t.log_every)->default_value(t.log_every), "log every N steps (0: never)")
      ("model", po::value(&t.model)->default_value(t.model), "sage | gcn | gat")
      ("seed", po::value(&t.seed)->default_value(t.seed), "random seed (weights, shuffling, sampling, dropout)")
      ("num-threads", po::value(&t.num_threads)->default_value(t.num_threads),
       "LibTorch threads; 0: OMP_NUM_THREADS or all cores")
      ("num-heads", po::value(&t.num_heads)->default_value(t.num_heads), "GAT attention heads")
      ("weight-decay", po::value(&t.weight_decay)->default_value(t.weight_decay), "Adam weight decay")
      ("row-normalize", po::bool_switch(&t.row_normalize), "divide each feature row by its sum")
      ("replace", po::bool_switch(&t.replace), "sample neighbours with replacement");
  add_log_options(desc, o.log);
  po::variables_map vm;
  switch (parse_command_line(argc, argv, "trainer-host", "--standalone --part-config FILE [options]", desc, vm)) {
    case CliOutcome::exit_ok: out.exit_code = 0; return out;
    case CliOutcome::exit_error: out.exit_code = 2; return out;
    case CliOutcome::run: break;
  }
  auto fail = [&](const std::string& message) {
    std::cerr << "trainer-host: " << message << "\n";
    out.exit_code = 2;
    return out;
  };
  if (o.part_config.empty()) {
    if (const char* env = std::getenv("DGL_CONF_PATH"); env && *env) o.part_config = env;
  }
  if (!o.standalone) {
    return fail("distributed training is not available yet; run with --standalone and a 1-partition --part-config");
  }
  if (o.part_config.empty()) return fail("--part-config (or DGL_CONF_PATH) is required");
  if (Status st = validate_train_config(t); !st.is_ok()) return fail(st.message());
  o.log.role = "trainer/0";
  return out;
}

}  // namespace dgld::trainer
