// The training loop: layer-wise evaluation and link-prediction metrics (loop.h).

#include <cmath>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/buffer_pool.h"
#include "common/file_util.h"
#include "common/memory.h"
#include "daemons/trainer_host/loop.h"
#include "daemons/trainer_host/progress.h"

namespace dgld::trainer {

Result<EvalCounts> Loop::layerwise(const LayerwiseRequest& request) {
  auto& model = model_->impl();
  model.set_training(false);
  Result<EvalCounts> counts = EvalCounts{};
  {
    torch::NoGradGuard no_grad;
    counts = b_.layerwise(
        *model_,
        [this](std::span<const int64_t> ids, const torch::Tensor& features,
               const std::vector<client::TypedRows>& typed) { return layer0(ids, features, typed, /*train=*/false); },
        request);
  }
  model.set_training(true);
  // Evaluation's chunks are gone: their memory goes back to the system
  // rather than stay in the heap under the next epoch's peak.
  trim_heap();
  return counts;
}

Result<EvalMetrics> Loop::evaluate(int epoch) {
  const auto t0 = Clock::now();
  auto counts = layerwise(LayerwiseRequest{});
  if (!counts.is_ok()) return counts.status().with_context(fmt::format("evaluation after epoch {}", epoch));
  EvalMetrics e;
  e.epoch = epoch;
  e.val_acc = counts->val_total > 0 ? static_cast<double>(counts->val_correct) / counts->val_total : 0.0;
  e.test_acc = counts->test_total > 0 ? static_cast<double>(counts->test_correct) / counts->test_total : 0.0;
  e.time_s = seconds_since(t0);
  return e;
}

torch::Tensor Loop::score(const torch::Tensor& hu, const torch::Tensor& hv) {
  if (!scorer_mlp_) return (hu * hv).sum(1);
  return scorer_mlp_->forward(hu * hv).squeeze(1);
}

Result<LinkMetrics> Loop::link_metrics(bool test, const RowReader& read, int64_t width) {
  const char* set = test ? "test" : "validation";
  DGLD_ASSIGN_OR_RETURN(LinkEdges e, b_.link_eval_edges(test));
  const int64_t n = static_cast<int64_t>(e.src.size()), k = e.num_negatives;
  if (k < 1) {
    return invalid_argument(fmt::format("the {} edges have no negatives to rank against (dgl-partition "
                                        "--link-negatives 0)",
                                        set));
  }
  // Per edge: its rank among its negatives (ties count half, as OGB), then
  // the sums every trainer adds up.
  std::vector<float> pos_scores, neg_scores;
  double sums[5] = {static_cast<double>(n), 0, 0, 0, 0};  // edges, 1/rank, hits@1, @10, @50
  constexpr int64_t kChunk = 4096;
  std::vector<int64_t> ids;
  std::vector<float> rows;
  if (scorer_mlp_) scorer_mlp_->eval();
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t c = std::min(kChunk, n - start);
    ids.assign(e.src.begin() + start, e.src.begin() + start + c);
    ids.insert(ids.end(), e.dst.begin() + start, e.dst.begin() + start + c);
    ids.insert(ids.end(), e.neg_dst.begin() + start * k, e.neg_dst.begin() + (start + c) * k);
    rows.resize(ids.size() * static_cast<size_t>(width));
    DGLD_RETURN_IF_ERROR(read(ids, rows.data()).with_context(fmt::format("{} edges: embeddings", set)));
    const auto h = torch::from_blob(rows.data(), {static_cast<int64_t>(ids.size()), width}, torch::kFloat32);
    const auto hu = h.narrow(0, 0, c), hv = h.narrow(0, c, c), hn = h.narrow(0, 2 * c, c * k);
    const auto pos = score(hu, hv).contiguous();
    const auto neg = score(hu.repeat_interleave(k, 0), hn).view({c, k}).contiguous();
    const float* ps = pos.data_ptr<float>();
    const float* ns = neg.data_ptr<float>();
    for (int64_t i = 0; i < c; ++i) {
      int64_t above = 0, ties = 0;
      for (int64_t j = 0; j < k; ++j) {
        above += ns[i * k + j] > ps[i] ? 1 : 0;
        ties += ns[i * k + j] == ps[i] ? 1 : 0;
      }
      const double rank = 1.0 + static_cast<double>(above) + 0.5 * static_cast<double>(ties);
      sums[1] += 1.0 / rank;
      sums[2] += rank <= 1.0 ? 1 : 0;
      sums[3] += rank <= 10.0 ? 1 : 0;
      sums[4] += rank <= 50.0 ? 1 : 0;
    }
    pos_scores.insert(pos_scores.end(), ps, ps + c);
    neg_scores.insert(neg_scores.end(), ns, ns + c * k);
  }
  if (scorer_mlp_) scorer_mlp_->train();
  auto t = torch::tensor(std::vector<double>(sums, sums + 5), torch::kFloat64);
  DGLD_RETURN_IF_ERROR(b_.allreduce(t, Reduce::sum, fmt::format("{} edges: ranking sums", set)));
  LinkMetrics m;
  m.num_edges = static_cast<int64_t>(t[0].item<double>());
  if (m.num_edges == 0) return invalid_argument(fmt::format("the link split has no {} edges", set));
  const double total = static_cast<double>(m.num_edges);
  m.mrr = t[1].item<double>() / total;
  m.hits1 = t[2].item<double>() / total;
  m.hits10 = t[3].item<double>() / total;
  m.hits50 = t[4].item<double>() / total;
  // ROC-AUC of every positive against every negative (Mann-Whitney, ties
  // counted half), over every trainer's scores.
  auto as_tensor = [](std::vector<float>& v) {
    return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}, torch::kFloat32);
  };
  DGLD_ASSIGN_OR_RETURN(auto pos_t, allgather(b_, as_tensor(pos_scores), fmt::format("{} edges: positive scores", set)));
  DGLD_ASSIGN_OR_RETURN(auto neg_t, allgather(b_, as_tensor(neg_scores), fmt::format("{} edges: negative scores", set)));
  std::vector<float> all_pos(pos_t.data_ptr<float>(), pos_t.data_ptr<float>() + pos_t.numel());
  std::vector<float> all_neg(neg_t.data_ptr<float>(), neg_t.data_ptr<float>() + neg_t.numel());
  std::sort(all_neg.begin(), all_neg.end());
  double wins = 0;
  for (const float p : all_pos) {
    const auto lo = std::lower_bound(all_neg.begin(), all_neg.end(), p);
    const auto hi = std::upper_bound(lo, all_neg.end(), p);
    wins += static_cast<double>(lo - all_neg.begin()) + 0.5 * static_cast<double>(hi - lo);
  }
  m.auc = all_pos.empty() || all_neg.empty()
              ? 0.0
              : wins / (static_cast<double>(all_pos.size()) * static_cast<double>(all_neg.size()));
  return m;
}

Result<EvalMetrics> Loop::evaluate_link(int epoch) {
  const auto t0 = Clock::now();
  EvalMetrics e;
  e.epoch = epoch;
  LayerwiseRequest request;
  request.count = false;
  request.keep = {model_->num_layers() - 1};
  request.every_rank = true;
  request.on_kept = [&](int, int64_t width, const RowReader& read) -> Status {
    torch::NoGradGuard no_grad;
    DGLD_ASSIGN_OR_RETURN(e.val_link, link_metrics(false, read, width));
    DGLD_ASSIGN_OR_RETURN(e.test_link, link_metrics(true, read, width));
    return Status::ok();
  };
  auto counts = layerwise(request);
  if (!counts.is_ok()) return counts.status().with_context(fmt::format("evaluation after epoch {}", epoch));
  e.time_s = seconds_since(t0);
  return e;
}

}  // namespace dgld::trainer
