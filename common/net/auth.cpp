#include "common/net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "common/file_util.h"
#include "common/job_env.h"

namespace dgld::net {

Result<SecretPtr> load_secret_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return not_found(fmt::format("secret file {}: {}", path.string(), errno_string()));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return invalid_argument(fmt::format("secret file {} has mode {:o}: group or others may use it; it must be "
                                        "readable by its owner only (chmod 600)",
                                        path.string(), st.st_mode & 0777));
  }
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.size() < 16 || text.size() > 4096) {
    return invalid_argument(fmt::format("secret file {} holds {} bytes; a secret is 16 to 4096 bytes",
                                        path.string(), text.size()));
  }
  return std::make_shared<const Secret>(std::vector<uint8_t>(text.begin(), text.end()));
}

Status write_new_secret_file(const std::filesystem::path& path) {
  AuthNonce a = random_nonce();
  std::string hex;
  for (uint8_t b : a) hex += fmt::format("{:02x}", b);
  return write_file_atomic(path, hex + "\n", 0600);
}

Result<SecretPtr> secret_from_flag_or_env(const std::string& flag_value) {
  std::string path = flag_value;
  if (path.empty()) {
    if (const char* env = std::getenv(job_env::kSecretFile); env && *env) path = env;
  }
  if (path.empty()) return SecretPtr{};
  return load_secret_file(path);
}

AuthNonce random_nonce() {
  AuthNonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    // The OS random source failed: nothing safe can be done without it.
    throw std::runtime_error("RAND_bytes failed: no random nonce for authentication");
  }
  return n;
}

AuthMac auth_mac(const Secret& secret, std::string_view label, std::span<const uint8_t> first,
                 std::span<const uint8_t> second) {
  std::vector<uint8_t> msg;
  msg.reserve(label.size() + first.size() + second.size());
  msg.insert(msg.end(), label.begin(), label.end());
  msg.insert(msg.end(), first.begin(), first.end());
  msg.insert(msg.end(), second.begin(), second.end());
  AuthMac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.key().data(), static_cast<int>(secret.key().size()), msg.data(), msg.size(),
       out.data(), &len);
  return out;
}

bool mac_matches(std::span<const uint8_t> received, const AuthMac& expected) {
  return received.size() == expected.size() && CRYPTO_memcmp(received.data(), expected.data(), expected.size()) == 0;
}

AuthMac pair_proof(const Secret& secret, std::span<const uint8_t> session, int32_t from, int32_t to) {
  uint8_t ends[8];
  for (int i = 0; i < 4; ++i) {
    ends[i] = static_cast<uint8_t>(static_cast<uint32_t>(from) >> (8 * i));
    ends[4 + i] = static_cast<uint8_t>(static_cast<uint32_t>(to) >> (8 * i));
  }
  return auth_mac(secret, kPairProofLabel, session, ends);
}

}  // namespace dgld::net
