// Connection authentication (common/net/auth.h) over real loopback sockets:
// the handshake, clients without the secret or with another one, a wrong
// proof, a replayed handshake, silence, oversized frames before the
// handshake, and the secret file's checks.
#include "common/net/auth.h"

#include <sys/stat.h>

#include <fstream>

#include "common/file_util.h"
#include "tests/common/echo_server.h"
#include "tests/support/process.h"

using namespace dgld;
using namespace dgld::net;
using namespace dgld::net::testing;

namespace {

SecretPtr make_secret(const std::string& text) {
  return std::make_shared<const Secret>(std::vector<uint8_t>(text.begin(), text.end()));
}

OutMessage hello_with(const AuthNonce& nonce) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateAuthHello(fbb, fbb.CreateVector(nonce.data(), nonce.size())));
  return OutMessage(fbs::MessageKind::AuthHello, fbb);
}

OutMessage response_with(const AuthMac& mac) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateAuthResponse(fbb, fbb.CreateVector(mac.data(), mac.size())));
  return OutMessage(fbs::MessageKind::AuthResponse, fbb);
}

// The server nonce of an AuthChallenge reply.
AuthNonce server_nonce_of(const Message& m) {
  REQUIRE(m.kind() == static_cast<uint16_t>(fbs::MessageKind::AuthChallenge));
  REQUIRE(verify_payload<fbs::AuthChallenge>(m, "AuthChallenge").is_ok());
  AuthNonce n{};
  const auto* v = m.as<fbs::AuthChallenge>()->server_nonce();
  REQUIRE(v->size() == n.size());
  std::copy(v->begin(), v->end(), n.begin());
  return n;
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5s) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

}  // namespace

TEST_CASE("auth: a client with the job's secret is served") {
  auto secret = make_secret("correct horse battery staple");
  EchoServer server({}, secret);
  IoThreads io(1);
  auto client = connect_to(io, server.port(), 5s, secret);
  auto r = client->call(make_echo("after the handshake"), 5s);
  REQUIRE(r.is_ok());
  CHECK(reply_text(*r) == "after the handshake");
  CHECK(server.server->auth_failures() == 0);
}

TEST_CASE("auth: a client without the secret is refused before any request is served") {
  EchoServer server({}, make_secret("correct horse battery staple"));
  IoThreads io(1);
  auto client = connect_to(io, server.port());  // no secret: TCP connects
  auto r = client->call(make_echo("let me in"), 5s);
  REQUIRE_FALSE(r.is_ok());
  INFO(r.status().message());
  CHECK(r.status().message().find("authentication required") != std::string::npos);
  CHECK(r.status().message().find("DGLD_SECRET_FILE") != std::string::npos);
  CHECK(wait_until([&] { return !client->is_open(); }));
  CHECK(server.server->auth_failures() == 1);
  CHECK(server.server->requests_served() == 0);
}

TEST_CASE("auth: a client with another secret is refused, and so is a server with another one") {
  EchoServer server({}, make_secret("the job's own secret, 1"));
  IoThreads io(1);
  ConnectOptions opts;
  opts.timeout = 5s;
  opts.secret = make_secret("another job's secret, 2");
  auto c = RpcClient::connect(io.context(), "127.0.0.1", server.port(), "echo-server", opts);
  REQUIRE_FALSE(c.is_ok());
  INFO(c.status().message());
  // The server proves itself first: the client sees the mismatch.
  CHECK(c.status().message().find("authenticating with echo-server at 127.0.0.1:") != std::string::npos);
  CHECK(c.status().message().find("the server's proof is wrong") != std::string::npos);
  CHECK(server.server->requests_served() == 0);
}

TEST_CASE("auth: a wrong client proof is refused and logged") {
  auto secret = make_secret("correct horse battery staple");
  EchoServer server({}, secret);
  IoThreads io(1);
  auto client = connect_to(io, server.port());
  auto challenge = client->call(hello_with(random_nonce()), 5s);
  REQUIRE(challenge.is_ok());
  server_nonce_of(*challenge);
  AuthMac junk{};
  junk.fill(0xAB);
  auto r = client->call(response_with(junk), 5s);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("authentication failed: wrong proof") != std::string::npos);
  CHECK(wait_until([&] { return !client->is_open(); }));
  CHECK(server.server->auth_failures() == 1);
}

