#include "common/net/connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "common/logging.h"
#include "schemas/rpc_generated.h"

namespace dgld::net {
namespace {
std::shared_ptr<spdlog::logger> net_log() {
  static auto l = logger("net");
  return l;
}
}  // namespace

std::string endpoint_string(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

OutBlob OutBlob::copy_of(const void* p, size_t n) {
  auto owner = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(p),
                                                      static_cast<const uint8_t*>(p) + n);
  return OutBlob{owner->data(), owner->size(), owner};
}

OutMessage make_error_reply(const Status& st) {
  flatbuffers::FlatBufferBuilder fbb(128 + st.message().size());
  auto msg = fbb.CreateString(st.message());
  fbb.Finish(fbs::CreateErrorReply(fbb, static_cast<int>(st.code()), msg));
  OutMessage out(fbs::MessageKind::ErrorReply, fbb);
  out.flags = kFlagResponse | kFlagError;
  return out;
}

Status status_from_error_reply(const Message& m, const std::string& peer) {
  if (!verify_payload<fbs::ErrorReply>(m, "ErrorReply").is_ok()) {
    return protocol_error(peer + " sent an unreadable error reply");
  }
  const auto* r = m.as<fbs::ErrorReply>();
  int code = r->code();
  auto sc = (code > 0 && code <= static_cast<int>(StatusCode::internal)) ? static_cast<StatusCode>(code)
                                                                          : StatusCode::internal;
  return Status(sc, peer + ": " + (r->message() ? r->message()->str() : std::string("(no message)")));
}

Connection::Connection(tcp::socket socket, std::string peer, FrameLimits limits)
    : socket_(std::move(socket)),
      strand_(asio::make_strand(socket_.get_executor())),
      peer_(std::move(peer)),
      limits_(limits) {}

Connection::~Connection() {
  // Whatever was still queued leaves the server's account.
  if (queue_account_) *queue_account_ -= static_cast<int64_t>(queued_bytes_.load());
}

void Connection::add_queued(int64_t delta) {
  queued_bytes_ += static_cast<size_t>(delta);
  if (queue_account_) *queue_account_ += delta;
}

void Connection::set_read_gate(std::function<bool()> gate, std::shared_ptr<std::atomic<int64_t>> account) {
  read_gate_ = std::move(gate);
  queue_account_ = std::move(account);
}

// Reading waits (between frames) until the gate opens; checked every 5 ms.
void Connection::hold_reading() {
  ++read_pauses_;
  if (!gate_timer_) gate_timer_ = std::make_unique<asio::steady_timer>(strand_);
  gate_timer_->expires_after(std::chrono::milliseconds(5));
  gate_timer_->async_wait(asio::bind_executor(strand_, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->closed_) return;
    self->pump();
  }));
}

void Connection::start(MessageHandler on_message, CloseHandler on_close, BlobTarget blob_target) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  blob_target_ = std::move(blob_target);
  boost::system::error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);
  if (ec) net_log()->warn("{}: cannot set TCP_NODELAY: {}", peer_, ec.message());
  // Writes go through sendmsg (write_some) and must never block a sender.
  boost::system::error_code nb;
  socket_.non_blocking(true, nb);
  if (nb) return fail(closed_error(peer_ + ": cannot make the socket non-blocking: " + nb.message()));
  {
    std::lock_guard lock(write_mu_);
    started_ = true;
    if (!writing_ && !write_queue_.empty()) write_next();
  }
  asio::dispatch(strand_, [self = shared_from_this()] { self->pump(); });
}

// Reading: bytes arrive in a 256 KiB buffer with read_some (one syscall can
// bring many small frames); each part of a frame (header, blob table,
// payload, blobs) is a "fill" that copies from the buffer. What a large fill
// still lacks once the buffer is drained is read straight into its
// destination, so big tensors are not copied twice.
namespace {
constexpr size_t kReadBufferBytes = 256 * 1024;
constexpr size_t kDirectReadBytes = 64 * 1024;
constexpr size_t kReadLowWater = 512 * 1024;
}  // namespace

