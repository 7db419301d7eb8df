#pragma once
// Command-line parsing shared by every dgld program (Boost.Program_options).
// parse_command_line() handles --help and --version, turns parse errors into a
// message naming the flag, and accepts DGL's underscore spellings of flags
// (--num_trainers for --num-trainers).

#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace dgld {

enum class CliOutcome { run, exit_ok, exit_error };

// Parses argv into `vm`. Prints usage for --help and the version for --version.
// Positional arguments after "--" (or unrecognised ones when `rest` is given)
// are appended to `rest`.
CliOutcome parse_command_line(int argc, const char* const argv[], const std::string& program,
                              const std::string& usage,
                              const boost::program_options::options_description& desc,
                              boost::program_options::variables_map& vm,
                              std::vector<std::string>* rest = nullptr);

}  // namespace dgld