TEST_CASE("auth: a replayed handshake does not verify on a new connection") {
  auto secret = make_secret("correct horse battery staple");
  EchoServer server({}, secret);
  IoThreads io(1);
  const AuthNonce client_nonce = random_nonce();
  // A legitimate handshake, recorded by an eavesdropper.
  auto first = connect_to(io, server.port());
  auto c1 = first->call(hello_with(client_nonce), 5s);
  REQUIRE(c1.is_ok());
  const AuthMac recorded = auth_mac(*secret, kClientProofLabel, server_nonce_of(*c1), client_nonce);
  auto ok = first->call(response_with(recorded), 5s);
  REQUIRE(ok.is_ok());
  CHECK(ok->kind() == static_cast<uint16_t>(fbs::MessageKind::AuthOk));
  REQUIRE(first->call(make_echo("served"), 5s).is_ok());
  // The same two messages on a new connection: the server's nonce differs.
  auto second = connect_to(io, server.port());
  auto c2 = second->call(hello_with(client_nonce), 5s);
  REQUIRE(c2.is_ok());
  CHECK(server_nonce_of(*c2) != server_nonce_of(*c1));
  auto replay = second->call(response_with(recorded), 5s);
  REQUIRE_FALSE(replay.is_ok());
  CHECK(replay.status().message().find("replayed") != std::string::npos);
  auto after = second->call(make_echo("not served"), 2s);
  CHECK_FALSE(after.is_ok());
  CHECK(server.server->auth_failures() == 1);
}

TEST_CASE("auth: silence and oversized frames before the handshake close the connection") {
  EchoServer server({}, make_secret("correct horse battery staple"), 300ms);
  SECTION("a client that says nothing") {
    RawPeer peer(server.port());
    CHECK(peer.closed_by_server());
    CHECK(wait_until([&] { return server.server->auth_failures() == 1; }));
  }
  SECTION("a frame over the pre-authentication cap") {
    RawPeer peer(server.port());
    FrameHeader h;
    h.kind = static_cast<uint16_t>(fbs::MessageKind::AuthHello);
    h.request_id = 1;
    std::vector<uint8_t> big(kPreAuthFrameBytes + 1, 0);
    peer.send(encode_frame(h, big, {}));
    CHECK(peer.closed_by_server());
  }
}

TEST_CASE("auth: a server without a secret says so to a client that has one") {
  EchoServer server;
  IoThreads io(1);
  ConnectOptions opts;
  opts.timeout = 5s;
  opts.secret = make_secret("correct horse battery staple");
  auto c = RpcClient::connect(io.context(), "127.0.0.1", server.port(), "echo-server", opts);
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().message().find("was started without a secret") != std::string::npos);
}

TEST_CASE("auth: secret files") {
  dgld::testing::TempDir dir("dgld-auth");
  const auto path = dir.path() / "secret";
  REQUIRE(write_new_secret_file(path).is_ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto s = load_secret_file(path);
  REQUIRE(s.is_ok());
  CHECK((*s)->key().size() == 64);
  // Two new secrets differ.
  REQUIRE(write_new_secret_file(dir.path() / "other").is_ok());
  CHECK(read_file(path).value() != read_file(dir.path() / "other").value());

  ::chmod(path.c_str(), 0644);
  auto open = load_secret_file(path);
  REQUIRE_FALSE(open.is_ok());
  CHECK(open.status().message().find("has mode 644") != std::string::npos);
  CHECK(open.status().message().find("chmod 600") != std::string::npos);

  const auto short_path = dir.path() / "short";
  REQUIRE(write_file_atomic(short_path, "tiny\n", 0600).is_ok());
  CHECK(load_secret_file(short_path).status().message().find("holds 4 bytes") != std::string::npos);
  CHECK(load_secret_file(dir.path() / "missing").status().code() == StatusCode::not_found);
}
