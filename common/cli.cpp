#include "common/cli.h"

#include "common/net/frame.h"

#include <iostream>

#include "dgld_version.h"

namespace dgld {
namespace po = boost::program_options;

namespace {
// DGL spells flags with underscores (--num_trainers); accept them as --num-trainers.
std::vector<std::string> normalise(int argc, const char* const argv[]) {
  std::vector<std::string> out;
  bool after_dashes = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (!after_dashes && a == "--") {
      after_dashes = true;
    } else if (!after_dashes && a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      std::string name = a.substr(0, eq);
      for (char& c : name) {
        if (c == '_') c = '-';
      }
      a = eq == std::string::npos ? name : name + a.substr(eq);
    }
    out.push_back(std::move(a));
  }
  return out;
}
}  // namespace

std::string version_string() {
  return std::string(DGLD_VERSION) + " (protocol " + std::to_string(net::kProtocolVersion) + ")";
}

CliOutcome parse_command_line(int argc, const char* const argv[], const std::string& program,
                              const std::string& usage, const po::options_description& desc,
                              po::variables_map& vm, std::vector<std::string>* rest) {
  po::options_description all(desc);
  all.add_options()("help,h", "print this help and exit")("version", "print the version and exit");
  std::vector<std::string> args = normalise(argc, argv);
  std::vector<std::string> tail;
  if (auto it = std::find(args.begin(), args.end(), "--"); it != args.end()) {
    tail.assign(it + 1, args.end());
    args.erase(it, args.end());
  }
  try {
    auto parser = po::command_line_parser(args).options(all);
    po::parsed_options parsed = rest ? parser.allow_unregistered().run() : parser.run();
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << "Usage: " << program << " " << usage << "\n\n" << all << "\n";
      return CliOutcome::exit_ok;
    }
    if (vm.count("version")) {
      std::cout << program << " " << version_string() << "\n";
      return CliOutcome::exit_ok;
    }
    po::notify(vm);
    if (rest) {
      for (auto& s : po::collect_unrecognized(parsed.options, po::include_positional)) {
        rest->push_back(s);
      }
      rest->insert(rest->end(), tail.begin(), tail.end());
    } else if (!tail.empty()) {
      std::cerr << program << ": unexpected arguments after '--' (starting with '" << tail[0]
                << "')\n";
      return CliOutcome::exit_error;
    }
  } catch (const po::error& e) {
    std::cerr << program << ": " << e.what() << "\n(try '" << program << " --help')\n";
    return CliOutcome::exit_error;
  }
  return CliOutcome::run;
}

}  // namespace dgld
