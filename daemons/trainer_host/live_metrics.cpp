#include "daemons/trainer_host/live_metrics.h"

#include <chrono>
#include <cstdlib>

#include "common/ip_config.h"
#include "common/logging.h"
#include "common/net/io_threads.h"
#include "common/net/metrics_http.h"
#include "common/process_memory.h"
#include "common/prometheus.h"

namespace dgld::trainer {

using nlohmann::json;

namespace {
const auto kStarted = std::chrono::steady_clock::now();
}

LiveMetrics& LiveMetrics::get() {
  static LiveMetrics m;
  return m;
}

void LiveMetrics::started(const TrainResult& r, int machine_id, int64_t steps_per_epoch) {
  std::lock_guard lock(mu_);
  machine_ = machine_id;
  rank_ = r.rank;
  j_["graph_name"] = r.graph_name;
  j_["model"] = r.config.model;
  j_["num_trainers"] = r.num_trainers;
  j_["steps_per_epoch"] = steps_per_epoch;
  j_["training"] = true;
}

void LiveMetrics::step(int epoch, int64_t steps_done, double loss, double seeds_per_s) {
  std::lock_guard lock(mu_);
  j_["epoch"] = epoch;
  j_["step"] = steps_done;
  j_["loss"] = loss;
  j_["seeds_per_s"] = seeds_per_s;
  j_["steps_done"] = j_.value("steps_done", int64_t{0}) + 1;
}

void LiveMetrics::epoch_done(const EpochMetrics& m) {
  std::lock_guard lock(mu_);
  j_["epochs_done"] = j_.value("epochs_done", 0) + 1;
  j_["last_epoch"] = {{"epoch", m.epoch},         {"loss", m.loss},         {"train_acc", m.train_acc},
                      {"time_s", m.time_s},       {"sample_s", m.sample_s}, {"fetch_s", m.fetch_s},
                      {"compute_s", m.compute_s}, {"allreduce_s", m.allreduce_s}, {"wait_s", m.wait_s},
                      {"seeds_per_s", m.seeds_per_s}, {"network_bytes", m.cluster.network_bytes()}};
}

void LiveMetrics::evaluated(const EvalMetrics& e) {
  std::lock_guard lock(mu_);
  j_["evals"] = j_.value("evals", 0) + 1;
  j_["val_acc"] = e.val_acc;
  j_["test_acc"] = e.test_acc;
}

void LiveMetrics::finished() {
  std::lock_guard lock(mu_);
  j_["training"] = false;
}

json LiveMetrics::snapshot() const {
  json j;
  {
    std::lock_guard lock(mu_);
    j = j_;
    j["rank"] = rank_;
    j["machine_id"] = machine_;
  }
  if (!j.contains("training")) j["training"] = false;
  j["uptime_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - kStarted).count();
  j["memory"] = to_json(read_process_memory());
  return j;
}

std::pair<std::string, std::string> LiveMetrics::identity() const {
  std::lock_guard lock(mu_);
  return {std::to_string(machine_), std::to_string(rank_)};
}

void LiveMetrics::set_identity(int machine_id, int rank) {
  std::lock_guard lock(mu_);
  machine_ = machine_id;
  rank_ = rank;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (http) http->stop();
  if (io) io->stop();
}

Result<std::unique_ptr<MetricsEndpoint>> open_metrics_endpoint(int port, const std::string& ip_config, int machine_id,
                                                               int rank) {
  std::string host = "127.0.0.1";
  if (!ip_config.empty() && machine_id >= 0) {
    DGLD_ASSIGN_OR_RETURN(auto machines, load_ip_config(ip_config));
    if (machine_id < static_cast<int>(machines.size())) host = machines[static_cast<size_t>(machine_id)].host;
  }
  int local = 0;
  if (const char* v = std::getenv("LOCAL_RANK"); v && *v) local = std::atoi(v);
  const int p = port + std::max(0, local);
  if (port < 1 || p > 65535) {
    return invalid_argument("--metrics-port " + std::to_string(port) + " (+ LOCAL_RANK " + std::to_string(local) +
                            ") is not a port");
  }
  LiveMetrics::get().set_identity(machine_id, rank);
  auto e = std::make_unique<MetricsEndpoint>();
  e->io = std::make_unique<net::IoThreads>(1);
  net::MetricsHttpOptions mo;
  mo.name = "trainer-host metrics";
  e->http = std::make_unique<net::MetricsHttpServer>(e->io->context(), [] {
    const auto& live = LiveMetrics::get();
    const auto [machine, rank] = live.identity();
    return prom::trainer_text(live.snapshot(), {{"machine", machine}, {"rank", rank}});
  }, mo);
  DGLD_RETURN_IF_ERROR(e->http->listen(host, static_cast<uint16_t>(p)));
  logger("trainer")->info("Prometheus metrics at http://{}:{}/metrics", host, e->http->port());
  return e;
}

}  // namespace dgld::trainer
