#pragma once
// One TCP connection carrying dgld frames in both directions.
// Reads header -> blob table -> payload -> blobs, hands each complete Message
// to `on_message`, and owns a single write queue. Any framing error (bad magic
// or version, over-size frame, truncated stream) closes the connection with a
// specific, logged Status passed to `on_close` exactly once. The process never
// crashes on bad bytes. TCP_NODELAY is always on.
// Lifetime: held by shared_ptr; pending async operations keep it alive.

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/net/asio.h"

#include "common/net/message.h"
#include "common/net/traffic.h"

namespace dgld::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using MessageHandler = std::function<void(const std::shared_ptr<Connection>&, Message&&)>;
  using CloseHandler = std::function<void(const std::shared_ptr<Connection>&, const Status&)>;
  // Where blob `index` of an incoming frame should be read to: a buffer of at
  // least `length` bytes that stays valid until the frame is delivered or the
  // connection closes, or nullptr for a fresh allocation. Runs on the
  // connection's strand; must not block.
  using BlobTarget = std::function<uint8_t*(const FrameHeader&, size_t index, uint64_t length)>;

  // `peer` names the other side in every log line and error ("graph-server 1 at 10.0.0.2:30050").
  Connection(tcp::socket socket, std::string peer, FrameLimits limits);
  ~Connection();

  // Installs handlers and starts reading. Call once.
  void start(MessageHandler on_message, CloseHandler on_close, BlobTarget blob_target = nullptr);
  // Queues a frame; thread-safe. Frames are written in the order queued.
  // When nothing else is being written, the calling thread writes the frame
  // itself, as far as the socket takes it without blocking (no hand-off to
  // the I/O thread, no wake-up); the rest goes out from the strand. Returns
  // false (and drops the frame) when the connection is closed.
  bool send(OutMessage msg);
  // Closes with `reason` (logged at warn unless ok). Idempotent, thread-safe.
  void close(const Status& reason = Status::ok());
  // Closes with `reason` once the frames already queued are written (an
  // error reply reaches the peer before the connection goes). Thread-safe.
  void close_after_writes(const Status& reason);
  // The limits for frames read from now on (a server raises them once a
  // connection has authenticated). Call from the message handler only.
  void set_limits(const FrameLimits& limits) { limits_ = limits; }

  // Backpressure (set before start()): between frames, reading waits while
  // `gate` returns false, checking again every few milliseconds, so a peer
  // that sends faster than its replies drain is held up by TCP flow control
  // instead of growing queues. `account`, when given, also counts this
  // connection's queued reply bytes (a server's total over its connections).
  void set_read_gate(std::function<bool()> gate, std::shared_ptr<std::atomic<int64_t>> account = nullptr);
  // Requests read but not yet handled, as the server counts them.
  void begin_request() { ++pending_requests_; }
  void end_request() { --pending_requests_; }
  int pending_requests() const { return pending_requests_.load(); }
  uint64_t read_pauses() const { return read_pauses_.load(); }

  // Counts every frame written or read from now on under `row` (null: not
  // counted); a server switches a connection to its peer's row once the
  // client has said who it is. The TrafficCounters must outlive this.
  void set_traffic(TrafficCounters::Peer* row) { traffic_.store(row, std::memory_order_release); }

  const std::string& peer() const { return peer_; }
  bool is_open() const { return !closed_.load(); }
  uint64_t bytes_in() const { return bytes_in_.load(); }
  uint64_t bytes_out() const { return bytes_out_.load(); }
  size_t queued_bytes() const { return queued_bytes_.load(); }

 private:
  enum class ReadState { idle, header, table, payload, blob };
  void pump();
  void refill();
  void read_direct();
  Status set_low_water(size_t bytes);  // SO_RCVLOWAT
  bool advance();
  void start_fill(uint8_t* dst, size_t n);
  void deliver();
  void fail(const Status& st);
  bool refuse_other_version(const Status& why);  // true: an error reply is queued
  void on_read_error(const boost::system::error_code& ec);
  // The write path runs under write_mu_, on the sending thread or the strand.
  void write_next();
  void write_some();
  void wait_writable();
  void write_done(const boost::system::error_code& ec);
  void add_queued(int64_t delta);
  void hold_reading();

  tcp::socket socket_;
  asio::strand<asio::any_io_executor> strand_;
  std::string peer_;
  FrameLimits limits_;
  MessageHandler on_message_;
  CloseHandler on_close_;
  BlobTarget blob_target_;

  // Read state (touched only on the strand).
  std::vector<uint8_t> rbuf_;
  size_t rpos_ = 0, rend_ = 0;  // unread bytes are rbuf_[rpos_, rend_)
  ReadState read_state_ = ReadState::idle;
  uint8_t* fill_dst_ = nullptr;
  size_t fill_left_ = 0;
  size_t low_water_ = 1;  // the socket's SO_RCVLOWAT
  uint8_t header_buf_[kFrameHeaderSize];
  std::vector<uint8_t> table_buf_;
  std::vector<uint64_t> blob_lengths_;
  Message incoming_;

  // Write state (guarded by write_mu_). Only the strand waits on the socket
  // and closes it; any thread holding the lock may write to it.
  std::mutex write_mu_;
  bool started_ = false;        // non-blocking mode is on: senders may write
  bool socket_closed_ = false;  // the descriptor is gone: nobody may write
  std::deque<OutMessage> write_queue_;
  std::deque<std::vector<uint8_t>> write_prefixes_;  // header + blob table per frame in flight
  std::vector<asio::const_buffer> write_bufs_;
  size_t in_flight_ = 0;  // frames at the front of write_queue_ being written
  size_t write_pos_ = 0, write_offset_ = 0;  // progress through write_bufs_
  bool writing_ = false;
  bool close_when_drained_ = false;
  Status drained_reason_;

  std::atomic<bool> closed_{false};
  bool quiet_close_ = false;  // set before close() for an orderly EOF
  std::atomic<uint64_t> bytes_in_{0};
  std::atomic<uint64_t> bytes_out_{0};
  std::atomic<size_t> queued_bytes_{0};
  std::atomic<TrafficCounters::Peer*> traffic_{nullptr};
  std::function<bool()> read_gate_;
  std::shared_ptr<std::atomic<int64_t>> queue_account_;
  std::unique_ptr<asio::steady_timer> gate_timer_;
  std::atomic<int> pending_requests_{0};
  std::atomic<uint64_t> read_pauses_{0};
};

// "1.2.3.4:5678" for an endpoint, "?" when it cannot be read.
std::string endpoint_string(const tcp::socket& socket);

}  // namespace dgld::net
