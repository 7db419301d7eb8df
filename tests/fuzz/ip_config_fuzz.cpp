// Fuzz target: the ip_config.txt parser (common/ip_config.h). Beyond "no
// crash": an accepted file lists at least one machine, each with a non-empty
// address made of hostname characters, a port in 1..65535, increasing line
// numbers and no address:port twice; and printing the machines back as a
// file parses to the same list.

#include <set>
#include <string>

#include "common/ip_config.h"
#include "tests/fuzz/fuzz_target.h"

using namespace dgld;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto r = parse_ip_config(text, "ip_config.txt");
  if (!r.is_ok()) {
    FUZZ_CHECK(r.status().message().rfind("ip_config.txt", 0) == 0, "an error that does not name the file");
    return 0;
  }
  FUZZ_CHECK(!r->empty(), "accepted a file without machines");
  std::set<std::pair<std::string, uint16_t>> seen;
  std::string printed;
  int last_line = 0;
  for (const auto& m : *r) {
    FUZZ_CHECK(!m.host.empty() && m.host.size() <= 253, "bad host length");
    for (char c : m.host) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_';
      FUZZ_CHECK(ok, "host with a character outside [A-Za-z0-9._-]");
    }
    FUZZ_CHECK(m.base_port != 0, "port 0");
    FUZZ_CHECK(m.line > last_line, "line numbers not increasing");
    last_line = m.line;
    FUZZ_CHECK(seen.insert({m.host, m.base_port}).second, "the same address and port twice");
    printed += m.host + " " + std::to_string(m.base_port) + "\n";
  }
  auto again = parse_ip_config(printed, "printed");
  FUZZ_CHECK(again.is_ok() && again->size() == r->size(), "the printed list does not parse back");
  for (size_t i = 0; i < r->size(); ++i) FUZZ_CHECK((*again)[i] == (*r)[i], "the printed list parses differently");
  return 0;
}
