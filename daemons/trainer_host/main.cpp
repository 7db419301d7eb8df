// trainer-host: trains a GNN with LibTorch (docs/architecture.md): DGL's
// standalone mode (--standalone: one partition, one process, no servers) or a
// trainer of a distributed job (data-parallel over the graph-servers).
#include <csignal>
#include <iostream>

#include "common/file_util.h"
#include "common/logging.h"
#include "common/memory.h"
#include "daemons/trainer_host/dist_trainer.h"
#include "daemons/trainer_host/live_metrics.h"
#include "daemons/trainer_host/local_trainer.h"
#include "daemons/trainer_host/options.h"

using namespace dgld;

int main(int argc, char** argv) {
  // A peer that died is an error on its connection (Gloo's, a server's), not
  // a SIGPIPE that ends this trainer without a word (exit 141, seen when the
  // other trainer was killed mid-allreduce).
  std::signal(SIGPIPE, SIG_IGN);
  reexec_with_passive_openmp(argv);
  tune_allocator_for_large_buffers();
  auto parsed = trainer::parse_trainer_host_options(argc, argv);
  if (parsed.exit_code >= 0) return parsed.exit_code;
  const auto& o = parsed.options;
  if (Status st = setup_logging(o.log); !st.is_ok()) {
    std::cerr << "trainer-host: " << st.message() << "\n";
    return 2;
  }
  auto log = logger("trainer");
  std::unique_ptr<trainer::MetricsEndpoint> metrics;
  if (o.metrics_port > 0) {
    auto e = o.standalone ? trainer::open_metrics_endpoint(o.metrics_port, "", 0, 0)
                          : trainer::open_metrics_endpoint(o.metrics_port, o.dist.ip_config, o.dist.machine_id,
                                                           o.dist.rank);
    if (!e.is_ok()) {
      log->error("{}", e.status().message());
      return 2;
    }
    metrics = std::move(e).value();
  }
  auto result = o.standalone ? trainer::train_standalone(o.part_config, o.train)
                             : trainer::train_distributed(o.dist, o.train);
  if (!result.is_ok()) {
    log->error("{}", result.status().message());
    return 1;
  }
  log->info("done (rank {} of {}): val acc {:.4f}, test acc {:.4f}, {:.1f} s", result->rank, result->num_trainers,
            result->val_acc, result->test_acc, result->total_time_s);
  if (result->rank == 0 && !o.metrics_out.empty()) {
    if (Status st = write_file_atomic(o.metrics_out, trainer::metrics_json(*result)); !st.is_ok()) {
      log->error("writing --metrics-out: {}", st.message());
      return 1;
    }
  }
  return 0;
}
