// Benchmark (not a test) of the model step on blocks of real mini-batches:
// forward + loss + backward of each built-in model with the fused kernels
// (common/ops/message_passing.h) against the same model, same weights, with
// the index_select + index_add_ reference, in alternating rounds of one run
// (scripts/bench/kernels.sh). Also a memory-bandwidth bound: the bytes a step
// must read at least once (every block's CSR and the input rows), at the
// memcpy bandwidth measured in the same run. And two of DGL's built-in
// message passings on each batch's input block, forward + backward, the
// fused g-SpMM / g-SDDMM ops (common/ops/gspmm.h) against index_select +
// index_add_: update_all(u_mul_e, sum) and apply_edges(u_dot_v).
//
// The batches are sampled in process from a 1-partition graph as trainer-host
// --standalone samples them (fanouts, batch size); every timed step gets
// fresh BlockGraphs, so building the transposed CSR is part of the time, as
// it is in training.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/memory.h"
#include "common/ops/gspmm.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "common/sampling/multi_layer_sampler.h"
#include "daemons/trainer_host/local_trainer.h"
#include "daemons/trainer_host/model_impl.h"
#include "daemons/trainer_host/training.h"
#include "daemons/trainer_host/training_loop.h"

using namespace dgld;
using namespace dgld::trainer;
using Clock = std::chrono::steady_clock;
using torch::Tensor;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Sampled {
  MiniBatch batch;
  std::vector<float> rows;
  std::vector<int64_t> labels;
};

// memcpy bandwidth of a buffer far larger than the caches, best of 5.
double memcpy_bytes_per_s() {
  const size_t n = size_t{256} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), n);
    best = std::max(best, static_cast<double>(n) / seconds_since(t0));
  }
  return best;
}

// Bytes a step must read at least once: each block's indptr and indices, and
// the input feature rows.
double step_bytes(const Sampled& s, int64_t feat_dim) {
  double bytes = static_cast<double>(s.batch.input_nodes.size() * static_cast<size_t>(feat_dim) * sizeof(float));
  for (const auto& b : s.batch.blocks) bytes += static_cast<double>((b.indptr.size() + b.indices.size()) * 8);
  return bytes;
}

struct StepTimes {
  double forward_s = 0, backward_s = 0;
};

StepTimes run_step(Model& model, const Sampled& s, int64_t feat_dim) {
  auto input = make_model_input(s.batch, s.rows, feat_dim);
  if (!input.is_ok()) throw std::runtime_error(input.status().to_string());
  const auto labels = ids_tensor(s.labels);
  for (auto& p : model.impl().parameters()) p.mutable_grad() = torch::Tensor();
  StepTimes t;
  auto t0 = Clock::now();
  auto logits = forward_checked(model, *input);
  if (!logits.is_ok()) throw std::runtime_error(logits.status().to_string());
  auto loss = torch::nn::functional::cross_entropy(*logits, labels);
  t.forward_s = seconds_since(t0);
  t0 = Clock::now();
  loss.backward();
  t.backward_s = seconds_since(t0);
  return t;
}

// Forward + backward of one message passing on each batch's input block,
// fused (gspmm / gsddmm) against the index_select + index_add_ reference, in
// alternating rounds (round 0 warms up). Each step gets a fresh BlockGraph
// (built untimed), so the fused op pays for the transposed CSR its backward
// walks and the reference for the edges' dst ids it scatters to.
struct MessageOpTimes {
  double fwd_s[2] = {0, 0}, step_s[2] = {0, 0};  // fused, reference
};

