#include "common/prometheus.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dgld::prom {

using nlohmann::json;

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{}", v);
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

std::string escape_help(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

std::string sample_name(const std::string& name, const Labels& labels) {
  if (labels.empty()) return name;
  std::string s = name + "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    s += (i ? ",": "") + labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
  }
  return s + "}";
}

Exposition::Family& Exposition::family(const std::string& name, const char* type, const std::string& help) {
  for (auto& f : families_) {
    if (f.name == name) return f;
  }
  families_.push_back(Family{name, type, help, {}});
  return families_.back();
}

void Exposition::add(const std::string& name, const char* type, const std::string& help, const Labels& labels,
                     double value) {
  family(name, type, help).samples.push_back(sample_name(name, labels) + " " + format_value(value));
}

void Exposition::add_int(const std::string& name, const char* type, const std::string& help, const Labels& labels,
                         long long value) {
  family(name, type, help).samples.push_back(sample_name(name, labels) + " " + std::to_string(value));
}

std::string Exposition::text() const {
  std::string out;
  for (const auto& f : families_) {
    out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (const auto& s : f.samples) out += s + "\n";
  }
  return out;
}

size_t Exposition::num_samples() const {
  size_t n = 0;
  for (const auto& f : families_) n += f.samples.size();
  return n;
}

