// dgld-switch: the emulated cluster's switch (tests/cluster/switch.h).
// scripts/cluster-emu starts it in the emulator's own network namespace,
// moves its TAP devices into the machines' namespaces, and stops it with
// SIGTERM; the devices go with the process.
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "common/cli.h"
#include "common/stop_signals.h"
#include "tests/cluster/switch.h"

using namespace dgld;
namespace po = boost::program_options;

int main(int argc, char** argv) {
  emu::SwitchOptions o;
  std::string ready_file;
  int64_t queue_kb = o.queue_bytes / 1024;
  bool realtime = true;
  po::options_description desc("dgld-switch options");
  desc.add_options()
      ("ports", po::value(&o.ports)->required(), "number of ports (TAP devices <prefix>0 .. <prefix>N-1)")
      ("tap-prefix", po::value(&o.tap_prefix)->default_value(o.tap_prefix), "TAP device name prefix")
      ("mtu", po::value(&o.mtu)->default_value(o.mtu), "largest frame payload the machines send")
      ("rate-bps", po::value(&o.rate_bps)->default_value(0), "downlink rate per port in bit/s (0: unlimited)")
      ("delay-us", po::value(&o.delay_us)->default_value(0), "one-way delay between two machines, microseconds")
      ("loss", po::value(&o.loss)->default_value(0), "probability that a frame is lost")
      ("queue-kb", po::value(&queue_kb)->default_value(queue_kb), "downlink queue per port, KiB")
      ("seed", po::value(&o.seed)->default_value(o.seed), "seed of the loss draws")
      ("stats", po::value(&o.stats_file), "JSON counters, rewritten every second and at exit")
      ("loss-file", po::value(&o.loss_file), "lines 'PORT LOSS', read every second: frames from or to PORT lost "
       "with probability LOSS instead of --loss")
      ("ready-file", po::value(&ready_file), "written once the TAP devices exist")
      ("realtime", po::value(&realtime)->default_value(true),
       "run under SCHED_FIFO priority 1 (fewer late deliveries on a busy machine); falls back to nice -10");
  po::variables_map vm;
  switch (parse_command_line(argc, argv, "dgld-switch", "--ports N [options]", desc, vm)) {
    case CliOutcome::exit_ok: return 0;
    case CliOutcome::exit_error: return 2;
    case CliOutcome::run: break;
  }
  o.queue_bytes = queue_kb * 1024;
  StopSignals signals;
  auto sw = emu::Switch::create(o);
  if (!sw.is_ok()) {
    std::cerr << "dgld-switch: " << sw.status().message() << "\n";
    return 1;
  }
  if (realtime) {
    sched_param sp{};
    sp.sched_priority = 1;
    if (::sched_setscheduler(0, SCHED_FIFO, &sp) != 0 && ::nice(-10) == -1) {
      std::cerr << "dgld-switch: neither SCHED_FIFO nor nice -10 allowed; running at normal priority\n";
    }
  }
  if (!ready_file.empty()) std::ofstream(ready_file) << "ready " << ::getpid() << "\n";
  signals.watch([&](const std::string&) { (*sw)->stop(); });
  (*sw)->run();
  signals.unwatch();
  return 0;
}