void Connection::start_fill(uint8_t* dst, size_t n) {
  fill_dst_ = dst;
  fill_left_ = n;
}

void Connection::pump() {
  for (;;) {
    if (closed_) return;
    if (fill_left_ > 0) {
      const size_t n = std::min(fill_left_, rend_ - rpos_);
      if (n) std::memcpy(fill_dst_, rbuf_.data() + rpos_, n);
      rpos_ += n;
      fill_dst_ += n;
      fill_left_ -= n;
      if (fill_left_ > 0) {
        rpos_ = rend_ = 0;  // the buffer is drained
        if (fill_left_ >= kDirectReadBytes) return read_direct();
        return refill();
      }
    }
    if (!advance()) return;
  }
}

void Connection::refill() {
  if (rbuf_.size() < kReadBufferBytes) rbuf_.resize(kReadBufferBytes);
  socket_.async_read_some(asio::buffer(rbuf_.data() + rend_, rbuf_.size() - rend_),
                          asio::bind_executor(strand_, [self = shared_from_this()](auto ec, size_t n) {
                            if (ec) return self->on_read_error(ec);
                            self->bytes_in_ += n;
                            self->rend_ += n;
                            self->pump();
                          }));
}

// A large fill is read in pieces as they arrive. The socket's receive
// low-water mark is raised meanwhile, so the kernel wakes this thread once
// per kReadLowWater bytes instead of once per 64 KiB segment: measured, a 40 MB
// pull reply cost the receiver twice the CPU of a blocking read() loop, in
// ~450 wake-ups. The mark never exceeds what the frame still owes (the peer
// must send that much), and is back at 1 before anything else is awaited.
// It also stays within a quarter of the receive buffer: Linux grows the
// buffer and clamps the advertised window to the mark when the buffer could
// not hold it, which could make a sender on a real network wait on us.
void Connection::read_direct() {
  size_t mark = std::min(fill_left_, kReadLowWater);
  int rcvbuf = 0;
  socklen_t len = sizeof rcvbuf;
  if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) != 0) rcvbuf = 0;
  mark = std::min(mark, static_cast<size_t>(std::max(rcvbuf, 0)) / 4);
  // Raising it is best effort (reading works without, with more wake-ups);
  // a mark left above what is owed would hang, so failing to lower it ends
  // the connection.
  Status st = set_low_water(std::max<size_t>(mark, 1));
  if (!st.is_ok()) st = set_low_water(1);
  if (!st.is_ok()) return fail(st);
  socket_.async_read_some(asio::buffer(fill_dst_, fill_left_),
                          asio::bind_executor(strand_, [self = shared_from_this()](auto ec, size_t n) {
                            if (ec) return self->on_read_error(ec);
                            self->bytes_in_ += n;
                            self->fill_dst_ += n;
                            self->fill_left_ -= n;
                            if (self->fill_left_ >= kDirectReadBytes) return self->read_direct();
                            if (Status st = self->set_low_water(1); !st.is_ok()) return self->fail(st);
                            self->pump();
                          }));
}

Status Connection::set_low_water(size_t bytes) {
  if (bytes == low_water_) return Status::ok();
  const int v = static_cast<int>(bytes);
  if (::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) != 0) {
    return internal_error(peer_ + ": cannot set the socket's receive low-water mark to " + std::to_string(bytes) +
                          " bytes: " + std::strerror(errno));
  }
  low_water_ = bytes;
  return Status::ok();
}

