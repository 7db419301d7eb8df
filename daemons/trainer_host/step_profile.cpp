#include "daemons/trainer_host/step_profile.h"

#include <algorithm>

#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>

namespace dgld::trainer {

namespace prof = torch::autograd::profiler;

std::string op_category(std::string_view name) {
  auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  // A custom autograd function's backward node is named after the function.
  if (has("CppNode<")) {
    if (has("Dropout")) return "dropout";
    if (has("CopyUReduce") || has("Gspmm") || has("Gsddmm") || has("GatAggregate") ||
        has("EdgeSoftmax")) {
      return "aggregation";
    }
  }
  // Autograd's own nodes ("MmBackward0", "autograd::engine::evaluate_function: ...") are
  // wrappers: their self time is the engine's bookkeeping around the operators they call.
  if (has("autograd::engine")) return "autograd engine";
  if (has("dropout") || has("bernoulli") || has("relu_dropout")) return "dropout";
  if (has("aten::mm") || has("aten::addmm") || has("aten::matmul") || has("aten::linear") ||
      has("aten::bmm") || has("aten::addmv") || has("aten::mv") || has("aten::dot")) {
    return "dense products";
  }
  if (name.substr(0, 6) == "dgld::" || has("CopyUReduce") || has("Gspmm") || has("Gsddmm") ||
      has("EdgeSoftmax") || has("GatAggregate")) {
    return "aggregation";
  }
  if (has("index_select") || has("aten::index") || has("embedding") || has("gather") ||
      has("index_add") || has("scatter")) {
    return "gathers";
  }
  if (has("aten::empty") || has("aten::zeros") || has("aten::zero_") || has("aten::fill_") ||
      has("aten::ones") || has("aten::resize_") || has("aten::clone") || has("aten::contiguous") ||
      has("aten::copy_") || has("aten::to") || has("aten::_to_copy")) {
    return "allocation and copies";
  }
  if (has("Optimizer") || has("adam") || has("Adam") || has("addcdiv") || has("addcmul") ||
      has("aten::sqrt") || has("aten::lerp")) {
    return "optimiser";
  }
  if (has("relu") || has("threshold") || has("aten::add") || has("aten::mul") || has("aten::div") ||
      has("aten::sub") || has("aten::elu") || has("aten::leaky_relu") || has("aten::exp") ||
      has("aten::neg") || has("aten::sum") || has("aten::mean") || has("softmax") ||
      has("nll_loss") || has("cross_entropy") || has("aten::where") || has("aten::clamp")) {
    return "elementwise and loss";
  }
  return "other";
}

StepProfiler::StepProfiler() = default;

StepProfiler::~StepProfiler() {
  if (running_) prof::disableProfilerLegacy();
}

void StepProfiler::start() {
  if (running_) return;
  prof::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  running_ = true;
}

void StepProfiler::pause() {
  if (!running_) return;
  running_ = false;
  const prof::thread_event_lists lists = prof::disableProfilerLegacy();
  std::map<std::string, OpTime>& by_name = by_name_;
  for (const auto& events : lists) {
    // Push and pop events of one thread nest; a pop closes the open push with its handle.
    struct Open {
      const prof::LegacyEvent* push;
      double children_us = 0;
    };
    std::vector<Open> open;
    for (const auto& e : events) {
      if (e.kind() == prof::EventKind::PushRange) {
        open.push_back({&e});
      } else if (e.kind() == prof::EventKind::PopRange) {
        auto it = std::find_if(open.rbegin(), open.rend(),
                               [&](const Open& o) { return o.push->handle() == e.handle(); });
        if (it == open.rend()) continue;
        const size_t at = static_cast<size_t>(open.rend() - it) - 1;
        const double total_us = open[at].push->cpuElapsedUs(e);
        OpTime& t = by_name[open[at].push->name()];
        t.calls += 1;
        t.self_s += std::max(0.0, total_us - open[at].children_us) * 1e-6;
        // A call inside another call of the same operator is in the outer one's total.
        const bool nested = std::any_of(
            open.begin(), open.begin() + static_cast<std::ptrdiff_t>(at), [&](const Open& o) {
              return std::string_view(o.push->name()) == open[at].push->name();
            });
        if (!nested) t.total_s += total_us * 1e-6;
        open.resize(at);
        if (!open.empty()) open.back().children_us += total_us;
      }
    }
  }
}

StepProfile StepProfiler::result(int steps, double wall_s) {
  pause();
  StepProfile p;
  p.steps = steps;
  p.wall_s = wall_s;
  std::map<std::string, double> categories;
  for (const auto& [name, op] : by_name_) {
    OpTime t = op;
    t.name = name;
    t.category = op_category(name);
    categories[t.category] += t.self_s;
    p.ops.push_back(std::move(t));
  }
  std::sort(p.ops.begin(), p.ops.end(),
            [](const OpTime& a, const OpTime& b) { return a.self_s > b.self_s; });
  p.categories.assign(categories.begin(), categories.end());
  std::sort(p.categories.begin(), p.categories.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return p;
}

std::string format_step_profile(const StepProfile& p, int top) {
  const double steps = std::max(1, p.steps);
  const double wall = p.wall_s > 0 ? p.wall_s : 1;
  double recorded = 0;
  for (const auto& [name, s] : p.categories) recorded += s;
  std::string out = fmt::format(
      "model step by operator over {} steps ({:.1f} ms per step; {:.1f} ms of it in "
      "operators):\n  {:<28} {:>10} {:>7}\n",
      p.steps, p.wall_s / steps * 1e3, recorded / steps * 1e3, "category", "ms/step", "share");
  for (const auto& [name, s] : p.categories) {
    out += fmt::format("  {:<28} {:>10.2f} {:>6.1f}%\n", name, s / steps * 1e3, 100 * s / wall);
  }
  out += fmt::format("  {:<40} {:>7} {:>10} {:>7}\n", "operator (self time)", "calls", "ms/step",
                     "share");
  for (size_t i = 0; i < p.ops.size() && static_cast<int>(i) < top; ++i) {
    const OpTime& t = p.ops[i];
    out += fmt::format("  {:<40} {:>7} {:>10.2f} {:>6.1f}%\n", t.name.substr(0, 40), t.calls,
                       t.self_s / steps * 1e3, 100 * t.self_s / wall);
  }
  return out;
}

}  // namespace dgld::trainer
