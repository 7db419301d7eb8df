// Wire-layer tests over real loopback sockets: round trips, correlation,
// corrupt and oversized frames, peers that vanish, deadlines that expire.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>

#include "common/net/io_threads.h"
#include "common/net/rpc_client.h"
#include "common/net/rpc_server.h"
#include "schemas/rpc_generated.h"
#include "tests/common/echo_server.h"

using namespace dgld;
using namespace dgld::net;
using namespace dgld::net::testing;
using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> raw_echo_frame(const std::string& text) {
  OutMessage m = make_echo(text);
  FrameHeader h;
  h.kind = m.kind;
  h.request_id = 7;
  return encode_frame(h, {m.payload.data(), m.payload.size()}, {});
}

}  // namespace

TEST_CASE("rpc: echo round trip with blobs, including empty and large ones") {
  EchoServer server;
  IoThreads io(1);
  auto client = connect_to(io, server.port());
  OutMessage req = make_echo("hello");
  std::vector<uint8_t> big(48 << 20);
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<uint8_t>(i / 4096);
  req.blobs.push_back(OutBlob::from_vector(big));
  req.blobs.push_back(OutBlob{});
  req.blobs.push_back(OutBlob::copy_of("xyz", 3));
  auto r = client->call(std::move(req), 30s);
  REQUIRE(r.is_ok());
  CHECK(reply_text(*r) == "hello");
  REQUIRE(r->blobs.size() == 3);
  CHECK(r->blobs[0].size() == big.size());
  CHECK(std::memcmp(r->blobs[0].data(), big.data(), big.size()) == 0);
  CHECK(r->blobs[1].size() == 0);
  CHECK(std::string(reinterpret_cast<const char*>(r->blobs[2].data()), 3) == "xyz");
}

TEST_CASE("rpc: many concurrent calls are matched to their own replies") {
  EchoServer server;
  IoThreads io(2);
  auto client = connect_to(io, server.port());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string text = std::to_string(t) + ":" + std::to_string(i);
        auto r = client->call(make_echo(text, i % 50 == 0 ? 5 : 0), 10s);
        if (r.is_ok() && r->as<fbs::EchoReply>()->text()->str() == text) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(ok == 800);
}

TEST_CASE("rpc: frames sent from many threads at once, large ones included, arrive whole and in order") {
  // Senders that find the connection idle write on their own thread; the
  // others queue behind, and a write the socket cannot take at once goes on
  // from the I/O strand. Blobs of up to 3 MiB overflow the socket buffers.
  EchoServer server;
  IoThreads io(2);
  auto client = connect_to(io, server.port());
  auto fill = [](int t, int i, size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t k = 0; k < n; ++k) v[k] = static_cast<uint8_t>(k * 131 + static_cast<size_t>(t) * 17 + i);
    return v;
  };
  // 0 to 3 MiB, spread out; every fourth frame small.
  auto size_of = [](int t, int i) -> size_t {
    return i % 4 == 0 ? static_cast<size_t>(i + t) : (static_cast<size_t>(i) * 2654435761u + static_cast<size_t>(t) * 40503u) % (3u << 20);
  };
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<PendingCall, int>> in_flight;
      auto finish = [&](std::pair<PendingCall, int>& c) {
        const int i = c.second;
        auto r = client->wait(c.first, Clock::now() + 30s);
        const size_t n = size_of(t, i);
        const std::string text = std::to_string(t) + ":" + std::to_string(i);
        // No Catch2 assertion on this thread (reply_text has one): check by hand.
        if (r.is_ok() && verify_payload<fbs::EchoReply>(*r, "EchoReply").is_ok() &&
            r->as<fbs::EchoReply>()->text()->str() == text && r->blobs.size() == 1 && r->blobs[0].size() == n &&
            std::memcmp(r->blobs[0].data(), fill(t, i, n).data(), n) == 0) {
          ++ok;
        } else {
          ++bad;
        }
      };
      for (int i = 0; i < 24; ++i) {
        const size_t n = size_of(t, i);
        OutMessage m = make_echo(std::to_string(t) + ":" + std::to_string(i));
        m.blobs.push_back(OutBlob::from_vector(fill(t, i, n)));
        in_flight.emplace_back(client->start(std::move(m)), i);
        if (in_flight.size() == 3) {
          finish(in_flight.front());
          in_flight.erase(in_flight.begin());
        }
      }
      for (auto& c : in_flight) finish(c);
    });
  }
  for (auto& th : threads) th.join();
  CHECK(ok == 96);
  CHECK(bad == 0);
}

