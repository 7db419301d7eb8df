#pragma once
// ip_config.txt: one machine per line, `<ipv4-or-hostname> [<base_port>]`.
// Missing port means 30050. `#` starts a comment; blank lines are allowed.
// Machine m is the m-th machine line (0-based); server j of machine m listens
// on base_port + j of that address.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace dgld {

inline constexpr uint16_t kDefaultBasePort = 30050;

struct MachineAddress {
  std::string host;            // IPv4 literal or hostname, as written
  uint16_t base_port = kDefaultBasePort;
  int line = 0;                // 1-based line in the file, for messages
  bool operator==(const MachineAddress& o) const { return host == o.host && base_port == o.base_port; }
};

// Parses the text of an ip_config; `source` names it in error messages.
Result<std::vector<MachineAddress>> parse_ip_config(const std::string& text, const std::string& source);
Result<std::vector<MachineAddress>> load_ip_config(const std::filesystem::path& path);

}  // namespace dgld
