#pragma once
// Traffic accounting (docs/performance.md, "Traffic"): what each process
// puts on the network and takes from it.
//
// TrafficCounters: bytes and frames sent and received, by peer machine and
// by message kind. One per process part that owns connections (a client's
// Cluster, a server); its connections count every frame they write or read
// (header, blob table, payload, blobs) under their peer's row. A server
// learns its peer's machine only when the client says hello: until then the
// connection counts under kUnknownMachine.
//
// CallCost / CallScope: what the RPCs made on one thread cost while a scope
// is open (one mini-batch): round trips, request and reply bytes, by peer
// machine. RpcClient::start adds a request, RpcClient::wait its reply.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dgld::net {

inline constexpr int kUnknownMachine = -1;
inline constexpr int kTrafficKinds = 128;  // message kinds counted one by one; higher ones as kTrafficKinds - 1

// Bytes of one frame on the wire (header, blob table, payload, blobs).
uint64_t frame_bytes(uint64_t payload_bytes, uint64_t blob_count, uint64_t blob_bytes);

struct KindTraffic {
  uint64_t frames_out = 0, bytes_out = 0, frames_in = 0, bytes_in = 0;
  KindTraffic& operator+=(const KindTraffic& o);
};

// A copy of the counters: peer machine -> message kind -> traffic.
using TrafficSnapshot = std::map<int, std::map<int, KindTraffic>>;
// a - b, for the traffic between two snapshots (kinds that did not move are left out).
TrafficSnapshot traffic_delta(const TrafficSnapshot& a, const TrafficSnapshot& b);
// Sum over kinds of one peer's traffic.
KindTraffic peer_total(const std::map<int, KindTraffic>& kinds);
// {"<machine>": {"<KindName>": {"frames_out", "bytes_out", "frames_in", "bytes_in"}}} (machine -1: "unknown").
std::string traffic_json(const TrafficSnapshot& s);
// The message kind's name in schemas/rpc.fbs ("KvPull"), or its number.
std::string kind_name(int kind);

class TrafficCounters {
 public:
  // One peer's counters; lives as long as the TrafficCounters that made it.
  class Peer {
   public:
    void count_out(uint16_t kind, uint64_t bytes);
    void count_in(uint16_t kind, uint64_t bytes);

   private:
    friend class TrafficCounters;
    struct Cell {
      std::atomic<uint64_t> frames_out{0}, bytes_out{0}, frames_in{0}, bytes_in{0};
    };
    std::array<Cell, kTrafficKinds> cells_;
  };

  // The row of `machine` (kUnknownMachine for a peer not identified yet).
  Peer* peer(int machine);
  TrafficSnapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<int, std::unique_ptr<Peer>> peers_;
};

// How a connection counts: into `counters` (null: not at all), as `peer_machine`.
struct TrafficTag {
  std::shared_ptr<TrafficCounters> counters;
  int peer_machine = kUnknownMachine;
};

// RPC costs by peer machine.
struct PeerCost {
  int machine = kUnknownMachine;
  int64_t calls = 0, bytes_out = 0, bytes_in = 0;
};
struct CallCost {
  std::vector<PeerCost> peers;  // one entry per machine called, in first-call order
  void add(int machine, int64_t calls, int64_t bytes_out, int64_t bytes_in);
  void merge(const CallCost& other);
  int64_t calls() const;
  int64_t bytes() const;  // out + in
};

// While alive, the RPCs this thread starts and waits for are added to
// `into` (scopes nest: the innermost counts). Not for sharing across threads:
// a pull that waits on another thread is counted by none.
class CallScope {
 public:
  explicit CallScope(CallCost* into);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  static CallCost* current();

 private:
  CallCost* previous_;
};

}  // namespace dgld::net
