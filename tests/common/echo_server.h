#pragma once
// Test support for the wire layer: an echo server on a free loopback port
// (optionally authenticating), a client connected to it, and a raw socket
// for hand-made bytes. Shared by the rpc and auth tests.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/net/io_threads.h"
#include "common/net/rpc_client.h"
#include "common/net/rpc_server.h"
#include "schemas/rpc_generated.h"

namespace dgld::net::testing {

using namespace std::chrono_literals;

inline OutMessage make_echo(const std::string& text, int delay_ms = 0) {
  flatbuffers::FlatBufferBuilder fbb;
  auto t = fbb.CreateString(text);
  fbb.Finish(fbs::CreateEcho(fbb, t, delay_ms));
  return OutMessage(fbs::MessageKind::Echo, fbb);
}

// An echo server on 127.0.0.1 with a free port.
struct EchoServer {
  IoThreads io{2};
  Dispatcher dispatcher;
  std::unique_ptr<RpcServer> server;
  std::atomic<int> one_way_seen{0};

  explicit EchoServer(FrameLimits limits = {}, SecretPtr secret = nullptr,
                      std::chrono::milliseconds auth_timeout = 10s)
      : EchoServer(make_options(limits, std::move(secret), auth_timeout)) {}

  static ServerOptions make_options(FrameLimits limits = {}, SecretPtr secret = nullptr,
                                    std::chrono::milliseconds auth_timeout = 10s) {
    ServerOptions opts;
    opts.name = "echo-server";
    opts.limits = limits;
    opts.secret = std::move(secret);
    opts.auth_timeout = auth_timeout;
    return opts;
  }

  explicit EchoServer(ServerOptions opts) {
    dispatcher.add<fbs::Echo>(fbs::MessageKind::Echo, "Echo", [this](const RequestContext& ctx, Message&& m) {
      const auto* req = m.as<fbs::Echo>();
      if (req->delay_ms() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(req->delay_ms()));
      if (ctx.one_way()) ++one_way_seen;
      flatbuffers::FlatBufferBuilder fbb;
      auto t = fbb.CreateString(req->text() ? req->text()->str() : "");
      fbb.Finish(fbs::CreateEchoReply(fbb, t));
      OutMessage out(fbs::MessageKind::EchoReply, fbb);
      for (auto& b : m.blobs) {
        auto owned = std::make_shared<ByteBuffer>(std::move(b));
        out.blobs.push_back(OutBlob{owned->data(), owned->size(), owned});
      }
      ctx.reply(std::move(out));
    });
    server = std::make_unique<RpcServer>(io.context(), dispatcher, opts);
    REQUIRE(server->listen("127.0.0.1", 0).is_ok());
  }
  ~EchoServer() {
    server->stop();
    io.stop();
  }
  uint16_t port() const { return server->port(); }
};

inline std::shared_ptr<RpcClient> connect_to(IoThreads& io, uint16_t port, std::chrono::milliseconds timeout = 5s,
                                      SecretPtr secret = nullptr) {
  ConnectOptions opts;
  opts.timeout = timeout;
  opts.secret = std::move(secret);
  auto c = RpcClient::connect(io.context(), "127.0.0.1", port, "echo-server", opts);
  REQUIRE(c.is_ok());
  return *c;
}

inline std::string reply_text(const Message& m) {
  REQUIRE(verify_payload<fbs::EchoReply>(m, "EchoReply").is_ok());
  return m.as<fbs::EchoReply>()->text()->str();
}

// A raw blocking socket for sending hand-made bytes.
struct RawPeer {
  boost::asio::io_context io;
  tcp::socket sock{io};
  explicit RawPeer(uint16_t port) { sock.connect({boost::asio::ip::make_address("127.0.0.1"), port}); }
  void send(const std::vector<uint8_t>& b) { boost::asio::write(sock, boost::asio::buffer(b)); }
  // Reads up to n bytes, waiting at most until `deadline` (poll, so a reply
  // that never comes fails the test instead of hanging it; a receive timeout
  // would not: Asio's blocking read polls again without one). Sets `ec` on
  // EOF, reset or expiry (timed_out).
  size_t read_some_until(void* buf, size_t n, std::chrono::steady_clock::time_point deadline,
                         boost::system::error_code& ec) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ec = boost::asio::error::timed_out;
        return 0;
      }
      pollfd pfd{sock.native_handle(), POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      const ssize_t got = ::recv(sock.native_handle(), buf, n, 0);
      if (got > 0) return static_cast<size_t>(got);
      if (got == 0) ec = boost::asio::error::eof;
      else if (errno != EINTR && errno != EAGAIN) ec = boost::system::error_code(errno, boost::system::system_category());
      if (ec) return 0;
    }
  }
  // Reads exactly n bytes by `deadline`; false (and `ec`) otherwise.
  bool read_until(void* buf, size_t n, std::chrono::steady_clock::time_point deadline, boost::system::error_code& ec) {
    auto* p = static_cast<uint8_t*>(buf);
    for (size_t got = 0; got < n;) {
      got += read_some_until(p + got, n - got, deadline, ec);
      if (ec) return false;
    }
    return true;
  }
  // True when the server closed the connection (read returns EOF/reset within 5 s).
  bool closed_by_server() {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    uint8_t buf[256];
    boost::system::error_code ec;
    while (!ec) read_some_until(buf, sizeof buf, deadline, ec);
    return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset;
  }
};

}  // namespace dgld::net::testing