namespace {

Labels with(Labels base, std::initializer_list<std::pair<std::string, std::string>> more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// j[key] as a sample when it is a number (absent, null or text: none).
// Negative values mean "unknown" where skip_negative says so.
void number(Exposition& e, const json& j, const char* key, const std::string& name, const char* type,
            const std::string& help, const Labels& labels, double scale = 1, bool skip_negative = false) {
  if (!j.is_object()) return;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return;
  if (skip_negative && it->get<double>() < 0) return;
  if (scale == 1 && it->is_number_integer()) {
    e.add_int(name, type, help, labels, it->get<long long>());
  } else {
    e.add(name, type, help, labels, it->get<double>() * scale);
  }
}

// A process's memory object (process_memory.h's to_json plus the daemon's own
// *_bytes figures) as one family labelled by kind.
void memory(Exposition& e, const json& m, const std::string& name, const Labels& base) {
  if (!m.is_object()) return;
  for (const auto& [key, v] : m.items()) {
    const std::string suffix = "_bytes";
    if (!v.is_number() || key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    number(e, m, key.c_str(), name, "gauge",
           "memory of the process by kind (rss, peak_rss, anon, file, shmem; and what it holds), bytes",
           with(base, {{"kind", key.substr(0, key.size() - suffix.size())}}), 1, true);
  }
}

}  // namespace

std::string graph_server_text(const json& s, const Labels& base) {
  Exposition e;
  const std::string p = "dgld_server_";
  number(e, s, "uptime_s", p + "uptime_seconds", "gauge", "seconds since the graph-server started", base);
  number(e, s, "connections", p + "connections", "gauge", "client connections open now", base);
  number(e, s, "registered_clients", p + "registered_clients", "gauge",
         "clients registered with this coordinator and not gone (server 0 only)", base);
  number(e, s, "bytes_in", p + "received_bytes_total", "counter", "bytes received on client connections", base);
  number(e, s, "bytes_out", p + "sent_bytes_total", "counter", "bytes sent on client connections", base);
  number(e, s, "queued_reply_bytes", p + "queued_reply_bytes", "gauge", "reply bytes queued and not yet sent", base);
  number(e, s, "read_pauses", p + "read_pauses_total", "counter",
         "times a connection was read from no more until its queued replies drained", base);
  number(e, s, "refused_connections", p + "refused_connections_total", "counter",
         "connections refused for failing authentication", base);
  if (s.contains("requests") && s["requests"].is_object()) {
    for (const auto& [kind, r] : s["requests"].items()) {
      const Labels l = with(base, {{"kind", kind}});
      number(e, r, "count", p + "requests_total", "counter", "requests answered, by request kind", l);
      number(e, r, "errors", p + "request_errors_total", "counter", "requests refused before their handler, by kind",
             l);
    }
    for (const auto& [kind, r] : s["requests"].items()) {
      const std::string help =
          "request handling time at a quantile (the upper bound of its power-of-two microsecond bucket), by kind";
      number(e, r, "p50_us", p + "request_latency_seconds", "gauge", help, with(base, {{"kind", kind}, {"quantile", "0.5"}}),
             1e-6);
      number(e, r, "p99_us", p + "request_latency_seconds", "gauge", help,
             with(base, {{"kind", kind}, {"quantile", "0.99"}}), 1e-6);
    }
  }
  memory(e, s.value("memory", json::object()), p + "memory_bytes", base);
  if (s.contains("traffic") && s["traffic"].is_object()) {
    for (const auto& [machine, kinds] : s["traffic"].items()) {
      if (!kinds.is_object()) continue;
      for (const auto& [kind, t] : kinds.items()) {
        const Labels l = with(base, {{"client_machine", machine}, {"kind", kind}});
        number(e, t, "bytes_in", p + "traffic_received_bytes_total", "counter",
               "bytes of frames received, by the client's machine and message kind", l);
        number(e, t, "bytes_out", p + "traffic_sent_bytes_total", "counter",
               "bytes of frames sent, by the client's machine and message kind", l);
        number(e, t, "frames_in", p + "traffic_received_frames_total", "counter",
               "frames received, by the client's machine and message kind", l);
        number(e, t, "frames_out", p + "traffic_sent_frames_total", "counter",
               "frames sent, by the client's machine and message kind", l);
      }
    }
  }
  return e.text();
}

std::string trainer_text(const json& t, const Labels& base) {
  Exposition e;
  const std::string p = "dgld_trainer_";
  if (t.contains("graph_name") || t.contains("model")) {
    e.add(p + "info", "gauge", "the job's graph and model (value 1)",
          with(base, {{"graph", t.value("graph_name", "")}, {"model", t.value("model", "")}}), 1);
  }
  number(e, t, "uptime_s", p + "uptime_seconds", "gauge", "seconds since trainer-host started", base);
  if (t.contains("training")) {
    e.add(p + "training", "gauge", "1 while epochs run, 0 before (start-up) and after", base,
          t.value("training", false) ? 1 : 0);
  }
  number(e, t, "num_trainers", p + "num_trainers", "gauge", "trainers in the job", base);
  number(e, t, "epoch", p + "epoch", "gauge", "the epoch in progress (or the last one)", base);
  number(e, t, "step", p + "step", "gauge", "steps done in the epoch in progress", base);
  number(e, t, "steps_per_epoch", p + "steps_per_epoch", "gauge", "steps in one epoch", base);
  number(e, t, "steps_done", p + "steps_total", "counter", "training steps done by this process", base);
  number(e, t, "epochs_done", p + "epochs_total", "counter", "epochs completed by this process", base);
  number(e, t, "loss", p + "loss", "gauge", "mean loss of the epoch in progress so far (every trainer's)", base);
  number(e, t, "seeds_per_s", p + "seeds_per_second", "gauge",
         "training seeds of every trainer per second in the epoch in progress", base);
  const json last = t.value("last_epoch", json::object());
  number(e, last, "epoch", p + "last_epoch", "gauge", "the last completed epoch", base);
  number(e, last, "loss", p + "last_epoch_loss", "gauge", "mean loss of the last completed epoch", base);
  number(e, last, "train_acc", p + "last_epoch_train_accuracy", "gauge", "training accuracy of the last epoch", base);
  number(e, last, "time_s", p + "last_epoch_seconds", "gauge", "wall time of the last epoch", base);
  number(e, last, "seeds_per_s", p + "last_epoch_seeds_per_second", "gauge",
         "training seeds of every trainer per second in the last epoch", base);
  for (const char* stage : {"sample", "fetch", "compute", "allreduce", "wait"}) {
    number(e, last, (std::string(stage) + "_s").c_str(), p + "last_epoch_stage_seconds", "gauge",
           "time of the last epoch by stage (sample, fetch, compute, allreduce, wait; metrics.json's)",
           with(base, {{"kind", stage}}));
  }
  number(e, last, "network_bytes", p + "last_epoch_network_bytes", "gauge",
         "bytes every trainer moved over the network in the last epoch", base);
  number(e, t, "evals", p + "evaluations_total", "counter", "evaluations done", base);
  number(e, t, "val_acc", p + "val_accuracy", "gauge", "validation accuracy of the last evaluation", base);
  number(e, t, "test_acc", p + "test_accuracy", "gauge", "test accuracy of the last evaluation", base);
  memory(e, t.value("memory", json::object()), p + "memory_bytes", base);
  return e.text();
}

}  // namespace dgld::prom
