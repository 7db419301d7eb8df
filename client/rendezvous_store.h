#pragma once
// The trainers' rendezvous store: the key-value store a job's trainers meet
// in before they have a process group (c10d's ProcessGroupGloo exchanges its
// pairs' addresses through it, dgld agrees on checkpoints and run ids in it).
// Rank 0 serves it on machine 0's base port + 900 over a dgld connection, so
// with the job's secret every connection authenticates (common/net/auth.h)
// before it may read or write a key: a stranger, a replayed handshake or
// random bytes are refused with a log line naming the peer. It replaces
// c10d's TCPStore, which took any connection without a word.
//
// The operations are c10d::Store's (set, get that waits for the key, add,
// compare_set, check, delete, num_keys, wait); schemas/store.fbs has the wire
// form. Torch-free: trainer-host adapts it to c10d::Store
// (daemons/trainer_host/dist_store.h), the Python package to
// torch.distributed.Store (dgld/distributed/rendezvous.py).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/net/auth.h"
#include "common/status.h"

namespace dgld::net {
class IoThreads;
class RpcClient;
}  // namespace dgld::net

namespace dgld::client {

using Bytes = std::vector<uint8_t>;

// The serving side, run by rank 0. Its waits (get, wait) are parked, not
// threads: a key set later answers them, their deadline answers with an error.
class RendezvousServer {
 public:
  // Listens on host:port (port 0: a free one). `secret` null: no
  // authentication (a job started without dgl-launch's secret).
  static Result<std::unique_ptr<RendezvousServer>> start(const std::string& host, uint16_t port,
                                                         net::SecretPtr secret);
  ~RendezvousServer();
  uint16_t port() const;
  // Connections refused for a failed handshake or bad bytes so far.
  uint64_t refused() const;

 private:
  struct Impl;
  explicit RendezvousServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One trainer's connection to the store. Every call has a deadline: `timeout`
// for the connection and for each wait.
class RendezvousClient {
 public:
  // Connects (retrying until `timeout`: rank 0 may start later) and, with a
  // secret, authenticates.
  static Result<std::unique_ptr<RendezvousClient>> connect(const std::string& host, uint16_t port,
                                                           net::SecretPtr secret, std::chrono::milliseconds timeout);
  ~RendezvousClient();

  Status set(const std::string& key, const Bytes& value);
  // Waits up to the timeout for the key to be set.
  Result<Bytes> get(const std::string& key);
  Result<int64_t> add(const std::string& key, int64_t delta);
  // Sets `desired` if the value is `expected` (or the key is missing and
  // `expected` is empty); returns the value after.
  Result<Bytes> compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  Result<bool> check(const std::vector<std::string>& keys);
  Result<bool> remove(const std::string& key);
  Result<int64_t> num_keys();
  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  const std::string& peer() const { return peer_; }

 private:
  RendezvousClient() = default;
  struct Reply;
  Result<Reply> call(int op, const std::vector<std::string>& keys, int64_t delta, std::vector<const Bytes*> values,
                     std::chrono::milliseconds wait);

  std::unique_ptr<net::IoThreads> io_;
  std::shared_ptr<net::RpcClient> rpc_;
  std::chrono::milliseconds timeout_{60000};
  std::string peer_;
};

}  // namespace dgld::client
