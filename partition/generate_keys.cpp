#include "partition/generate_keys.h"

namespace dgld {

Status GenerateKeys::error(const std::string& what) const {
  return invalid_argument("--generate '" + spec_ + "': " + what);
}

Status GenerateKeys::parse() const {
  const auto colon = spec_.find(':');
  std::string_view rest = colon == std::string::npos ? std::string_view() : std::string_view(spec_).substr(colon + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view kv = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos) return error("expected key=value, got '" + std::string(kv) + "'");
    const std::string key(kv.substr(0, eq));
    const auto it = keys_.find(key);
    if (it == keys_.end()) {
      std::string known;
      for (const auto& [k, _] : keys_) known += (known.empty() ? "" : ", ") + k;
      return error("unknown key '" + key + "' (known: " + known + ")");
    }
    DGLD_RETURN_IF_ERROR(it->second(kv.substr(eq + 1)));
  }
  return Status::ok();
}

}  // namespace dgld
