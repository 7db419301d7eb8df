#pragma once
// The key=value list of a --generate spec ("sbm:nodes=1000,seed=3"), shared
// by the generators: each registers its numeric fields by name, and every
// mistake (no '=', an unknown key, a value that is not a number of the
// field's kind) gets one message that quotes the spec.

#include <charconv>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "common/status.h"

namespace dgld {

class GenerateKeys {
 public:
  explicit GenerateKeys(std::string spec) : spec_(std::move(spec)) {}
  GenerateKeys(const GenerateKeys&) = delete;  // the parsers refer to this object
  GenerateKeys& operator=(const GenerateKeys&) = delete;

  // `key`'s value is parsed into *field (an integer or floating-point type).
  template <typename T>
  void add(const std::string& key, T* field) {
    keys_[key] = [this, key, field](std::string_view v) -> Status {
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), *field);
      if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) {
        return error("bad value '" + std::string(v) + "' for key '" + key + "' (expected " +
                     (std::is_floating_point_v<T> ? "a number" : "an integer") + ")");
      }
      return Status::ok();
    };
  }

  // Parses what follows the spec's first ':' (nothing: every field keeps its default).
  Status parse() const;

  // invalid_argument("--generate '<spec>': <what>").
  Status error(const std::string& what) const;

 private:
  std::string spec_;
  std::map<std::string, std::function<Status(std::string_view)>> keys_;
};

}  // namespace dgld
