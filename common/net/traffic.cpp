#include "common/net/traffic.h"

#include <nlohmann/json.hpp>

#include "common/net/frame.h"
#include "schemas/rpc_generated.h"

namespace dgld::net {

namespace {

thread_local CallCost* t_scope = nullptr;

size_t cell_of(uint16_t kind) { return kind < kTrafficKinds ? kind : kTrafficKinds - 1; }

}  // namespace

uint64_t frame_bytes(uint64_t payload_bytes, uint64_t blob_count, uint64_t blob_bytes) {
  return kFrameHeaderSize + 8 * blob_count + payload_bytes + blob_bytes;
}

KindTraffic& KindTraffic::operator+=(const KindTraffic& o) {
  frames_out += o.frames_out;
  bytes_out += o.bytes_out;
  frames_in += o.frames_in;
  bytes_in += o.bytes_in;
  return *this;
}

void TrafficCounters::Peer::count_out(uint16_t kind, uint64_t bytes) {
  Cell& c = cells_[cell_of(kind)];
  c.frames_out.fetch_add(1, std::memory_order_relaxed);
  c.bytes_out.fetch_add(bytes, std::memory_order_relaxed);
}

void TrafficCounters::Peer::count_in(uint16_t kind, uint64_t bytes) {
  Cell& c = cells_[cell_of(kind)];
  c.frames_in.fetch_add(1, std::memory_order_relaxed);
  c.bytes_in.fetch_add(bytes, std::memory_order_relaxed);
}

TrafficCounters::Peer* TrafficCounters::peer(int machine) {
  std::lock_guard lock(mu_);
  auto& p = peers_[machine];
  if (!p) p = std::make_unique<Peer>();
  return p.get();
}

TrafficSnapshot TrafficCounters::snapshot() const {
  TrafficSnapshot out;
  std::lock_guard lock(mu_);
  for (const auto& [machine, peer] : peers_) {
    auto& kinds = out[machine];
    for (size_t k = 0; k < peer->cells_.size(); ++k) {
      const auto& c = peer->cells_[k];
      KindTraffic t{c.frames_out.load(std::memory_order_relaxed), c.bytes_out.load(std::memory_order_relaxed),
                    c.frames_in.load(std::memory_order_relaxed), c.bytes_in.load(std::memory_order_relaxed)};
      if (t.frames_out || t.frames_in) kinds[static_cast<int>(k)] = t;
    }
  }
  return out;
}

TrafficSnapshot traffic_delta(const TrafficSnapshot& a, const TrafficSnapshot& b) {
  TrafficSnapshot out;
  for (const auto& [machine, kinds] : a) {
    const auto bp = b.find(machine);
    for (const auto& [kind, t] : kinds) {
      KindTraffic d = t;
      if (bp != b.end()) {
        if (auto bk = bp->second.find(kind); bk != bp->second.end()) {
          d.frames_out -= bk->second.frames_out;
          d.bytes_out -= bk->second.bytes_out;
          d.frames_in -= bk->second.frames_in;
          d.bytes_in -= bk->second.bytes_in;
        }
      }
      if (d.frames_out || d.frames_in) out[machine][kind] = d;
    }
  }
  return out;
}

KindTraffic peer_total(const std::map<int, KindTraffic>& kinds) {
  KindTraffic t;
  for (const auto& [kind, k] : kinds) t += k;
  return t;
}

std::string kind_name(int kind) {
  if (kind >= 0 && kind <= static_cast<int>(fbs::MessageKind::MAX)) {
    const char* n = fbs::EnumNameMessageKind(static_cast<fbs::MessageKind>(kind));
    if (n && *n) return n;
  }
  return std::to_string(kind);
}

std::string traffic_json(const TrafficSnapshot& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [machine, kinds] : s) {
    auto& peer = j[machine == kUnknownMachine ? std::string("unknown") : std::to_string(machine)];
    peer = nlohmann::json::object();
    for (const auto& [kind, t] : kinds) {
      peer[kind_name(kind)] = {{"frames_out", t.frames_out},
                               {"bytes_out", t.bytes_out},
                               {"frames_in", t.frames_in},
                               {"bytes_in", t.bytes_in}};
    }
  }
  return j.dump();
}

void CallCost::add(int machine, int64_t calls, int64_t bytes_out, int64_t bytes_in) {
  for (PeerCost& p : peers) {
    if (p.machine == machine) {
      p.calls += calls;
      p.bytes_out += bytes_out;
      p.bytes_in += bytes_in;
      return;
    }
  }
  peers.push_back(PeerCost{machine, calls, bytes_out, bytes_in});
}

void CallCost::merge(const CallCost& other) {
  for (const PeerCost& p : other.peers) add(p.machine, p.calls, p.bytes_out, p.bytes_in);
}

int64_t CallCost::calls() const {
  int64_t n = 0;
  for (const PeerCost& p : peers) n += p.calls;
  return n;
}

int64_t CallCost::bytes() const {
  int64_t n = 0;
  for (const PeerCost& p : peers) n += p.bytes_out + p.bytes_in;
  return n;
}

CallScope::CallScope(CallCost* into) : previous_(t_scope) { t_scope = into; }
CallScope::~CallScope() { t_scope = previous_; }
CallCost* CallScope::current() { return t_scope; }

}  // namespace dgld::net
