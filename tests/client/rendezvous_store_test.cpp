// The trainers' rendezvous store (client/rendezvous_store.h) over real
// loopback sockets: c10d::Store's operations, waits that a later set answers
// or that end in a clear error, and connections without the job's secret
// (a wrong secret, none, random bytes) refused while the store serves on.
#include <catch2/catch.hpp>

#include <future>
#include <random>
#include <thread>

#include "client/rendezvous_store.h"
#include "tests/common/echo_server.h"

using namespace dgld;
using namespace dgld::client;
using namespace std::chrono_literals;

namespace {

net::SecretPtr secret_of(uint8_t fill) { return std::make_shared<const net::Secret>(std::vector<uint8_t>(32, fill)); }
Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::unique_ptr<RendezvousServer> start_server(net::SecretPtr secret) {
  auto s = RendezvousServer::start("127.0.0.1", 0, std::move(secret));
  REQUIRE(s.is_ok());
  return std::move(*s);
}

std::unique_ptr<RendezvousClient> connect(const RendezvousServer& s, net::SecretPtr secret,
                                          std::chrono::milliseconds timeout = 5s) {
  auto c = RendezvousClient::connect("127.0.0.1", s.port(), std::move(secret), timeout);
  INFO(c.status().to_string());
  REQUIRE(c.is_ok());
  return std::move(*c);
}

}  // namespace

TEST_CASE("rendezvous store: c10d's operations", "[rendezvous]") {
  auto server = start_server(secret_of(1));
  auto a = connect(*server, secret_of(1)), b = connect(*server, secret_of(1));

  REQUIRE(a->set("k", bytes("v1")).is_ok());
  CHECK(*b->get("k") == bytes("v1"));
  CHECK(*a->add("n", 3) == 3);
  CHECK(*b->add("n", -1) == 2);
  CHECK(*a->get("n") == bytes("2"));
  // compare_set: swapped when the value matches; the current value otherwise.
  CHECK(*a->compare_set("k", bytes("v1"), bytes("v2")) == bytes("v2"));
  CHECK(*a->compare_set("k", bytes("v1"), bytes("v3")) == bytes("v2"));
  CHECK(*a->compare_set("fresh", {}, bytes("x")) == bytes("x"));
  CHECK(*a->compare_set("missing", bytes("e"), bytes("x")) == bytes("e"));
  CHECK(*a->check({"k", "n"}));
  CHECK_FALSE(*a->check({"k", "missing"}));
  CHECK(*a->num_keys() == 3);
  CHECK(*b->remove("fresh"));
  CHECK_FALSE(*b->remove("fresh"));
  CHECK(*a->num_keys() == 2);
  // add on a key that is not a number is an error naming the key.
  REQUIRE(a->set("text", bytes("abc")).is_ok());
  auto bad = a->add("text", 1);
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("'text' holds 'abc'"));
}

TEST_CASE("rendezvous store: a get and a wait are answered by a later set, or end in an error naming the keys",
          "[rendezvous]") {
  auto server = start_server(nullptr);
  auto a = connect(*server, nullptr), b = connect(*server, nullptr);
  auto got = std::async(std::launch::async, [&] { return a->get("late"); });
  auto waited = std::async(std::launch::async, [&] { return b->wait({"late", "later"}, 5s); });
  std::this_thread::sleep_for(200ms);
  auto c = connect(*server, nullptr);
  REQUIRE(c->set("late", bytes("here")).is_ok());
  auto r = got.get();
  REQUIRE(r.is_ok());
  CHECK(*r == bytes("here"));
  CHECK(waited.wait_for(300ms) == std::future_status::timeout);  // "later" is not set yet
  REQUIRE(*c->add("later", 1) == 1);
  CHECK(waited.get().is_ok());

  const auto t0 = std::chrono::steady_clock::now();
  Status st = a->wait({"never"}, 300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.code() == StatusCode::timeout);
  CHECK_THAT(st.message(), Catch::Contains("[never]") && Catch::Contains("within 300 ms"));
  CHECK(took < 3s);
}

TEST_CASE("rendezvous store: no secret, another secret or random bytes are refused; the store serves on",
          "[rendezvous]") {
  auto server = start_server(secret_of(1));
  auto good = connect(*server, secret_of(1));
  REQUIRE(good->set("k", bytes("v")).is_ok());

  auto wrong = RendezvousClient::connect("127.0.0.1", server->port(), secret_of(2), 2s);
  REQUIRE_FALSE(wrong.is_ok());
  auto none = RendezvousClient::connect("127.0.0.1", server->port(), nullptr, 2s);
  if (none.is_ok()) {  // connected, but no request is served before the handshake
    CHECK_FALSE((*none)->get("k").is_ok());
  }
  {
    net::testing::RawPeer raw(server->port());
    std::vector<uint8_t> junk(65536);
    std::mt19937 rng(7);
    for (auto& x : junk) x = static_cast<uint8_t>(rng());
    boost::system::error_code ec;
    raw.sock.write_some(boost::asio::buffer(junk), ec);  // may fail once the store closes the connection
    CHECK(raw.closed_by_server());
  }
  CHECK(server->refused() >= 1);
  CHECK(*good->get("k") == bytes("v"));
  auto again = connect(*server, secret_of(1));
  CHECK(*again->get("k") == bytes("v"));
}