// Called when the current fill is complete: moves to the next part of the
// frame. Returns false when reading must stop (connection failed).
bool Connection::advance() {
  switch (read_state_) {
    case ReadState::idle:
      if (read_gate_ && !read_gate_()) {
        hold_reading();
        return false;
      }
      read_state_ = ReadState::header;
      start_fill(header_buf_, kFrameHeaderSize);
      return true;
    case ReadState::header: {
      auto h = decode_header(std::span<const uint8_t, kFrameHeaderSize>(header_buf_), limits_);
      if (!h) {
        if (refuse_other_version(h.status())) {
          close_after_writes(h.status().with_context(peer_));  // the refusal goes out first
        } else {
          fail(h.status());
        }
        return false;
      }
      incoming_ = Message{};
      incoming_.header = *h;
      read_state_ = ReadState::table;
      table_buf_.resize(8ull * h->blob_count);
      start_fill(table_buf_.data(), table_buf_.size());
      return true;
    }
    case ReadState::table: {
      auto lengths = decode_blob_table(table_buf_, incoming_.header, limits_);
      if (!lengths) {
        fail(lengths.status());
        return false;
      }
      blob_lengths_ = std::move(*lengths);
      incoming_.payload = ByteBuffer(incoming_.header.payload_len);
      incoming_.blobs.reserve(blob_lengths_.size());
      read_state_ = ReadState::payload;
      start_fill(incoming_.payload.data(), incoming_.payload.size());
      return true;
    }
    case ReadState::payload:
    case ReadState::blob:
      read_state_ = ReadState::blob;
      if (incoming_.blobs.size() < blob_lengths_.size()) {
        const size_t index = incoming_.blobs.size();
        const uint64_t len = blob_lengths_[index];
        uint8_t* target = (blob_target_ && len > 0) ? blob_target_(incoming_.header, index, len) : nullptr;
        if (target) incoming_.blobs.push_back(ByteBuffer::borrowed(target, len));
        else incoming_.blobs.emplace_back(len);
        start_fill(incoming_.blobs.back().data(), incoming_.blobs.back().size());
        return true;
      }
      deliver();
      read_state_ = ReadState::idle;
      return !closed_;
  }
  return false;
}

// A dgld frame of another protocol version: a request is answered with an
// error naming both versions (which the peer cannot read either, but its own
// refusal of our header names them too) before the connection closes.
bool Connection::refuse_other_version(const Status& why) {
  uint32_t magic = 0, flags = 0;
  uint16_t version = 0;
  uint64_t request_id = 0;
  std::memcpy(&magic, header_buf_, 4);
  std::memcpy(&version, header_buf_ + 4, 2);
  std::memcpy(&flags, header_buf_ + 8, 4);
  std::memcpy(&request_id, header_buf_ + 16, 8);
  if (magic != kFrameMagic || version == kProtocolVersion || (flags & kFlagResponse)) return false;
  OutMessage reply = make_error_reply(protocol_error(why.message()));
  reply.request_id = request_id;
  return send(std::move(reply));
}

void Connection::deliver() {
  Message m = std::move(incoming_);
  incoming_ = Message{};
  if (auto* t = traffic_.load(std::memory_order_acquire)) {
    uint64_t blob_bytes = 0;
    for (const auto& b : m.blobs) blob_bytes += b.size();
    t->count_in(m.kind(), frame_bytes(m.payload.size(), m.blobs.size(), blob_bytes));
  }
  if (on_message_) on_message_(shared_from_this(), std::move(m));
}

void Connection::on_read_error(const boost::system::error_code& ec) {
  if (closed_) return;
  // Between frames means: waiting for a header with none of it received.
  const bool between_frames = (read_state_ == ReadState::header && fill_left_ == kFrameHeaderSize) ||
                              read_state_ == ReadState::idle;
  if (ec == asio::error::eof && between_frames) {
    // A clean close between frames: normal, not worth a warning.
    quiet_close_ = true;
    return close(closed_error(peer_ + " closed the connection"));
  }
  const char* part = read_state_ == ReadState::header  ? "frame header"
                     : read_state_ == ReadState::table ? "blob table"
                     : read_state_ == ReadState::payload ? "frame payload"
                                                         : "frame blob";
  if (ec == asio::error::eof || ec == asio::error::connection_reset) {
    return fail(closed_error(peer_ + " disconnected in the middle of a frame (" + part + " truncated)"));
  }
  fail(closed_error(peer_ + ": read failed: " + ec.message()));
}

