#pragma once
// Command-line parsing shared by every dgld program (Boost.Program_options).
// parse_command_line() handles --help and --version, turns parse errors into a
// message naming the flag, and accepts DGL's underscore spellings of flags
// (--num_trainers for --num-trainers).

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/program_options.hpp>

namespace dgld {

enum class CliOutcome { run, exit_ok, exit_error };

// This build's version as every program's --version prints it and dgl-launch
// compares it across machines: "0.1.0 (protocol 3)" (the wire protocol of
// common/net/frame.h; builds of other protocols refuse each other's frames).
std::string version_string();

// Parses argv into `vm`. Prints usage for --help and the version for --version.
// Positional arguments after "--" (or unrecognised ones when `rest` is given)
// are appended to `rest`.
CliOutcome parse_command_line(int argc, const char* const argv[], const std::string& program,
                              const std::string& usage,
                              const boost::program_options::options_description& desc,
                              boost::program_options::variables_map& vm,
                              std::vector<std::string>* rest = nullptr);

// DGL's launch scripts pass settings as environment variables (DGL_SERVER_ID,
// DGL_CONF_PATH, ...). Fills `value` from `env` unless --`flag` was given on
// the command line; false (with `error` naming both) when the variable does
// not parse as T.
template <typename T>
bool flag_from_env(const boost::program_options::variables_map& vm, const char* flag, const char* env, T& value,
                   std::string& error) {
  if (vm.count(flag) && !vm[flag].defaulted()) return true;
  const char* v = std::getenv(env);
  if (!v || !*v) return true;
  try {
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::filesystem::path>) {
      value = v;
    } else {
      size_t used = 0;
      long long x = std::stoll(v, &used);
      if (used != std::string(v).size()) throw std::invalid_argument(v);
      value = static_cast<T>(x);
    }
  } catch (const std::exception&) {
    error = std::string("environment variable ") + env + "='" + v + "' is not a valid value for --" + flag;
    return false;
  }
  return true;
}

}  // namespace dgld
