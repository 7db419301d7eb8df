#include "launcher/launch/protocol.h"

namespace dgld::launch {
using nlohmann::json;

namespace {

json process_to_json(const ProcessSpec& p) {
  return json{{"role", p.role}, {"rank", p.rank}, {"argv", p.argv}, {"env", p.env}};
}

ProcessSpec process_from_json(const json& j) {
  ProcessSpec p;
  p.role = j.at("role").get<std::string>();
  p.rank = j.at("rank").get<int>();
  p.argv = j.at("argv").get<std::vector<std::string>>();
  p.env = j.at("env").get<std::map<std::string, std::string>>();
  return p;
}

json endpoints_to_json(const std::vector<Endpoint>& v) {
  json a = json::array();
  for (const auto& e : v) a.push_back({{"host", e.host}, {"port", e.port}, {"what", e.what}});
  return a;
}

std::vector<Endpoint> endpoints_from_json(const json& a) {
  std::vector<Endpoint> v;
  for (const auto& e : a) {
    v.push_back({e.at("host").get<std::string>(), e.at("port").get<int>(), e.value("what", std::string())});
  }
  return v;
}

}  // namespace

json to_json(const AgentSpec& s) {
  json servers = json::array(), trainers = json::array();
  for (const auto& p : s.servers) servers.push_back(process_to_json(p));
  for (const auto& p : s.trainers) trainers.push_back(process_to_json(p));
  return json{{"version", s.version},
              {"job_id", s.job_id},
              {"machine", s.machine},
              {"label", s.label},
              {"workspace", s.workspace},
              {"log_dir", s.log_dir},
              {"part_config", s.part_config},
              {"ip_config", s.ip_config},
              {"grace_ms", s.grace_ms},
              {"start_timeout_ms", s.start_timeout_ms},
              {"omp_threads_auto_divisor", s.omp_threads_auto_divisor},
              {"hash_files", s.hash_files},
              {"external_servers", s.external_servers},
              {"secret", s.secret},
              {"files", s.files},
              {"servers", servers},
              {"trainers", trainers},
              {"server_ports", endpoints_to_json(s.server_ports)},
              {"other_ports", endpoints_to_json(s.other_ports)}};
}

Result<AgentSpec> agent_spec_from_json(const json& j) {
  try {
    AgentSpec s;
    s.version = j.at("version").get<std::string>();
    s.job_id = j.at("job_id").get<std::string>();
    s.machine = j.at("machine").get<int>();
    s.label = j.at("label").get<std::string>();
    s.workspace = j.at("workspace").get<std::string>();
    s.log_dir = j.at("log_dir").get<std::string>();
    s.part_config = j.at("part_config").get<std::string>();
    s.ip_config = j.at("ip_config").get<std::string>();
    s.grace_ms = j.at("grace_ms").get<int>();
    s.start_timeout_ms = j.at("start_timeout_ms").get<int>();
    s.omp_threads_auto_divisor = j.at("omp_threads_auto_divisor").get<int>();
    s.hash_files = j.at("hash_files").get<bool>();
    s.external_servers = j.at("external_servers").get<bool>();
    s.secret = j.value("secret", std::string());
    s.files = j.at("files").get<std::vector<std::string>>();
    for (const auto& p : j.at("servers")) s.servers.push_back(process_from_json(p));
    for (const auto& p : j.at("trainers")) s.trainers.push_back(process_from_json(p));
    s.server_ports = endpoints_from_json(j.at("server_ports"));
    s.other_ports = endpoints_from_json(j.at("other_ports"));
    return s;
  } catch (const json::exception& e) {
    return protocol_error(std::string("malformed job spec from dgl-launch: ") + e.what());
  }
}

std::string encode_line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Result<json> decode_line(const std::string& line) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return protocol_error("not a protocol line: '" + line.substr(0, 200) + "'");
  }
  return j;
}

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string base64_encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(data[i])) << 16) | (uint32_t(uint8_t(data[i + 1])) << 8) | uint8_t(data[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  if (i < data.size()) {
    uint32_t v = uint32_t(uint8_t(data[i])) << 16;
    if (i + 1 < data.size()) v |= uint32_t(uint8_t(data[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < data.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return protocol_error("base64: length is not a multiple of 4");
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      const int x = value(c);
      if (x < 0 || pad > 0) return protocol_error("base64: invalid character at offset " + std::to_string(i + k));
      v = (v << 6) | static_cast<uint32_t>(x);
    }
    out += static_cast<char>((v >> 16) & 255);
    if (pad < 2) out += static_cast<char>((v >> 8) & 255);
    if (pad < 1) out += static_cast<char>(v & 255);
  }
  return out;
}

}  // namespace dgld::launch
