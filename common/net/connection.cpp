#include "common/net/connection.h"

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

Connection::~Connection() = default;

void Connection::start(MessageHandler on_message, CloseHandler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  boost::system::error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);
  if (ec) net_log()->warn("{}: cannot set TCP_NODELAY: {}", peer_, ec.message());
  asio::dispatch(strand_, [self = shared_from_this()] { self->read_header(); });
}

void Connection::read_header() {
  asio::async_read(socket_, asio::buffer(header_buf_, kFrameHeaderSize),
                   asio::bind_executor(strand_, [self = shared_from_this()](auto ec, size_t n) {
                     if (ec) return self->on_read_error(ec, n == 0 ? nullptr : "frame header");
                     self->bytes_in_ += n;
                     auto h = decode_header(std::span<const uint8_t, kFrameHeaderSize>(self->header_buf_),
                                            self->limits_);
                     if (!h) return self->fail(h.status());
                     self->incoming_ = Message{};
                     self->incoming_.header = *h;
                     self->read_table();
                   }));
}

void Connection::read_table() {
  if (incoming_.header.blob_count == 0) {
    blob_lengths_.clear();
    return read_payload();
  }
  table_buf_.resize(8ull * incoming_.header.blob_count);
  asio::async_read(socket_, asio::buffer(table_buf_),
                   asio::bind_executor(strand_, [self = shared_from_this()](auto ec, size_t n) {
                     if (ec) return self->on_read_error(ec, "blob table");
                     self->bytes_in_ += n;
                     auto lengths = decode_blob_table(self->table_buf_, self->incoming_.header, self->limits_);
                     if (!lengths) return self->fail(lengths.status());
                     self->blob_lengths_ = std::move(*lengths);
                     self->read_payload();
                   }));
}

void Connection::read_payload() {
  incoming_.payload = ByteBuffer(incoming_.header.payload_len);
  incoming_.blobs.clear();
  incoming_.blobs.reserve(blob_lengths_.size());
  if (incoming_.header.payload_len == 0) return read_blob(0);
  asio::async_read(socket_, asio::buffer(incoming_.payload.data(), incoming_.payload.size()),
                   asio::bind_executor(strand_, [self = shared_from_this()](auto ec, size_t n) {
                     if (ec) return self->on_read_error(ec, "frame payload");
                     self->bytes_in_ += n;
                     self->read_blob(0);
                   }));
}

void Connection::read_blob(size_t index) {
  // Zero-length blobs are present but need no read.
  while (index < blob_lengths_.size() && blob_lengths_[index] == 0) {
    incoming_.blobs.emplace_back();
    ++index;
  }
  if (index == blob_lengths_.size()) return deliver();
  incoming_.blobs.emplace_back(blob_lengths_[index]);
  ByteBuffer& b = incoming_.blobs.back();
  asio::async_read(socket_, asio::buffer(b.data(), b.size()),
                   asio::bind_executor(strand_, [self = shared_from_this(), index](auto ec, size_t n) {
                     if (ec) return self->on_read_error(ec, "frame blob");
                     self->bytes_in_ += n;
                     self->read_blob(index + 1);
                   }));
}

void Connection::deliver() {
  Message m = std::move(incoming_);
  incoming_ = Message{};
  if (on_message_) on_message_(shared_from_this(), std::move(m));
  if (!closed_) read_header();
}

void Connection::on_read_error(const boost::system::error_code& ec, const char* what) {
  if (closed_) return;
  if (ec == asio::error::eof && what == nullptr) {
    // A clean close between frames: normal, not worth a warning.
    quiet_close_ = true;
    return close(closed_error(peer_ + " closed the connection"));
  }
  if (ec == asio::error::eof || ec == asio::error::connection_reset) {
    return fail(closed_error(peer_ + " disconnected in the middle of a frame (" + std::string(what ? what : "header") +
                             " truncated)"));
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
    boost::system::error_code ignored;
    self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
    self->socket_.close(ignored);
    // An in-flight write still reads the front message; its completion clears the queue.
    if (!self->writing_) {
      self->write_queue_.clear();
      self->queued_bytes_ = 0;
    }
    if (self->on_close_) {
      auto cb = std::move(self->on_close_);
      self->on_close_ = nullptr;
      cb(self, reason.is_ok() ? closed_error("connection to " + self->peer_ + " closed") : reason);
    }
    self->on_message_ = nullptr;
  });
}

bool Connection::send(OutMessage msg) {
  if (closed_) return false;
  size_t bytes = msg.payload.size();
  for (const auto& b : msg.blobs) bytes += b.size;
  queued_bytes_ += bytes;
  asio::post(strand_, [self = shared_from_this(), m = std::move(msg)]() mutable {
    if (self->closed_) return;
    self->write_queue_.push_back(std::move(m));
    if (!self->writing_) self->write_next();
  });
  return true;
}

void Connection::write_next() {
  if (write_queue_.empty() || closed_) {
    writing_ = false;
    return;
  }
  writing_ = true;
  OutMessage& m = write_queue_.front();
  FrameHeader h;
  h.kind = m.kind;
  h.flags = m.flags;
  h.request_id = m.request_id;
  h.payload_len = static_cast<uint32_t>(m.payload.size());
  h.blob_count = static_cast<uint32_t>(m.blobs.size());
  write_prefix_.resize(kFrameHeaderSize);
  encode_header(h, write_prefix_.data());
  std::vector<uint64_t> lengths;
  lengths.reserve(m.blobs.size());
  for (const auto& b : m.blobs) lengths.push_back(b.size);
  encode_blob_table(lengths, write_prefix_);
  std::vector<asio::const_buffer> bufs;
  bufs.reserve(2 + m.blobs.size());
  bufs.emplace_back(write_prefix_.data(), write_prefix_.size());
  if (m.payload.size()) bufs.emplace_back(m.payload.data(), m.payload.size());
  for (const auto& b : m.blobs) {
    if (b.size) bufs.emplace_back(b.data, b.size);
  }
  asio::async_write(socket_, bufs, asio::bind_executor(strand_, [self = shared_from_this()](auto ec, size_t n) {
                      self->bytes_out_ += n;
                      if (ec || self->closed_) {
                        self->writing_ = false;
                        self->write_queue_.clear();
                        self->queued_bytes_ = 0;
                        if (!ec) return;
                        return self->fail(closed_error(self->peer_ + ": write failed: " + ec.message()));
                      }
                      size_t sent = n >= self->write_prefix_.size() ? n - self->write_prefix_.size() : 0;
                      self->queued_bytes_ -= std::min(sent, self->queued_bytes_.load());
                      self->write_queue_.pop_front();
                      self->write_next();
                    }));
}

}  // namespace dgld::net