void Connection::fail(const Status& st) {
  Status full = st.message().rfind(peer_, 0) == 0 ? st : st.with_context(peer_);
  close(full);
}

void Connection::close(const Status& reason) {
  if (closed_.exchange(true)) return;
  if (!reason.is_ok()) {
    if (quiet_close_) net_log()->debug("{}", reason.message());
    else net_log()->warn("closing connection: {}", reason.to_string());
  }
  auto self = shared_from_this();
  asio::post(strand_, [self, reason] {
    {
      // Under the write lock: no sender is inside sendmsg on this descriptor.
      std::lock_guard lock(self->write_mu_);
      boost::system::error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
      self->socket_.close(ignored);
      self->socket_closed_ = true;
      // A write waiting on the socket still reads the front message; its
      // (cancelled) completion clears the queue.
      if (!self->writing_) {
        self->write_queue_.clear();
        self->add_queued(-static_cast<int64_t>(self->queued_bytes_.load()));
      }
    }
    if (self->on_close_) {
      auto cb = std::move(self->on_close_);
      self->on_close_ = nullptr;
      cb(self, reason.is_ok() ? closed_error("connection to " + self->peer_ + " closed") : reason);
    }
    self->on_message_ = nullptr;
    self->blob_target_ = nullptr;
  });
}

bool Connection::send(OutMessage msg) {
  if (closed_) return false;
  size_t bytes = msg.payload.size();
  for (const auto& b : msg.blobs) bytes += b.size;
  std::lock_guard lock(write_mu_);
  if (closed_ || socket_closed_) return false;
  if (auto* t = traffic_.load(std::memory_order_acquire)) {
    t->count_out(msg.kind, frame_bytes(msg.payload.size(), msg.blobs.size(), bytes - msg.payload.size()));
  }
  add_queued(static_cast<int64_t>(bytes));
  write_queue_.push_back(std::move(msg));
  // Before start(), frames wait for start() to write them; afterwards, whoever
  // finds the connection idle writes (see write_some).
  if (started_ && !writing_) write_next();
  return true;
}

// Writing: up to kMaxCoalesced queued frames go out in one gathered write.
namespace {
constexpr size_t kMaxCoalesced = 32;
constexpr size_t kMaxCoalescedBytes = 4 << 20;
}  // namespace

void Connection::close_after_writes(const Status& reason) {
  std::lock_guard lock(write_mu_);
  if (closed_) return;
  if (!writing_ && write_queue_.empty()) return close(reason);
  close_when_drained_ = true;
  drained_reason_ = reason;
}

void Connection::write_next() {
  if (write_queue_.empty() || closed_) {
    writing_ = false;
    if (close_when_drained_ && !closed_) close(drained_reason_);
    return;
  }
  writing_ = true;
  write_prefixes_.clear();
  write_bufs_.clear();
  size_t bytes = 0;
  in_flight_ = 0;
  while (in_flight_ < write_queue_.size() && in_flight_ < kMaxCoalesced &&
         (in_flight_ == 0 || bytes < kMaxCoalescedBytes)) {
    OutMessage& m = write_queue_[in_flight_++];
    FrameHeader h;
    h.kind = m.kind;
    h.flags = m.flags;
    h.request_id = m.request_id;
    h.payload_len = static_cast<uint32_t>(m.payload.size());
    h.blob_count = static_cast<uint32_t>(m.blobs.size());
    auto& prefix = write_prefixes_.emplace_back(kFrameHeaderSize);
    encode_header(h, prefix.data());
    std::vector<uint64_t> lengths;
    lengths.reserve(m.blobs.size());
    for (const auto& b : m.blobs) lengths.push_back(b.size);
    encode_blob_table(lengths, prefix);
    bytes += prefix.size() + m.payload.size();
  }
  // Buffers point into write_prefixes_ (a deque: stable addresses) and the messages.
  for (size_t i = 0; i < in_flight_; ++i) {
    const OutMessage& m = write_queue_[i];
    write_bufs_.emplace_back(write_prefixes_[i].data(), write_prefixes_[i].size());
    if (m.payload.size()) write_bufs_.emplace_back(m.payload.data(), m.payload.size());
    for (const auto& b : m.blobs) {
      if (b.pieces) {
        for (const auto& p : *b.pieces) write_bufs_.emplace_back(p.data, p.size);
      } else if (b.size) {
        write_bufs_.emplace_back(b.data, b.size);
      }
    }
  }
  write_pos_ = 0;
  write_offset_ = 0;
  write_some();
}

