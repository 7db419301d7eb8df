#include "common/ip_config.h"

#include <charconv>
#include <sstream>

#include "common/file_util.h"

namespace dgld {
namespace {

bool is_hostname_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// True for a dotted-quad IPv4 literal with every octet in 0..255.
bool is_ipv4(const std::string& s, bool* looks_numeric) {
  *looks_numeric = !s.empty() && s.find_first_not_of("0123456789.") == std::string::npos;
  int parts = 0;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find('.', i);
    if (j == std::string::npos) j = s.size();
    std::string octet = s.substr(i, j - i);
    if (octet.empty() || octet.size() > 3 || octet.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    if (std::stoi(octet) > 255) return false;
    ++parts;
    i = j + 1;
    if (j == s.size()) break;
  }
  return parts == 4;
}

}  // namespace

namespace {

// One address: `<host> [<base_port>]` of `tokens`; `where` prefixes errors.
Result<MachineAddress> parse_address(const std::vector<std::string>& tokens, const std::string& where,
                                     const std::string& line) {
  if (tokens.empty() || tokens.size() > 2) {
    return invalid_argument(where + "expected '<address> [<base_port>]', got " + std::to_string(tokens.size()) +
                            " fields: '" + line + "'");
  }
  MachineAddress m;
  m.host = tokens[0];
  bool numeric = false;
  const bool ipv4 = is_ipv4(m.host, &numeric);
  if (numeric && !ipv4) return invalid_argument(where + "'" + m.host + "' is not a valid IPv4 address");
  if (!ipv4) {
    bool ok = m.host.size() <= 253 && m.host.front() != '-' && m.host.front() != '.';
    for (char c : m.host) ok = ok && is_hostname_char(c);
    if (!ok) {
      return invalid_argument(where + "'" + m.host +
                              "' is neither an IPv4 address nor a hostname (IPv6 is not supported)");
    }
  }
  if (tokens.size() == 2) {
    const std::string& p = tokens[1];
    unsigned value = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
    if (ec != std::errc() || end != p.data() + p.size() || value == 0 || value > 65535) {
      return invalid_argument(where + "base port '" + p + "' is not a number in 1..65535");
    }
    m.base_port = static_cast<uint16_t>(value);
  }
  return m;
}

std::vector<std::string> split_fields(const std::string& line) {
  std::istringstream fields(line);
  std::vector<std::string> tokens;
  for (std::string t; fields >> t;) tokens.push_back(t);
  return tokens;
}

}  // namespace

Result<IpConfig> parse_ip_config_with_spares(const std::string& text, const std::string& source) {
  IpConfig out;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string where = source + ":" + std::to_string(line_no) + ": ";
    const size_t hash = raw.find('#');
    std::vector<std::string> tokens = split_fields(raw.substr(0, hash));
    bool spare = false;
    if (tokens.empty() && hash != std::string::npos) {
      const std::vector<std::string> comment = split_fields(raw.substr(hash + 1));
      if (!comment.empty() && comment[0] == "spare") {
        if (hash + 1 >= raw.size() || (raw[hash + 1] != ' ' && raw[hash + 1] != '\t')) {
          return invalid_argument(where + "a spare machine is written '# spare <address> [<base_port>]' (with the "
                                  "spaces: DGL's reader must see at least three fields), got '" + raw + "'");
        }
        tokens.assign(comment.begin() + 1, comment.end());
        if (tokens.empty()) return invalid_argument(where + "'# spare' names no address");
        spare = true;
      }
    }
    if (tokens.empty()) continue;
    if (!spare && !out.spares.empty()) {
      return invalid_argument(where + "machine line after the spare on line " + std::to_string(out.spares[0].line) +
                              ": spares go after every machine (DGL's reader stops at the first spare line)");
    }
    DGLD_ASSIGN_OR_RETURN(MachineAddress m, parse_address(tokens, where, raw));
    m.line = line_no;
    for (const auto* list : {&out.machines, &out.spares}) {
      for (const auto& prev : *list) {
        if (prev == m) {
          return invalid_argument(where + "machine " + m.host + " port " + std::to_string(m.base_port) +
                                  " is already listed on line " + std::to_string(prev.line));
        }
      }
    }
    (spare ? out.spares : out.machines).push_back(std::move(m));
  }
  if (out.machines.empty()) {
    return invalid_argument(source + ": no machines listed (expected one '<address> [<base_port>]' per line)");
  }
  return out;
}

Result<IpConfig> load_ip_config_with_spares(const std::filesystem::path& path) {
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_ip_config_with_spares(text, path.string());
}

Result<std::vector<MachineAddress>> parse_ip_config(const std::string& text, const std::string& source) {
  DGLD_ASSIGN_OR_RETURN(IpConfig c, parse_ip_config_with_spares(text, source));
  return std::move(c.machines);
}

Result<std::vector<MachineAddress>> load_ip_config(const std::filesystem::path& path) {
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_ip_config(text, path.string());
}

std::string replace_machine_line(const std::string& text, const MachineAddress& machine, const MachineAddress& spare,
                                 const std::string& note) {
  std::istringstream in(text);
  std::string out, raw;
  for (int line_no = 1; std::getline(in, raw); ++line_no) {
    if (line_no == machine.line) {
      raw = spare.host + " " + std::to_string(spare.base_port);
    } else if (line_no == spare.line) {
      raw = "# (spare of this line in use above) " + spare.host + " " + std::to_string(spare.base_port);
    }
    out += raw + "\n";
  }
  // A note after every machine line, so that DGL's reader never meets it.
  return out + "# dgl-launch: line " + std::to_string(machine.line) + " (was " + machine.host + " " +
         std::to_string(machine.base_port) + ") is the spare of line " + std::to_string(spare.line) + ": " + note + "\n";
}

}  // namespace dgld
