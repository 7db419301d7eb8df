#pragma once
// The emulated cluster's switch (scripts/cluster-emu, docs/cluster-emulator.md):
// one TAP device per port, each moved into one machine's network namespace
// as its eth0, and this process forwarding Ethernet frames between them as
// a learning switch does (broadcast and unknown destinations flooded). It
// is the only path between the machines, so every frame between two of
// them passes here, and it shapes them on the way:
//
//   frame read from port a at t0, destined for port b:
//     lost with probability `loss` (independently per frame, per copy);
//     start  = max(t0 + delay, busy_until[b])   one-way delay, then b's downlink
//     finish = start + bytes * 8 / rate         serialisation on b's downlink
//     dropped when b's downlink queue would hold more than `queue_bytes`;
//     written to port b at `finish`.
//
// The sender's uplink rate is the kernel's (a tbf qdisc on the machine's
// eth0, set by the script): it holds TCP back as a NIC does, instead of
// dropping. The downlink serialisation here is what makes several senders
// share one receiver (incast). Single-threaded (one io_context).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace dgld::emu {

struct SwitchOptions {
  int ports = 0;
  std::string tap_prefix = "dgldsw";  // port i is the TAP "<prefix><i>"
  int mtu = 9000;
  double rate_bps = 0;       // downlink rate per port, bits/s; 0: no limit
  double delay_us = 0;       // one way, machine to machine
  double loss = 0;           // probability that a frame is lost
  int64_t queue_bytes = 4 << 20;  // per downlink
  uint64_t seed = 1;
  std::filesystem::path stats_file;  // JSON, rewritten every second and at exit ("": none)
  // Lines "PORT LOSS", read every second (a missing file: none): frames
  // from or to PORT are lost with probability LOSS instead of `loss`.
  std::filesystem::path loss_file;
};
Status validate_switch_options(const SwitchOptions& o);

// Counters of one port, as the switch sees them: `in` = frames the machine
// sent, `out` = frames delivered to it.
struct PortStats {
  uint64_t in_frames = 0, in_bytes = 0;
  uint64_t out_frames = 0, out_bytes = 0;
  uint64_t lost = 0;          // dropped at random (`loss`)
  uint64_t queue_drops = 0;   // dropped because the downlink queue was full
  uint64_t write_errors = 0;  // the kernel refused a frame
  int64_t max_queue_bytes = 0;
};

class Switch {
 public:
  // Creates the TAP devices (in this process's network namespace, up to
  // the caller to move); errors name the device.
  static Result<std::unique_ptr<Switch>> create(const SwitchOptions& options);
  ~Switch();
  // Forwards until stop() (thread-safe, callable from a signal watcher).
  void run();
  void stop();
  std::vector<PortStats> stats() const;
  std::string stats_json() const;

 private:
  struct Impl;
  explicit Switch(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld::emu
