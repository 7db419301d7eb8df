#pragma once
// trainer-host's command line: DGL's GraphSAGE example flags (underscore
// spellings accepted) into a TrainConfig, plus the mode and outputs.

#include <string>

#include "common/logging.h"
#include "daemons/trainer_host/dist_trainer.h"
#include "daemons/trainer_host/training.h"

namespace dgld::trainer {

struct TrainerHostOptions {
  bool standalone = false;   // one partition in one process, no servers
  std::string part_config;   // <graph_name>.json (env DGL_CONF_PATH)
  std::string metrics_out;   // metrics JSON path; empty: none
  int metrics_port = 0;      // Prometheus endpoint on this port + $LOCAL_RANK; 0: none (live_metrics.h)
  // Distributed mode (without --standalone); part_config is copied in.
  // Settings come from flags or, as under DGL's launcher, from the
  // environment: DGL_IP_CONFIG, DGL_CONF_PATH, DGL_NUM_SERVER,
  // DGL_NUM_SAMPLER, and dgl-launch's DGLD_MACHINE_ID, DGLD_TRAINER_RANK,
  // DGLD_NUM_TRAINERS, DGLD_JOB_ID.
  DistTrainOptions dist;
  TrainConfig train;
  LogOptions log;
};

struct ParsedTrainerHostOptions {
  TrainerHostOptions options;
  int exit_code = -1;  // >= 0: exit with it (help, version, or a usage error already printed)
};

// Parses and validates (validate_train_config, --part-config present). Usage
// errors are printed to stderr and give exit code 2.
ParsedTrainerHostOptions parse_trainer_host_options(int argc, const char* const argv[]);

}  // namespace dgld::trainer