MessageOpTimes time_message_op(const std::vector<Sampled>& sampled, int64_t d, int rounds, bool spmm) {
  struct Input {
    Tensor x, y, grad;  // x: src rows; y: edge weights (spmm) or dst rows (sddmm); grad: of the output
  };
  std::vector<Input> inputs;
  for (const auto& s : sampled) {
    const Block& b = s.batch.blocks[0];
    Input in;
    in.x = rows_tensor(s.rows, static_cast<int64_t>(s.batch.input_nodes.size()), d).clone().requires_grad_(true);
    in.y = spmm ? torch::rand({b.num_edges(), 1}) : in.x.detach().narrow(0, 0, b.num_dst()).clone();
    in.y.requires_grad_(true);
    in.grad = spmm ? torch::randn({b.num_dst(), d}) : torch::randn({b.num_edges(), 1});
    inputs.push_back(std::move(in));
  }
  std::vector<double> fwd[2], step[2];
  for (int r = 0; r <= rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      double f = 0, total = 0;
      for (size_t i = 0; i < sampled.size(); ++i) {
        auto g = make_block_graph(sampled[i].batch.blocks[0]);
        if (!g.is_ok()) throw std::runtime_error(g.status().to_string());
        Input& in = inputs[i];
        in.x.mutable_grad().reset();
        in.y.mutable_grad().reset();
        const auto t0 = Clock::now();
        Tensor out;
        if (spmm) {
          out = (k == 0 ? ops::gspmm : ops::gspmm_reference)(*g, ops::BinaryOp::mul, ops::SpmmReduce::sum, in.x, in.y,
                                                             ops::Target::u, ops::Target::e);
        } else {
          out = (k == 0 ? ops::gsddmm : ops::gsddmm_reference)(*g, ops::BinaryOp::dot, in.x, in.y, ops::Target::u,
                                                               ops::Target::v);
        }
        f += seconds_since(t0);
        out.backward(in.grad);
        total += seconds_since(t0);
      }
      if (r == 0) continue;
      fwd[k].push_back(f / static_cast<double>(sampled.size()));
      step[k].push_back(total / static_cast<double>(sampled.size()));
    }
  }
  MessageOpTimes t;
  for (int k = 0; k < 2; ++k) {
    t.fwd_s[k] = median(fwd[k]);
    t.step_s[k] = median(step[k]);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_large_buffers();  // as trainer-host does
  namespace po = boost::program_options;
  std::string part_config, json_out, fan_out = "10,25", models = "sage,gcn,gat";
  int batches = 8, rounds = 5, threads = 1, num_hidden = 16, num_heads = 2;
  int64_t batch_size = 1000;
  std::string only;
  po::options_description desc("bench_kernels options");
  desc.add_options()("part-config", po::value(&part_config), "a 1-partition config (dgl-partition --num-parts 1)")(
      "batches", po::value(&batches)->default_value(batches), "mini-batches sampled and timed per round")(
      "rounds", po::value(&rounds)->default_value(rounds), "alternating rounds (fused, reference) per model")(
      "threads", po::value(&threads)->default_value(threads), "LibTorch threads")(
      "fan-out", po::value(&fan_out)->default_value(fan_out), "fanouts, input layer first")(
      "batch-size", po::value(&batch_size)->default_value(batch_size), "seeds per batch")(
      "num-hidden", po::value(&num_hidden)->default_value(num_hidden), "hidden units")(
      "num-heads", po::value(&num_heads)->default_value(num_heads), "GAT heads")(
      "models", po::value(&models)->default_value(models), "comma-separated: sage, gcn, gat")(
      "json", po::value(&json_out), "write the results here")(
      "only", po::value(&only), "run only 'fused' or 'reference' (for profiling; no ratios)");
  po::variables_map vm;
  switch (parse_command_line(argc, argv, "bench_kernels", "--part-config FILE [options]", desc, vm)) {
    case CliOutcome::exit_ok: return 0;
    case CliOutcome::exit_error: return 2;
    case CliOutcome::run: break;
  }
  if (part_config.empty()) {
    std::cerr << "bench_kernels: --part-config is required\n";
    return 2;
  }
  auto pc = load_part_config(part_config);
  if (!pc.is_ok()) {
    std::cerr << "bench_kernels: " << pc.status().to_string() << "\n";
    return 1;
  }
  auto part = open_partition(*pc, 0, false);
  if (!part.is_ok()) {
    std::cerr << "bench_kernels: " << part.status().to_string() << "\n";
    return 1;
  }
  auto graph = local_graph_from_partition(**part, pc->graph_name);
  auto fanouts = parse_fan_out(fan_out);
  if (!graph.is_ok() || !fanouts.is_ok()) {
    std::cerr << "bench_kernels: " << (graph.is_ok() ? fanouts.status() : graph.status()).to_string() << "\n";
    return 1;
  }
  set_torch_threads(threads);

  // The batches: the first `batches` of the training ids in a fixed shuffle.
  std::vector<int64_t> order = graph->train_ids;
  std::mt19937_64 rng(1);
  std::shuffle(order.begin(), order.end(), rng);
  LocalGraphSource source(graph->in_edges);
  MultiLayerNeighborSampler sampler(*fanouts);
  const int64_t d = graph->feat_dim;
  int64_t num_classes = 0;
  for (int64_t l : graph->labels) num_classes = std::max(num_classes, l + 1);
  std::vector<Sampled> sampled;
  for (int b = 0; b < batches && static_cast<size_t>(b) * batch_size < order.size(); ++b) {
    const size_t start = static_cast<size_t>(b) * batch_size;
    const size_t len = std::min<size_t>(batch_size, order.size() - start);
    auto mb = sampler.sample(source, std::span<const int64_t>(order.data() + start, len), 1000 + b);
    if (!mb.is_ok()) {
      std::cerr << "bench_kernels: " << mb.status().to_string() << "\n";
      return 1;
    }
    Sampled s;
    s.batch = std::move(*mb);
    s.rows.resize(s.batch.input_nodes.size() * static_cast<size_t>(d));
    for (size_t i = 0; i < s.batch.input_nodes.size(); ++i) {
      std::memcpy(s.rows.data() + i * d, graph->features.data() + s.batch.input_nodes[i] * d, d * sizeof(float));
    }
    for (int64_t v : s.batch.seeds) s.labels.push_back(graph->labels[v]);
    sampled.push_back(std::move(s));
  }
  const auto& b0 = sampled[0].batch.blocks;
  std::printf("graph %s: %lld nodes; %zu batches of %lld seeds, fanouts %s; block 0: %lld src, %lld dst, %lld edges; "
              "last block: %lld src, %lld dst, %lld edges; %d thread(s)\n",
              pc->graph_name.c_str(), static_cast<long long>(graph->num_nodes), sampled.size(),
              static_cast<long long>(batch_size), fan_out.c_str(), static_cast<long long>(b0.front().num_src()),
              static_cast<long long>(b0.front().num_dst()), static_cast<long long>(b0.front().num_edges()),
              static_cast<long long>(b0.back().num_src()), static_cast<long long>(b0.back().num_dst()),
              static_cast<long long>(b0.back().num_edges()), threads);

  const double bw = memcpy_bytes_per_s();
  std::string agg_line;
  double bytes = 0;
  for (const auto& s : sampled) bytes += step_bytes(s, d);
  const double bound_s = bytes / bw / static_cast<double>(sampled.size());
  std::printf("memcpy bandwidth %.1f GB/s; a step reads at least %.1f MB: bound %.2f ms per step\n\n", bw / 1e9,
              bytes / static_cast<double>(sampled.size()) / 1e6, bound_s * 1e3);

  // The aggregation kernel alone on every batch's input block (mean of the
  // input rows, forward): against reading that block's CSR and its src rows once.
  {
    std::vector<double> fused_s, ref_s;
    double agg_bytes = 0;
    std::vector<ops::BlockGraphPtr> graphs;
    std::vector<Tensor> xs;
    for (const auto& s : sampled) {
      const Block& b = s.batch.blocks[0];
      auto g = make_block_graph(b);
      if (!g.is_ok()) return 1;
      graphs.push_back(*g);
      xs.push_back(rows_tensor(s.rows, static_cast<int64_t>(s.batch.input_nodes.size()), d));
      agg_bytes += static_cast<double>((b.indptr.size() + b.indices.size()) * 8) +
                   static_cast<double>(b.num_src() * d * 4 + b.num_dst() * d * 4);
    }
    torch::NoGradGuard no_grad;
    for (int r = 0; r <= rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        const auto t0 = Clock::now();
        for (size_t i = 0; i < graphs.size(); ++i) {
          auto y = k == 0 ? ops::copy_u_reduce(graphs[i], xs[i], ops::Reduce::mean)
                          : ops::copy_u_reduce_reference(graphs[i], xs[i], ops::Reduce::mean);
        }
        if (r > 0) (k == 0 ? fused_s : ref_s).push_back(seconds_since(t0) / static_cast<double>(graphs.size()));
      }
    }
    const double agg_bound = agg_bytes / bw / static_cast<double>(graphs.size());
    std::printf("mean aggregation of the input block (%lld-dim rows), forward: fused %.2f ms, index_add %.2f ms, "
                "bandwidth bound %.2f ms\n\n",
                static_cast<long long>(d), median(fused_s) * 1e3, median(ref_s) * 1e3, agg_bound * 1e3);
    agg_line = fmt::format("ratio: kernels_aggregation_fused_over_bandwidth_bound {:.1f} (for reference; index_add: {:.1f})",
                           median(fused_s) / agg_bound, median(ref_s) / agg_bound);
  }

  nlohmann::json out = {{"graph", pc->graph_name}, {"threads", threads}, {"batches", sampled.size()},
                        {"memcpy_gb_per_s", bw / 1e9}, {"bound_ms", bound_s * 1e3}, {"models", nlohmann::json::object()}};
  std::vector<std::string> ratio_lines;
  for (const bool spmm : {true, false}) {
    const char* name = spmm ? "update_all_u_mul_e_sum" : "apply_edges_u_dot_v";
    const auto t = time_message_op(sampled, d, rounds, spmm);
    const double ratio = t.step_s[0] / t.step_s[1];
    std::printf("%s on the input block (%lld-dim rows), forward + backward: fused %.2f ms (forward %.2f), "
                "index_add %.2f ms (forward %.2f)\n",
                name, static_cast<long long>(d), t.step_s[0] * 1e3, t.fwd_s[0] * 1e3, t.step_s[1] * 1e3,
                t.fwd_s[1] * 1e3);
    out["message_ops"][name] = {{"fused_ms", t.step_s[0] * 1e3},     {"reference_ms", t.step_s[1] * 1e3},
                                {"fused_fwd_ms", t.fwd_s[0] * 1e3},  {"reference_fwd_ms", t.fwd_s[1] * 1e3},
                                {"fused_over_reference", ratio}};
    ratio_lines.push_back(fmt::format("ratio: kernels_{}_fused_over_index_add {:.2f} (target <= 0.5)", name, ratio));
  }
  std::printf("\n%-5s %-10s %10s %10s %10s\n", "model", "kernels", "fwd ms", "bwd ms", "step ms");
  std::stringstream names(models);
  for (std::string name; std::getline(names, name, ',');) {
    if (auto file = builtin_model_file(name, static_cast<int>(fanouts->size())); !file.is_ok()) {
      std::cerr << "bench_kernels: " << file.status().to_string() << "\n";
      return 2;
    }
    ModelConfig mc;
    mc.kind = name;
    mc.in_dim = d;
    mc.num_hidden = num_hidden;
    mc.num_classes = num_classes;
    mc.num_layers = static_cast<int>(fanouts->size());
    mc.dropout = 0.0;
    mc.num_heads = num_heads;
    torch::manual_seed(1);
    auto fused = Model::create(mc);
    mc.kernels = Kernels::reference;
    torch::manual_seed(1);
    auto reference = Model::create(mc);
    if (!fused.is_ok() || !reference.is_ok()) {
      std::cerr << "bench_kernels: " << (fused.is_ok() ? reference.status() : fused.status()).to_string() << "\n";
      return 1;
    }
    std::vector<double> fwd[2], bwd[2], step[2];
    for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
      for (int k = 0; k < 2; ++k) {
        if ((only == "fused" && k == 1) || (only == "reference" && k == 0)) continue;
        Model& m = k == 0 ? **fused : **reference;
        double f = 0, bk = 0;
        for (const auto& s : sampled) {
          const auto t = run_step(m, s, d);
          f += t.forward_s;
          bk += t.backward_s;
        }
        if (r == 0) continue;
        const double n = static_cast<double>(sampled.size());
        fwd[k].push_back(f / n);
        bwd[k].push_back(bk / n);
        step[k].push_back((f + bk) / n);
      }
    }
    for (int k = 0; k < 2; ++k) {
      std::printf("%-5s %-10s %10.2f %10.2f %10.2f\n", name.c_str(), k == 0 ? "fused" : "reference",
                  median(fwd[k]) * 1e3, median(bwd[k]) * 1e3, median(step[k]) * 1e3);
    }
    const double ratio = median(step[0]) / median(step[1]);
    const double over_bound = median(step[0]) / bound_s;
    out["models"][name] = {{"fused_ms", median(step[0]) * 1e3},     {"reference_ms", median(step[1]) * 1e3},
                           {"fused_fwd_ms", median(fwd[0]) * 1e3},  {"fused_bwd_ms", median(bwd[0]) * 1e3},
                           {"reference_fwd_ms", median(fwd[1]) * 1e3}, {"reference_bwd_ms", median(bwd[1]) * 1e3},
                           {"fused_over_reference", ratio},         {"fused_over_bound", over_bound}};
    ratio_lines.push_back(
        fmt::format("ratio: kernels_{}_fused_over_index_add {:.2f} (target <= 0.5)", name, ratio));
    ratio_lines.push_back(fmt::format("ratio: kernels_{}_fused_over_bandwidth_bound {:.1f} (for reference)", name,
                                      over_bound));
  }
  std::printf("\n");
  ratio_lines.push_back(agg_line);
  for (const auto& l : ratio_lines) std::printf("%s\n", l.c_str());
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  return 0;
}