TEST_CASE("rpc: a reply that misses its deadline is a timeout naming the peer") {
  EchoServer server;
  IoThreads io(1);
  auto client = connect_to(io, server.port());
  auto start = Clock::now();
  auto r = client->call(make_echo("slow", 2000), 200ms);
  auto took = Clock::now() - start;
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::timeout);
  CHECK_THAT(r.status().message(), Catch::Contains("echo-server did not answer request"));
  CHECK(took < 1500ms);
  // The connection stays usable; the late reply is dropped.
  auto r2 = client->call(make_echo("after"), 10s);
  REQUIRE(r2.is_ok());
  CHECK(reply_text(*r2) == "after");
}

TEST_CASE("rpc: unknown kinds and unverifiable payloads get error replies") {
  EchoServer server;
  IoThreads io(1);
  auto client = connect_to(io, server.port());
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreatePing(fbb, 1));
  auto r = client->call(OutMessage(fbs::MessageKind::Ping, fbb), 5s);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::invalid_argument);
  CHECK_THAT(r.status().message(), Catch::Contains("echo-server: unknown message kind 2"));

  flatbuffers::FlatBufferBuilder junk;
  junk.Finish(fbs::CreatePing(junk, 1));
  OutMessage garbage(fbs::MessageKind::Echo, junk);
  std::memset(garbage.payload.data(), 0xff, 4);  // root offset points far outside the buffer
  auto r2 = client->call(std::move(garbage), 5s);
  REQUIRE_FALSE(r2.is_ok());
  CHECK(r2.status().code() == StatusCode::protocol_error);
  CHECK_THAT(r2.status().message(), Catch::Contains("is not a valid Echo FlatBuffer"));
  // The same connection still works.
  CHECK(client->call(make_echo("still here"), 5s).is_ok());
}

TEST_CASE("rpc: one-way requests get no reply") {
  EchoServer server;
  IoThreads io(1);
  auto client = connect_to(io, server.port());
  for (int i = 0; i < 10; ++i) REQUIRE(client->send_one_way(make_echo("fire")));
  REQUIRE(client->call(make_echo("sync"), 5s).is_ok());  // ordered after the one-way frames
  for (int i = 0; i < 100 && server.one_way_seen < 10; ++i) std::this_thread::sleep_for(10ms);
  CHECK(server.one_way_seen == 10);
}

TEST_CASE("rpc: corrupt frames close only the offending connection") {
  EchoServer server;
  IoThreads io(1);
  auto good = connect_to(io, server.port());

  SECTION("wrong magic") {
    RawPeer p(server.port());
    auto f = raw_echo_frame("x");
    f[0] = 'Z';
    p.send(f);
    CHECK(p.closed_by_server());
  }
  SECTION("wrong protocol version") {
    RawPeer p(server.port());
    auto f = raw_echo_frame("x");
    f[4] = 9;
    p.send(f);
    CHECK(p.closed_by_server());
  }
  SECTION("random garbage") {
    RawPeer p(server.port());
    std::vector<uint8_t> g(100, 0xAB);
    p.send(g);
    CHECK(p.closed_by_server());
  }
  SECTION("truncated stream: peer disconnects mid-frame") {
    auto f = raw_echo_frame("truncated");
    {
      RawPeer p(server.port());
      p.send(std::vector<uint8_t>(f.begin(), f.begin() + 40));
    }  // closes with the frame half sent
    std::this_thread::sleep_for(100ms);
  }
  SECTION("a well-formed raw frame is answered") {
    RawPeer p(server.port());
    p.send(raw_echo_frame("raw"));
    uint8_t hdr[kFrameHeaderSize];
    boost::system::error_code ec;
    REQUIRE(p.read_until(hdr, sizeof hdr, Clock::now() + 5s, ec));
    auto h = decode_header(std::span<const uint8_t, kFrameHeaderSize>(hdr), FrameLimits{});
    REQUIRE(h.is_ok());
    CHECK(h->request_id == 7);
    CHECK((h->flags & kFlagResponse) != 0);
  }
  auto r = good->call(make_echo("unaffected"), 5s);
  REQUIRE(r.is_ok());
  CHECK(reply_text(*r) == "unaffected");
}

