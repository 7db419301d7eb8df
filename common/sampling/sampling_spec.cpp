#include "common/sampling/sampling_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstdlib>

#include "schemas/sampling_generated.h"

namespace dgld {

SamplingSpec SamplingSpec::layer(size_t i) const {
  SamplingSpec one = *this;
  one.fanouts = {fanouts.at(i)};
  one.etype_fanouts.clear();
  if (!etype_fanouts.empty()) one.etype_fanouts = {etype_fanouts.at(i)};
  return one;
}

Status SamplingSpec::validate() const {
  if (fanouts.empty()) return invalid_argument("sampling: no fanouts (a model needs at least one layer)");
  for (size_t i = 0; i < fanouts.size(); ++i) {
    if (fanouts[i] < -1) {
      return invalid_argument(fmt::format("sampling fanouts: fanout {} of layer {} is invalid: use -1 (all) or a count >= 0",
                                          fanouts[i], i));
    }
  }
  if (!etype_fanouts.empty()) {
    if (etype_fanouts.size() != fanouts.size()) {
      return invalid_argument(fmt::format("sampling: per-edge-type fanouts for {} layers, but {} layers",
                                          etype_fanouts.size(), fanouts.size()));
    }
    for (size_t i = 0; i < etype_fanouts.size(); ++i) {
      if (etype_fanouts[i].size() != etype_fanouts[0].size() || etype_fanouts[i].empty()) {
        return invalid_argument(fmt::format("sampling: layer {} has {} per-edge-type fanouts, layer 0 has {}: give "
                                            "every layer one fanout per edge type",
                                            i, etype_fanouts[i].size(), etype_fanouts[0].size()));
      }
      for (int64_t f : etype_fanouts[i]) {
        if (f < -1) {
          return invalid_argument(fmt::format("sampling: per-edge-type fanout {} of layer {} is invalid: use -1 "
                                              "(all) or a count >= 0",
                                              f, i));
        }
      }
    }
    if (out_edges) return invalid_argument("sampling: per-edge-type fanouts of out-edges are not supported");
  }
  if (out_edges && !prob.empty()) {
    return invalid_argument("sampling: prob ('" + prob + "') with out-edges is not supported (in-edges only)");
  }
  return Status::ok();
}

std::string SamplingSpec::to_string() const {
  std::string s = fmt::format("fanouts={}", fmt::join(fanouts, ","));
  if (!etype_fanouts.empty()) {
    s += " etype_fanouts=";
    for (size_t i = 0; i < etype_fanouts.size(); ++i) s += (i ? "/" : "") + fmt::format("{}", fmt::join(etype_fanouts[i], ","));
  }
  s += fmt::format(" edge_dir={} replace={}", out_edges ? "out" : "in", replace ? 1 : 0);
  if (!prob.empty()) s += " prob=" + prob;
  if (exclude == Exclude::seed_edges) s += " exclude=seed_edges";
  return s;
}

Result<SamplingSpec::Exclude> parse_exclude(std::string_view text, std::string_view flag) {
  if (text.empty() || text == "none") return SamplingSpec::Exclude::none;
  if (text == "self" || text == "reverse_id") return SamplingSpec::Exclude::seed_edges;
  return invalid_argument(fmt::format("{} '{}': expected none, self or reverse_id", flag, text));
}

Result<std::vector<int64_t>> parse_fanouts(std::string_view text, std::string_view flag) {
  std::string_view body = text;
  if (body.size() >= 2 && body.front() == '[' && body.back() == ']') body = body.substr(1, body.size() - 2);
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    std::string item(body.substr(start, comma - start));
    const auto first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    char* end = nullptr;
    errno = 0;
    const long long v = item.empty() ? 0 : std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || v < -1) {
      return invalid_argument(fmt::format("{} '{}': '{}' is not a fanout (an integer >= -1)", flag, text, item));
    }
    out.push_back(v);
    start = comma + 1;
  }
  return out;
}

flatbuffers::Offset<fbs::SamplingSpec> write_sampling_spec(flatbuffers::FlatBufferBuilder& fbb,
                                                           const SamplingSpec& spec) {
  const auto fanouts = fbb.CreateVector(spec.fanouts);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbs::LayerFanouts>>> etype_fanouts;
  if (!spec.etype_fanouts.empty()) {
    std::vector<flatbuffers::Offset<fbs::LayerFanouts>> layers;
    for (const auto& l : spec.etype_fanouts) layers.push_back(fbs::CreateLayerFanouts(fbb, fbb.CreateVector(l)));
    etype_fanouts = fbb.CreateVector(layers);
  }
  const auto prob = spec.prob.empty() ? 0 : fbb.CreateString(spec.prob);
  return fbs::CreateSamplingSpec(fbb, fanouts, etype_fanouts, spec.out_edges, spec.replace, prob,
                                 static_cast<uint8_t>(spec.exclude));
}

Result<SamplingSpec> read_sampling_spec(const fbs::SamplingSpec* table, std::string_view where) {
  if (table == nullptr) return invalid_argument(fmt::format("{}: the request has no sampling spec", where));
  SamplingSpec spec;
  spec.fanouts.clear();
  if (table->fanouts()) spec.fanouts.assign(table->fanouts()->begin(), table->fanouts()->end());
  if (table->etype_fanouts()) {
    for (const fbs::LayerFanouts* l : *table->etype_fanouts()) {
      spec.etype_fanouts.emplace_back();
      if (l != nullptr && l->fanouts()) spec.etype_fanouts.back().assign(l->fanouts()->begin(), l->fanouts()->end());
    }
  }
  spec.out_edges = table->out_edges();
  spec.replace = table->replace();
  if (table->prob()) spec.prob = table->prob()->str();
  if (table->exclude() > static_cast<uint8_t>(SamplingSpec::Exclude::seed_edges)) {
    return invalid_argument(fmt::format("{}: sampling: exclude {} is not a known value (0 none, 1 seed edges)", where,
                                        table->exclude()));
  }
  spec.exclude = static_cast<SamplingSpec::Exclude>(table->exclude());
  if (Status st = spec.validate(); !st.is_ok()) return st.with_context(std::string(where));
  return spec;
}

}  // namespace dgld