// Writes the gathered buffers with sendmsg (up to IOV_MAX pieces per call; a
// reply of many small rows needs few syscalls) until the socket would block,
// then has the strand wait for it to be writable. Runs under write_mu_ on the
// thread that sent (a client's caller, a server's handler) or on the strand.
void Connection::write_some() {
  if (socket_closed_) return write_done(asio::error::operation_aborted);
  constexpr size_t kMaxIov = 1024;
  iovec iov[kMaxIov];
  const int fd = socket_.native_handle();
  while (write_pos_ < write_bufs_.size()) {
    size_t cnt = 0;
    for (size_t i = write_pos_; i < write_bufs_.size() && cnt < kMaxIov; ++i, ++cnt) {
      const size_t skip = i == write_pos_ ? write_offset_ : 0;
      iov[cnt].iov_base = const_cast<uint8_t*>(static_cast<const uint8_t*>(write_bufs_[i].data())) + skip;
      iov[cnt].iov_len = write_bufs_[i].size() - skip;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = cnt;
    // MSG_NOSIGNAL: a peer that went away is an error here, not a SIGPIPE.
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return wait_writable();
      return write_done(boost::system::error_code(errno, boost::system::system_category()));
    }
    bytes_out_ += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    while (left > 0) {
      const size_t avail = write_bufs_[write_pos_].size() - write_offset_;
      if (left >= avail) {
        left -= avail;
        ++write_pos_;
        write_offset_ = 0;
      } else {
        write_offset_ += left;
        left = 0;
      }
    }
  }
  write_done({});
}

// Only the strand starts operations on the socket object (a sender thread
// must not race the strand's reads inside Asio), so the wait is posted there.
// writing_ stays set meanwhile: other senders queue behind.
void Connection::wait_writable() {
  asio::post(strand_, [self = shared_from_this()] {
    std::lock_guard lock(self->write_mu_);
    if (self->socket_closed_ || self->closed_) return self->write_done(asio::error::operation_aborted);
    self->socket_.async_wait(tcp::socket::wait_write,
                             asio::bind_executor(self->strand_, [self](auto ec) {
                               std::lock_guard lock(self->write_mu_);
                               if (ec || self->closed_) {
                                 return self->write_done(ec ? ec : asio::error::operation_aborted);
                               }
                               self->write_some();
                             }));
  });
}

void Connection::write_done(const boost::system::error_code& ec) {
  if (ec || closed_) {
    writing_ = false;
    write_queue_.clear();
    add_queued(-static_cast<int64_t>(queued_bytes_.load()));
    if (!ec || ec == asio::error::operation_aborted) return;
    return fail(closed_error(peer_ + ": write failed: " + ec.message()));
  }
  size_t done = 0;
  for (size_t i = 0; i < in_flight_; ++i) {
    const OutMessage& m = write_queue_.front();
    done += m.payload.size();
    for (const auto& b : m.blobs) done += b.size;
    write_queue_.pop_front();
  }
  add_queued(-static_cast<int64_t>(std::min(done, queued_bytes_.load())));
  write_next();
}

}  // namespace dgld::net
