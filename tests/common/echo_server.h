#pragma once
// Test support for the wire layer: an echo server on a free loopback port
// (optionally authenticating), a client connected to it, and a raw socket
// for hand-made bytes. Shared by the rpc and auth tests.
#include <catch2/catch.hpp>

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
  // True when the server closed the connection (read returns EOF/reset within 5 s).
  bool closed_by_server() {
    sock.non_blocking(false);
    struct timeval tv{5, 0};
    setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t buf[256];
    boost::system::error_code ec;
    for (;;) {
      size_t n = sock.read_some(boost::asio::buffer(buf), ec);
      if (ec) return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset;
      if (n == 0) return true;
    }
  }
};

}  // namespace dgld::net::testing