TEST_CASE("rpc: a frame over the server's size cap closes that connection") {
  FrameLimits limits;
  limits.max_frame_bytes = 1 << 20;
  EchoServer server(limits);
  IoThreads io(1);
  auto client = connect_to(io, server.port());
  OutMessage req = make_echo("too big");
  req.blobs.push_back(OutBlob::from_vector(std::vector<uint8_t>(2 << 20)));
  auto r = client->call(std::move(req), 5s);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::closed);
  CHECK_FALSE(client->is_open());
  auto other = connect_to(io, server.port());
  CHECK(other->call(make_echo("small"), 5s).is_ok());
}

TEST_CASE("rpc: a server that dies fails outstanding calls, naming it") {
  auto server = std::make_unique<EchoServer>();
  IoThreads io(1);
  auto client = connect_to(io, server->port());
  PendingCall c = client->start(make_echo("pending", 1000));
  std::this_thread::sleep_for(100ms);
  server.reset();  // closes every connection
  auto r = client->wait(c, Clock::now() + 5s);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::closed);
  CHECK_THAT(r.status().message(), Catch::Contains("echo-server"));
  // Later calls fail at once with the same reason.
  auto r2 = client->call(make_echo("after"), 5s);
  REQUIRE_FALSE(r2.is_ok());
  CHECK(r2.status().code() == StatusCode::closed);
}

