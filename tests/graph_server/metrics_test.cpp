// --metrics-port of the real daemons over loopback: a graph-server answers
// GET /metrics with its counters in Prometheus' text format, 404 / 405 for
// anything else, refuses garbage without missing a request; a training
// trainer-host (standalone) answers with its epoch, step and loss.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fstream>
#include <random>
#include <thread>

#include "client/server_api.h"
#include "common/net/io_threads.h"
#include "tests/support/http_exchange.h"
#include "tests/support/partitioned_graph.h"
#include "tests/support/process.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

PartitionedGraph& dataset() {
  static PartitionedGraph d("sbm:nodes=3000,avg_degree=8,classes=4,feat_dim=8,seed=5", 1, "dgld-metrics-data");
  return d;
}

HttpExchange scrape(uint16_t port) { return http_exchange(port, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"); }

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("graph-server --metrics-port: /metrics, 404, 405 and garbage over loopback") {
  TempDir dir("dgld-metrics");
  const uint16_t base = free_port_range(12);
  const uint16_t mport = base + 5;
  const fs::path ip = dir.path() / "ip_config.txt";
  std::ofstream(ip) << "127.0.0.1 " << base << "\n";
  const std::vector<std::string> args = {graph_server_bin(), "--part-config", dataset().json.string(), "--ip-config",
                                         ip.string(), "--server-id", "0", "--metrics-port", std::to_string(mport)};
  Process server = Process::start(args, dir.path() / "server.log");
  REQUIRE(server.wait_for_log("Prometheus metrics at http://127.0.0.1:" + std::to_string(mport) + "/metrics", 60s));

  net::IoThreads io(1);
  auto conn = client::ServerConnection::connect(io.context(), "127.0.0.1", base, 0, 10s, 10s);
  REQUIRE(conn.is_ok());
  REQUIRE((*conn)->stats().is_ok());
  REQUIRE((*conn)->graph_info().is_ok());

  auto ok = scrape(mport);
  INFO(ok.answer);
  REQUIRE(ok.status() == 200);
  CHECK(has(ok.answer, "Content-Type: text/plain; version=0.0.4"));
  const std::string body = ok.body();
  const std::string l = R"(machine="0",server="0")";
  CHECK(has(body, "# TYPE dgld_server_requests_total counter\n"));
  CHECK(has(body, "dgld_server_requests_total{" + l + R"(,kind="Stats"} 1)" "\n"));
  CHECK(has(body, "dgld_server_requests_total{" + l + R"(,kind="GraphInfo"} 1)" "\n"));
  CHECK(has(body, "dgld_server_request_latency_seconds{" + l + R"(,kind="GraphInfo",quantile="0.99"} )"));
  CHECK(has(body, "dgld_server_connections{" + l + "} 1\n"));
  CHECK(has(body, "dgld_server_registered_clients{" + l + "} 0\n"));
  CHECK(has(body, "dgld_server_received_bytes_total{" + l + "} "));
  CHECK(has(body, "dgld_server_memory_bytes{" + l + R"(,kind="rss"} )"));
  CHECK(has(body, "dgld_server_memory_bytes{" + l + R"(,kind="partition"} )"));
  CHECK(has(body, "dgld_server_traffic_received_bytes_total{" + l + R"(,client_machine="unknown",kind="Stats"} )"));

  CHECK(http_exchange(mport, "GET /other HTTP/1.1\r\n\r\n").status() == 404);
  CHECK(http_exchange(mport, "PUT /metrics HTTP/1.1\r\n\r\n").status() == 405);
  // Garbage: random bytes, a dgld frame's worth of binary, and an endless
  // header line. Each is refused; the server keeps serving both ports.
  std::mt19937 rng(7);
  std::string noise(64 << 10, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  const auto refused = http_exchange(mport, noise, 5s);
  CHECK(refused.connected);
  CHECK(refused.closed_by_peer);
  CHECK(refused.status() != 200);
  CHECK(http_exchange(mport, "GET /metrics HTTP/1.1\r\nX-Long: " + std::string(100000, 'x'), 5s).status() == 431);
  CHECK(server.running());
  REQUIRE((*conn)->stats().is_ok());
  auto again = scrape(mport);
  REQUIRE(again.status() == 200);
  CHECK(has(again.body(), "dgld_server_requests_total{" + l + R"(,kind="Stats"} 2)" "\n"));

  conn->reset();
  server.signal(SIGTERM);
  CHECK(server.wait(10s) == 0);

  // A port another process holds: the server does not start, and says why.
  Process holder = Process::start(args, dir.path() / "holder.log");
  REQUIRE(holder.wait_for_log("Prometheus metrics at", 60s));
  std::ofstream(dir.path() / "ip2.txt") << "127.0.0.1 " << base + 2 << "\n";
  auto taken_args = args;
  taken_args[4] = (dir.path() / "ip2.txt").string();
  Process taken = Process::start(taken_args, dir.path() / "taken.log");
  CHECK(taken.wait(60s) == 1);
  CHECK(has(taken.log(), "--metrics-port"));
  CHECK(has(taken.log(), "127.0.0.1:" + std::to_string(mport)));
  holder.signal(SIGTERM);
  CHECK(holder.wait(10s) == 0);
}

TEST_CASE("trainer-host --metrics-port: epoch, step and loss while it trains") {
  TempDir dir("dgld-metrics-trainer");
  const uint16_t mport = free_port_range(1);
  Process trainer = Process::start({trainer_host_bin(), "--standalone", "--part-config", dataset().json.string(),
                                    "--num-epochs", "400", "--eval-every", "-1", "--batch-size", "2", "--log-every", "0",
                                    "--measure-peak", "false", "--metrics-port", std::to_string(mport),
                                    "--num-threads", "1"},
                                   dir.path() / "trainer.log", {{"LOCAL_RANK", "0"}});
  REQUIRE(trainer.wait_for_log("Prometheus metrics at http://127.0.0.1:" + std::to_string(mport), 60s));
  // Until two epochs are done (or a deadline): the live figures move.
  std::string body;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < deadline && trainer.running()) {
    auto x = scrape(mport);
    REQUIRE(x.status() == 200);
    body = x.body();
    if (has(body, R"(dgld_trainer_epochs_total{machine="0",rank="0"} 2)")) break;
    std::this_thread::sleep_for(100ms);
  }
  INFO(body);
  INFO(trainer.log());
  const std::string l = R"(machine="0",rank="0")";
  CHECK(has(body, "dgld_trainer_training{" + l + "} 1\n"));
  CHECK(has(body, "dgld_trainer_info{" + l + R"(,graph="g",model="sage"} 1)"));
  CHECK(has(body, "dgld_trainer_epoch{" + l + "} "));
  CHECK(has(body, "dgld_trainer_step{" + l + "} "));
  CHECK(has(body, "dgld_trainer_loss{" + l + "} "));
  CHECK(has(body, "dgld_trainer_seeds_per_second{" + l + "} "));
  CHECK(has(body, "dgld_trainer_last_epoch_loss{" + l + "} "));
  CHECK(has(body, "dgld_trainer_last_epoch_stage_seconds{" + l + R"(,kind="compute"} )"));
  CHECK(has(body, "dgld_trainer_memory_bytes{" + l + R"(,kind="rss"} )"));
  CHECK(http_exchange(mport, "GET / HTTP/1.1\r\n\r\n").status() == 404);
  trainer.signal(SIGTERM);
  trainer.wait(20s);
}
