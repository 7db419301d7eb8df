#pragma once
// ip_config.txt: one machine per line, `<ipv4-or-hostname> [<base_port>]`.
// Missing port means 30050. `#` starts a comment; blank lines are allowed.
// Machine m is the m-th machine line (0-based); server j of machine m listens
// on base_port + j of that address.
//
// Spare machines (dgl-launch --max-restarts, docs/reliability.md) are comment
// lines `# spare <address> [<base_port>]` after every machine line. DGL's
// readers see only the machines: dgl.distributed's stops at the first line
// that is not one or two fields, and one that skips comments skips them.

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

struct IpConfig {
  std::vector<MachineAddress> machines;
  std::vector<MachineAddress> spares;  // in the file's order
};

// Parses the text of an ip_config; `source` names it in error messages.
Result<IpConfig> parse_ip_config_with_spares(const std::string& text, const std::string& source);
Result<IpConfig> load_ip_config_with_spares(const std::filesystem::path& path);
// The machines only.
Result<std::vector<MachineAddress>> parse_ip_config(const std::string& text, const std::string& source);
Result<std::vector<MachineAddress>> load_ip_config(const std::filesystem::path& path);

// `text` (an ip_config) with machine `machine`'s line replaced by `spare`'s
// address and that spare's own line commented out, `note` in a comment at
// the end: what every process of a job reads once the spare took the
// machine's place. Line numbers stay as they were.
std::string replace_machine_line(const std::string& text, const MachineAddress& machine, const MachineAddress& spare,
                                 const std::string& note);

}  // namespace dgld
