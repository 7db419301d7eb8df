#include "daemons/trainer_host/epoch_accounting.h"

#include <fmt/format.h>

#include "daemons/trainer_host/training_loop.h"

namespace dgld::trainer {

EpochAccounting::EpochAccounting(TrainingBackend& backend) : b_(backend) {}

void EpochAccounting::start() {
  c_ = EpochCluster{};
  c_.num_machines = b_.num_machines();
  c_.link_bytes.assign(static_cast<size_t>(c_.num_machines) * static_cast<size_t>(c_.num_machines), 0);
  own_batches_ = {};
  own_flops_ = 0;
  own_feature_bytes_ = 0;
  own_start_ = b_.own_traffic();
}

void EpochAccounting::add_link(int from, int to, int64_t bytes) {
  const int n = c_.num_machines;
  if (from < 0 || to < 0 || from >= n || to >= n || from == to) return;
  c_.link_bytes[static_cast<size_t>(from) * static_cast<size_t>(n) + static_cast<size_t>(to)] += bytes;
}

void EpochAccounting::add_batch(const client::Batch& batch, double flops, int64_t feature_bytes) {
  const int me = b_.machine_id();
  own_flops_ += flops;
  own_feature_bytes_ += feature_bytes;
  c_.batches += 1;
  c_.seeds += static_cast<int64_t>(batch.mini_batch.seeds.size());
  c_.input_rows += static_cast<int64_t>(batch.mini_batch.input_nodes.size());
  c_.remote_rows += batch.traffic.rows.remote;
  c_.cached_rows += batch.traffic.rows.cached;
  for (const Block& b : batch.mini_batch.blocks) c_.sampled_edges += b.num_edges();
  c_.model_flops += flops;
  for (const net::PeerCost& p : batch.traffic.calls.peers) {
    if (p.machine == me || p.machine == net::kUnknownMachine) continue;
    c_.round_trips += p.calls;
    c_.batch_bytes += p.bytes_out + p.bytes_in;
    if (batch.worker >= 0) {  // a worker's RPCs: in no counter of this process
      add_link(me, p.machine, p.bytes_out);
      add_link(p.machine, me, p.bytes_in);
    }
  }
  if (batch.worker < 0) own_batches_.merge(batch.traffic.calls);
}

void EpochAccounting::add_allreduce(int64_t bytes) {
  // Gloo's ring: each rank sends 2 (n-1)/n of the buffer to the next rank.
  const int n = b_.world_size();
  if (n < 2) return;
  const int r = b_.rank();
  const int from = b_.machine_of_rank(r), to = b_.machine_of_rank((r + 1) % n);
  if (from == to) return;
  const int64_t sent = 2 * static_cast<int64_t>(n - 1) * bytes / n;
  c_.allreduce_bytes += sent;
  add_link(from, to, sent);
}

Status EpochAccounting::finish(EpochMetrics& m) {
  const int me = b_.machine_id();
  const net::TrafficSnapshot delta = net::traffic_delta(b_.own_traffic(), own_start_);
  int64_t own = 0;
  for (const auto& [machine, kinds] : delta) {
    if (machine == me || machine == net::kUnknownMachine) continue;
    const net::KindTraffic t = net::peer_total(kinds);
    own += static_cast<int64_t>(t.bytes_out + t.bytes_in);
    add_link(me, machine, static_cast<int64_t>(t.bytes_out));
    add_link(machine, me, static_cast<int64_t>(t.bytes_in));
  }
  int64_t own_batch_bytes = 0;
  for (const net::PeerCost& p : own_batches_.peers) {
    if (p.machine != me && p.machine != net::kUnknownMachine) own_batch_bytes += p.bytes_out + p.bytes_in;
  }
  c_.other_bytes = std::max<int64_t>(0, own - own_batch_bytes);
  c_.sample_cpu_s = m.sample_cpu_s;
  c_.fetch_cpu_s = m.fetch_cpu_s;
  c_.compute_cpu_s = m.compute_cpu_s;
  c_.allreduce_cpu_s = m.allreduce_cpu_s;
  c_.process_cpu_s = m.process_cpu_s;
  m.model_flops = own_flops_;
  m.feature_bytes = own_feature_bytes_;

  // One sum over the trainers: float64 is exact for these counts (< 2^53).
  std::vector<double> v = {static_cast<double>(c_.seeds),         static_cast<double>(c_.batches),
                           static_cast<double>(c_.round_trips),   static_cast<double>(c_.input_rows),
                           static_cast<double>(c_.remote_rows),   static_cast<double>(c_.cached_rows),
                           static_cast<double>(c_.sampled_edges), c_.model_flops,
                           static_cast<double>(c_.batch_bytes),   static_cast<double>(c_.other_bytes),
                           static_cast<double>(c_.allreduce_bytes), c_.sample_cpu_s,
                           c_.fetch_cpu_s,                        c_.compute_cpu_s,
                           c_.allreduce_cpu_s,                    c_.process_cpu_s};
  const size_t scalars = v.size();
  for (int64_t b : c_.link_bytes) v.push_back(static_cast<double>(b));
  if (b_.world_size() > 1) {
    auto t = torch::tensor(v, torch::kFloat64);
    DGLD_RETURN_IF_ERROR(b_.allreduce(t, Reduce::sum, "summing the epoch's traffic"));
    auto a = t.accessor<double, 1>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = a[static_cast<int64_t>(i)];
  }
  EpochCluster& o = m.cluster;
  o = c_;
  size_t i = 0;
  auto next = [&] { return v[i++]; };
  auto next_int = [&] { return static_cast<int64_t>(v[i++] + 0.5); };
  o.seeds = next_int();
  o.batches = next_int();
  o.round_trips = next_int();
  o.input_rows = next_int();
  o.remote_rows = next_int();
  o.cached_rows = next_int();
  o.sampled_edges = next_int();
  o.model_flops = next();
  o.batch_bytes = next_int();
  o.other_bytes = next_int();
  o.allreduce_bytes = next_int();
  o.sample_cpu_s = next();
  o.fetch_cpu_s = next();
  o.compute_cpu_s = next();
  o.allreduce_cpu_s = next();
  o.process_cpu_s = next();
  for (size_t k = 0; k < o.link_bytes.size(); ++k) o.link_bytes[k] = static_cast<int64_t>(v[scalars + k] + 0.5);
  return Status::ok();
}

std::vector<std::string> epoch_log_lines(const EpochMetrics& m) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format(
      "Epoch {:05d} | Loss {:.4f} | Train Acc {:.4f} | Time {:.3f} s (sample {:.3f}, fetch {:.3f}, compute {:.3f}, "
      "allreduce {:.3f}, wait {:.3f}) | {:.0f} seeds/s | CPU {:.3f} s (sample {:.3f}, fetch {:.3f}, compute {:.3f}, "
      "allreduce {:.3f})",
      m.epoch, m.loss, m.train_acc, m.time_s, m.sample_s, m.fetch_s, m.compute_s, m.allreduce_s, m.wait_s,
      m.seeds_per_s, m.process_cpu_s, m.sample_cpu_s, m.fetch_cpu_s, m.compute_cpu_s, m.allreduce_cpu_s));
  if (m.model_flops > 0) {
    std::string peak = m.gemm_peak_gflops > 0 ? fmt::format(", {:.0f} % of the GEMM peak ({:.1f} GFLOP/s)",
                                                            100 * m.peak_fraction(), m.gemm_peak_gflops)
                                              : std::string();
    lines.push_back(fmt::format("Epoch {:05d} | model step {:.1f} GFLOP at {:.1f} GFLOP/s{} | input features {} at "
                                "{:.2f} GB/s of fetch time",
                                m.epoch, m.model_flops / 1e9, m.model_gflops(), peak,
                                human_bytes(static_cast<double>(m.feature_bytes)), m.gather_gb_per_s()));
  }
  if (const EpochCluster& k = m.cluster; k.num_machines > 1) {
    lines.push_back(fmt::format(
        "Epoch {:05d} | traffic between machines {} (batches {}, allreduce {}, other {}) | {:.0f} B/seed | remote "
        "feature rows {:.1f} % | {:.1f} round trips/batch",
        m.epoch, human_bytes(static_cast<double>(k.network_bytes())), human_bytes(static_cast<double>(k.batch_bytes)),
        human_bytes(static_cast<double>(k.allreduce_bytes)), human_bytes(static_cast<double>(k.other_bytes)),
        k.seeds ? static_cast<double>(k.network_bytes()) / static_cast<double>(k.seeds) : 0.0,
        k.input_rows ? 100.0 * static_cast<double>(k.remote_rows) / static_cast<double>(k.input_rows) : 0.0,
        k.batches ? static_cast<double>(k.round_trips) / static_cast<double>(k.batches) : 0.0));
  }
  return lines;
}

std::string human_bytes(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.1f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace dgld::trainer