TEST_CASE("rpc: connecting to nothing fails after the deadline with a clear message") {
  uint16_t port;
  {
    boost::asio::io_context tmp;
    tcp::acceptor a(tmp, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  IoThreads io(1);
  ConnectOptions opts;
  opts.timeout = 600ms;
  auto start = Clock::now();
  auto r = RpcClient::connect(io.context(), "127.0.0.1", port, "graph-server 3", opts);
  auto took = Clock::now() - start;
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::timeout);
  CHECK_THAT(r.status().message(), Catch::Contains("cannot connect to graph-server 3 at 127.0.0.1:" +
                                                   std::to_string(port)));
  CHECK_THAT(r.status().message(), Catch::Contains("attempts"));
  CHECK(took >= 300ms);
  CHECK(took < 3s);
}

TEST_CASE("rpc: connect retries until a late server comes up") {
  uint16_t port;
  {
    boost::asio::io_context tmp;
    tcp::acceptor a(tmp, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  IoThreads cio(1);
  std::unique_ptr<IoThreads> sio;
  Dispatcher d;
  std::unique_ptr<RpcServer> server;
  Status listened;  // checked on the test's thread (Catch's assertions are not thread-safe)
  std::thread late([&] {
    std::this_thread::sleep_for(400ms);
    sio = std::make_unique<IoThreads>(1);
    server = std::make_unique<RpcServer>(sio->context(), d, ServerOptions{});
    listened = server->listen("127.0.0.1", port);
  });
  ConnectOptions opts;
  opts.timeout = 5s;
  auto r = RpcClient::connect(cio.context(), "127.0.0.1", port, "late-server", opts);
  late.join();
  REQUIRE(listened.is_ok());
  CHECK(r.is_ok());
  server->stop();
}

TEST_CASE("rpc: a port already in use is a clear error") {
  EchoServer first;
  IoThreads io(1);
  Dispatcher d;
  ServerOptions opts;
  opts.name = "graph-server 0";
  RpcServer second(io.context(), d, opts);
  Status st = second.listen("127.0.0.1", first.port());
  REQUIRE_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Catch::Contains("graph-server 0: cannot listen on 127.0.0.1:" +
                                           std::to_string(first.port())));
}

TEST_CASE("rpc: a client that does not read its replies is held back, others are served") {
  ServerOptions opts = EchoServer::make_options();
  opts.max_queued_bytes_per_connection = 1 << 20;
  // One request in hand at a time, so the bound below is exact: a request is
  // read only while less than the cap is queued, and adds one reply. (With
  // more in hand, requests read while earlier replies still sat in the
  // kernel's socket buffer may each add a reply once the buffer fills.)
  opts.max_pending_per_connection = 1;
  EchoServer server(opts);
  // 9 requests, each echoing 1 MiB back, and no reply read for now. They are
  // sent from a thread: once the server stops reading, the kernel's buffers
  // (their size depends on TCP autotuning) may not hold the rest, and the
  // sends then wait until the replies below are read.
  RawPeer greedy(server.port());
  constexpr int kRequests = 9;
  std::thread sender([&] {
    std::vector<uint8_t> blob(1 << 20, 7);
    for (int i = 0; i < kRequests; ++i) {
      OutMessage m = make_echo("big");
      FrameHeader h;
      h.kind = m.kind;
      h.request_id = static_cast<uint64_t>(i + 1);
      h.blob_count = 1;
      const auto frame = encode_frame(h, {m.payload.data(), m.payload.size()}, {std::span<const uint8_t>(blob)});
      boost::system::error_code send_ec;
      boost::asio::write(greedy.sock, boost::asio::buffer(frame), send_ec);
      if (send_ec) return;  // the read below failed and shut the socket down
    }
  });
  std::this_thread::sleep_for(500ms);
  // The server stopped reading: its queue is bounded by the cap plus one reply.
  CHECK(server.server->queued_bytes() <= (2 << 20) + 4096);
  CHECK(server.server->read_pauses() > 0);
  // Another client is served meanwhile.
  IoThreads io(1);
  auto other = connect_to(io, server.port());
  auto r = other->call(make_echo("still here"), 5s);
  REQUIRE(r.is_ok());
  CHECK(reply_text(*r) == "still here");
  // Once the greedy client reads, every reply arrives (a read that waits
  // 30 s fails instead of hanging).
  const auto deadline = Clock::now() + 30s;
  size_t got = 0;
  std::vector<uint8_t> buf(1 << 16);
  boost::system::error_code ec;
  while (!ec && got < size_t{kRequests} << 20) got += greedy.read_some_until(buf.data(), buf.size(), deadline, ec);
  if (ec) ::shutdown(greedy.sock.native_handle(), SHUT_RDWR);  // unblocks a sender stuck on a stopped server
  sender.join();
  REQUIRE_FALSE(ec);
  CHECK(got >= size_t{kRequests} << 20);
}

// While a large blob is read, the receiver asks the kernel to wake it only
// once enough bytes have arrived (SO_RCVLOWAT); it must never ask for more
// than the frame still owes, and must ask for 1 byte again before waiting
// for the next frame, or a reader would wait for bytes that never come.
TEST_CASE("rpc: a large blob arriving in slow pieces is read whole, and a small frame after it is served") {
  EchoServer server;
  RawPeer p(server.port());
  std::vector<uint8_t> blob((1 << 20) + 12345);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(i * 131 + 7);
  OutMessage m = make_echo("slow");
  FrameHeader h;
  h.kind = m.kind;
  h.request_id = 1;
  h.blob_count = 1;
  const auto big = encode_frame(h, {m.payload.data(), m.payload.size()}, {std::span<const uint8_t>(blob)});
  // Pieces that leave 400 KiB, then 100 KiB (under any sensible low-water
  // mark), then nothing of the frame outstanding.
  const size_t cuts[] = {0, big.size() - (400 << 10), big.size() - (100 << 10), big.size()};
  for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
    p.send(std::vector<uint8_t>(big.begin() + static_cast<ptrdiff_t>(cuts[i]), big.begin() + static_cast<ptrdiff_t>(cuts[i + 1])));
    std::this_thread::sleep_for(150ms);
  }
  auto small = raw_echo_frame("after");
  p.send(small);

  // A reply that does not come within 10 s fails the test instead of hanging it.
  const auto deadline = Clock::now() + 10s;
  auto read_frame = [&](std::vector<uint8_t>& blob0) -> Result<FrameHeader> {
    uint8_t hdr[kFrameHeaderSize];
    boost::system::error_code ec;
    if (!p.read_until(hdr, sizeof hdr, deadline, ec)) return internal_error("reading a reply header: " + ec.message());
    DGLD_ASSIGN_OR_RETURN(FrameHeader fh, decode_header(std::span<const uint8_t, kFrameHeaderSize>(hdr), FrameLimits{}));
    std::vector<uint8_t> table(8ull * fh.blob_count);
    p.read_until(table.data(), table.size(), deadline, ec);
    DGLD_ASSIGN_OR_RETURN(auto lengths, decode_blob_table(table, fh, FrameLimits{}));
    std::vector<uint8_t> payload(fh.payload_len);
    p.read_until(payload.data(), payload.size(), deadline, ec);
    blob0.clear();
    for (size_t i = 0; i < lengths.size() && !ec; ++i) {
      std::vector<uint8_t> b(lengths[i]);
      p.read_until(b.data(), b.size(), deadline, ec);
      if (i == 0) blob0 = std::move(b);
    }
    if (ec) return internal_error("reading a reply: " + ec.message());
    return fh;
  };
  std::vector<uint8_t> echoed;
  auto first = read_frame(echoed);
  REQUIRE(first.is_ok());
  CHECK(first->request_id == 1);
  CHECK(echoed == blob);
  auto second = read_frame(echoed);
  REQUIRE(second.is_ok());
  CHECK(second->request_id == 7);
}

TEST_CASE("rpc: peers of another protocol version refuse each other, both naming both versions") {
  const std::string older = std::to_string(kProtocolVersion - 1), ours = std::to_string(kProtocolVersion);

  SECTION("a request of an older build gets an error reply naming both versions, then the connection closes") {
    EchoServer server;
    RawPeer p(server.port());
    auto f = raw_echo_frame("from an older build");
    f[4] = static_cast<uint8_t>(kProtocolVersion - 1);
    p.send(f);
    uint8_t hdr[kFrameHeaderSize];
    boost::system::error_code ec;
    REQUIRE(p.read_until(hdr, sizeof hdr, Clock::now() + 5s, ec));
    auto h = decode_header(std::span<const uint8_t, kFrameHeaderSize>(hdr), FrameLimits{});
    REQUIRE(h.is_ok());  // the refusal is in the server's own version
    CHECK(h->request_id == 7);
    CHECK((h->flags & kFlagError) != 0);
    std::vector<uint8_t> payload(h->payload_len);
    REQUIRE(p.read_until(payload.data(), payload.size(), Clock::now() + 5s, ec));
    Message m;
    m.header = *h;
    m.payload = ByteBuffer(payload.size());
    std::memcpy(m.payload.data(), payload.data(), payload.size());
    const Status st = status_from_error_reply(m, "echo-server");
    CHECK_THAT(st.message(), Catch::Contains("protocol version " + older) &&
                                 Catch::Contains("this build speaks " + ours));
    CHECK(p.closed_by_server());
  }

  SECTION("a reply of another build fails the call with both versions") {
    // A "server" that answers the first request with a frame of version + 1.
    boost::asio::io_context raw_io;
    tcp::acceptor acceptor(raw_io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    const uint16_t port = acceptor.local_endpoint().port();
    std::thread fake([&] {
      tcp::socket s(raw_io);
      acceptor.accept(s);
      uint8_t hdr[kFrameHeaderSize];
      boost::asio::read(s, boost::asio::buffer(hdr));
      auto h = decode_header(std::span<const uint8_t, kFrameHeaderSize>(hdr), FrameLimits{});
      std::vector<uint8_t> rest(8ull * h->blob_count + h->payload_len);
      boost::asio::read(s, boost::asio::buffer(rest));
      OutMessage reply = make_echo("from a newer build");
      FrameHeader rh;
      rh.version = static_cast<uint16_t>(kProtocolVersion + 1);
      rh.kind = reply.kind;
      rh.flags = kFlagResponse;
      rh.request_id = h->request_id;
      auto bytes = encode_frame(rh, {reply.payload.data(), reply.payload.size()}, {});
      boost::system::error_code ignored;
      boost::asio::write(s, boost::asio::buffer(bytes), ignored);
      std::vector<uint8_t> drain(64);
      s.read_some(boost::asio::buffer(drain), ignored);  // until the client closes
    });
    IoThreads io(1);
    auto c = connect_to(io, port);
    auto r = c->call(make_echo("hello"), 5s);
    fake.join();
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("protocol version " + std::to_string(kProtocolVersion + 1)) &&
                                         Catch::Contains("this build speaks " + ours));
  }
}
