#pragma once
// What a trainer-host is doing right now, for its --metrics-port endpoint:
// the training loop reports each step, epoch and evaluation here (a lock and
// a few stores per step), and a scrape renders a snapshot of them in
// Prometheus' text format (common/prometheus.h, prom::trainer_text). One per
// process; it costs nothing worth measuring when no endpoint is open.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "daemons/trainer_host/training.h"

namespace dgld::net {
class IoThreads;
class MetricsHttpServer;
}  // namespace dgld::net

namespace dgld::trainer {

class LiveMetrics {
 public:
  static LiveMetrics& get();

  // The loop is set up: who this trainer is and what it trains.
  void started(const TrainResult& r, int machine_id, int64_t steps_per_epoch);
  // `steps_done` steps of `epoch` are done; the epoch's mean loss and seeds/s so far.
  void step(int epoch, int64_t steps_done, double loss, double seeds_per_s);
  void epoch_done(const EpochMetrics& m);
  void evaluated(const EvalMetrics& e);
  void finished();

  // Keys as prom::trainer_text reads them (metrics.json's names where it has them).
  nlohmann::json snapshot() const;
  // The labels of every sample: machine and rank (as known so far).
  std::pair<std::string, std::string> identity() const;
  void set_identity(int machine_id, int rank);

 private:
  mutable std::mutex mu_;
  nlohmann::json j_ = nlohmann::json::object();
  int machine_ = -1, rank_ = -1;
};

// The endpoint: its own io thread (trainer-host's connections are made
// inside the backends, later than the endpoint opens) and the HTTP server.
struct MetricsEndpoint {
  std::unique_ptr<net::IoThreads> io;
  std::unique_ptr<net::MetricsHttpServer> http;
  ~MetricsEndpoint();
};

// Opens GET /metrics on port + $LOCAL_RANK (dgl-launch's index of the trainer
// on its machine) of the machine's ip_config address (127.0.0.1 standalone,
// or when the machine is not known yet). An error names the address.
Result<std::unique_ptr<MetricsEndpoint>> open_metrics_endpoint(int port, const std::string& ip_config, int machine_id,
                                                               int rank);

}  // namespace dgld::trainer
