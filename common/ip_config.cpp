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

Result<std::vector<MachineAddress>> parse_ip_config(const std::string& text, const std::string& source) {
  std::vector<MachineAddress> machines;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    auto where = [&] { return source + ":" + std::to_string(line_no) + ": "; };
    std::string line = raw.substr(0, raw.find('#'));
    std::istringstream fields(line);
    std::vector<std::string> tokens;
    for (std::string t; fields >> t;) tokens.push_back(t);
    if (tokens.empty()) continue;
    if (tokens.size() > 2) {
      return invalid_argument(where() + "expected '<address> [<base_port>]', got " +
                              std::to_string(tokens.size()) + " fields: '" + line + "'");
    }
    MachineAddress m;
    m.host = tokens[0];
    m.line = line_no;
    bool numeric = false;
    bool ipv4 = is_ipv4(m.host, &numeric);
    if (numeric && !ipv4) {
      return invalid_argument(where() + "'" + m.host + "' is not a valid IPv4 address");
    }
    if (!ipv4) {
      bool ok = m.host.size() <= 253 && m.host.front() != '-' && m.host.front() != '.';
      for (char c : m.host) ok = ok && is_hostname_char(c);
      if (!ok) {
        return invalid_argument(where() + "'" + m.host +
                                "' is neither an IPv4 address nor a hostname (IPv6 is not supported)");
      }
    }
    if (tokens.size() == 2) {
      const std::string& p = tokens[1];
      unsigned value = 0;
      auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
      if (ec != std::errc() || end != p.data() + p.size() || value == 0 || value > 65535) {
        return invalid_argument(where() + "base port '" + p + "' is not a number in 1..65535");
      }
      m.base_port = static_cast<uint16_t>(value);
    }
    for (const auto& prev : machines) {
      if (prev == m) {
        return invalid_argument(where() + "machine " + m.host + " port " + std::to_string(m.base_port) +
                                " is already listed on line " + std::to_string(prev.line));
      }
    }
    machines.push_back(std::move(m));
  }
  if (machines.empty()) {
    return invalid_argument(source + ": no machines listed (expected one '<address> [<base_port>]' per line)");
  }
  return machines;
}

Result<std::vector<MachineAddress>> load_ip_config(const std::filesystem::path& path) {
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_ip_config(text, path.string());
}

}  // namespace dgld
