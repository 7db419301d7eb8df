// Prometheus text rendering (common/prometheus.h) and the --metrics-port HTTP
// endpoint (common/net/metrics_http.h) over loopback.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cmath>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/net/io_threads.h"
#include "common/net/metrics_http.h"
#include "common/prometheus.h"
#include "tests/support/http_exchange.h"

using namespace dgld;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// Every line is a comment (# HELP / # TYPE) or `name{labels} value` as
// version 0.0.4 has them; every family's samples follow its TYPE line.
void check_exposition(const std::string& text) {
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\})? (-?[0-9.e+-]+|NaN|[+-]Inf)$)");
  static const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)$)");
  std::istringstream in(text);
  std::string line, family;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    INFO(line);
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (std::regex_match(line, m, type)) {
      family = m[1];
      CHECK(seen.insert(family).second);  // one TYPE line per family
      continue;
    }
    REQUIRE(std::regex_match(line, m, sample));
    CHECK(m[1] == family);
  }
  CHECK(!text.empty());
  CHECK(text.back() == '\n');
}

json server_stats() {
  return json::parse(R"({"server_id":1,"machine_id":0,"uptime_s":12.5,"connections":3,"registered_clients":2,
    "bytes_in":123456789012,"bytes_out":42,"queued_reply_bytes":0,"read_pauses":1,"refused_connections":4,
    "rss_bytes":1000,"memory":{"rss_bytes":1000,"peak_rss_bytes":2000,"anon_bytes":-1,"partition_bytes":77,
    "tensor_bytes":5},"traffic":{"1":{"KvPull":{"frames_out":2,"bytes_out":300,"frames_in":2,"bytes_in":90}},
    "unknown":{"Ping":{"frames_out":1,"bytes_out":20,"frames_in":1,"bytes_in":20}}},
    "requests":{"KvPull":{"count":10,"errors":1,"p50_us":64.0,"p99_us":1024.0},
                "SampleNeighbors":{"count":0,"errors":0,"p50_us":0.0,"p99_us":0.0}}})");
}

}  // namespace

TEST_CASE("prometheus: values and label values as the text format writes them") {
  CHECK(prom::format_value(3) == "3");
  CHECK(prom::format_value(-2) == "-2");
  CHECK(prom::format_value(0.25) == "0.25");
  CHECK(prom::format_value(1e-6) == "1e-06");
  CHECK(prom::format_value(std::nan("")) == "NaN");
  CHECK(prom::format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(prom::format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(prom::escape_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  CHECK(prom::sample_name("x", {}) == "x");
  CHECK(prom::sample_name("x", {{"a", "1"}, {"b", "q\""}}) == "x{a=\"1\",b=\"q\\\"\"}");

  prom::Exposition e;
  e.add("dgld_a", "gauge", "first\nline", {{"k", "1"}}, 1.5);
  e.add_int("dgld_b", "counter", "b", {}, 9007199254740993LL);  // 2^53 + 1 stays exact
  e.add("dgld_a", "gauge", "ignored", {{"k", "2"}}, 2);
  CHECK(e.text() ==
        "# HELP dgld_a first\\nline\n# TYPE dgld_a gauge\ndgld_a{k=\"1\"} 1.5\ndgld_a{k=\"2\"} 2\n"
        "# HELP dgld_b b\n# TYPE dgld_b counter\ndgld_b 9007199254740993\n");
  CHECK(e.num_samples() == 3);
}

TEST_CASE("prometheus: a graph-server's stats JSON becomes dgld_server_* families") {
  const std::string t = prom::graph_server_text(server_stats(), {{"machine", "0"}, {"server", "1"}});
  check_exposition(t);
  const std::string l = R"(machine="0",server="1")";
  CHECK(t.find("# TYPE dgld_server_requests_total counter\n") != std::string::npos);
  CHECK(t.find("dgld_server_requests_total{" + l + R"(,kind="KvPull"} 10)" "\n") != std::string::npos);
  CHECK(t.find("dgld_server_request_errors_total{" + l + R"(,kind="KvPull"} 1)" "\n") != std::string::npos);
  CHECK(t.find("dgld_server_request_latency_seconds{" + l + R"(,kind="KvPull",quantile="0.99"} 0.001024)") !=
        std::string::npos);
  CHECK(t.find("dgld_server_received_bytes_total{" + l + "} 123456789012\n") != std::string::npos);
  CHECK(t.find("dgld_server_connections{" + l + "} 3\n") != std::string::npos);
  CHECK(t.find("dgld_server_registered_clients{" + l + "} 2\n") != std::string::npos);
  CHECK(t.find("dgld_server_refused_connections_total{" + l + "} 4\n") != std::string::npos);
  CHECK(t.find("dgld_server_memory_bytes{" + l + R"(,kind="peak_rss"} 2000)") != std::string::npos);
  CHECK(t.find("dgld_server_memory_bytes{" + l + R"(,kind="partition"} 77)") != std::string::npos);
  CHECK(t.find(R"(kind="anon")") == std::string::npos);  // -1: unknown, left out
  CHECK(t.find("dgld_server_traffic_sent_bytes_total{" + l + R"(,client_machine="1",kind="KvPull"} 300)") !=
        std::string::npos);
  CHECK(t.find(R"(client_machine="unknown")") != std::string::npos);
  CHECK(t.find("dgld_server_uptime_seconds{" + l + "} 12.5\n") != std::string::npos);

  // What a server without a coordinator or traffic sends: fewer families, still valid.
  const std::string bare = prom::graph_server_text(json::parse(R"({"uptime_s":1,"bytes_in":0})"), {});
  check_exposition(bare);
  CHECK(bare.find("registered_clients") == std::string::npos);
}

TEST_CASE("prometheus: a trainer's live figures become dgld_trainer_* families") {
  const json live = json::parse(R"({"rank":3,"machine_id":1,"num_trainers":4,"graph_name":"g\"x","model":"sage",
    "uptime_s":5,"training":true,"epoch":2,"step":17,"steps_per_epoch":40,"steps_done":97,"epochs_done":2,
    "loss":0.75,"seeds_per_s":12000.5,"evals":1,"val_acc":0.5,"test_acc":0.25,
    "last_epoch":{"epoch":1,"loss":0.9,"train_acc":0.6,"time_s":3.5,"sample_s":1,"fetch_s":0.5,"compute_s":1.5,
                  "allreduce_s":0.25,"wait_s":0.1,"seeds_per_s":11000,"network_bytes":1000000},
    "memory":{"rss_bytes":100,"peak_rss_bytes":200,"model_bytes":-1}})");
  const std::string t = prom::trainer_text(live, {{"machine", "1"}, {"rank", "3"}});
  check_exposition(t);
  const std::string l = R"(machine="1",rank="3")";
  CHECK(t.find("dgld_trainer_info{" + l + R"(,graph="g\"x",model="sage"} 1)") != std::string::npos);
  CHECK(t.find("dgld_trainer_epoch{" + l + "} 2\n") != std::string::npos);
  CHECK(t.find("dgld_trainer_step{" + l + "} 17\n") != std::string::npos);
  CHECK(t.find("dgld_trainer_steps_total{" + l + "} 97\n") != std::string::npos);
  CHECK(t.find("dgld_trainer_loss{" + l + "} 0.75\n") != std::string::npos);
  CHECK(t.find("dgld_trainer_seeds_per_second{" + l + "} 12000.5\n") != std::string::npos);
  CHECK(t.find("dgld_trainer_training{" + l + "} 1\n") != std::string::npos);
  CHECK(t.find("dgld_trainer_last_epoch_stage_seconds{" + l + R"(,kind="allreduce"} 0.25)") != std::string::npos);
  CHECK(t.find("dgld_trainer_last_epoch_network_bytes{" + l + "} 1000000\n") != std::string::npos);
  CHECK(t.find("dgld_trainer_test_accuracy{" + l + "} 0.25\n") != std::string::npos);
  CHECK(t.find("dgld_trainer_memory_bytes{" + l + R"(,kind="rss"} 100)") != std::string::npos);
  CHECK(t.find(R"(kind="model")") == std::string::npos);

  // Before the first epoch: no last_epoch, no accuracy.
  const std::string early = prom::trainer_text(json::parse(R"({"training":false,"uptime_s":0.5})"), {{"rank", "0"}});
  check_exposition(early);
  CHECK(early.find("dgld_trainer_training{rank=\"0\"} 0\n") != std::string::npos);
  CHECK(early.find("accuracy") == std::string::npos);
}

TEST_CASE("metrics endpoint: GET /metrics, 404, 405, garbage, oversized and slow requests") {
  net::IoThreads io(2);
  std::atomic<int> renders{0};
  net::MetricsHttpOptions o;
  o.deadline = 800ms;
  o.max_request_bytes = 1024;
  net::MetricsHttpServer server(io.context(), [&] {
    ++renders;
    return std::string("# HELP dgld_x x\n# TYPE dgld_x gauge\ndgld_x 1\n");
  }, o);
  REQUIRE(server.listen("127.0.0.1", 0).is_ok());
  const uint16_t port = server.port();

  auto ok = testing::http_exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  CHECK(ok.status() == 200);
  CHECK(ok.answer.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(ok.body() == "# HELP dgld_x x\n# TYPE dgld_x gauge\ndgld_x 1\n");
  CHECK(ok.closed_by_peer);
  CHECK(testing::http_exchange(port, "GET /metrics?x=1 HTTP/1.0\n\n").status() == 200);
  CHECK(testing::http_exchange(port, "GET / HTTP/1.1\r\n\r\n").status() == 404);
  CHECK(testing::http_exchange(port, "GET /metricsx HTTP/1.1\r\n\r\n").status() == 404);
  auto post = testing::http_exchange(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  CHECK(post.status() == 405);
  CHECK(post.answer.find("Allow: GET") != std::string::npos);
  CHECK(testing::http_exchange(port, "HEAD /metrics HTTP/1.1\r\n\r\n").status() == 405);
  CHECK(testing::http_exchange(port, "GET /metrics SPDY/3\r\n\r\n").status() == 400);

  // Binary garbage is refused at once, not at the deadline.
  const auto t0 = std::chrono::steady_clock::now();
  auto garbage = testing::http_exchange(port, std::string("\x16\x03\x01\x00\xff\x00\x01garbage", 14));
  CHECK(garbage.status() == 400);
  CHECK(std::chrono::steady_clock::now() - t0 < 500ms);
  // A head that never ends is cut off at max_request_bytes.
  auto big = testing::http_exchange(port, "GET /metrics HTTP/1.1\r\nX: " + std::string(4096, 'a'));
  CHECK(big.status() == 431);
  // A client that sends half a request and waits is closed at the deadline.
  const auto t1 = std::chrono::steady_clock::now();
  auto slow = testing::http_exchange(port, "GET /metr", 5s);
  CHECK(slow.answer.empty());
  CHECK(slow.closed_by_peer);
  CHECK(std::chrono::steady_clock::now() - t1 < 3s);

  const auto c = server.counts();
  CHECK(c.served == 2);
  CHECK(c.not_found == 2);
  CHECK(c.bad_method == 2);
  CHECK(c.bad_request == 3);
  CHECK(c.timed_out == 1);
  CHECK(renders == 2);
  // Still serving after all that.
  CHECK(testing::http_exchange(port, "GET /metrics HTTP/1.1\r\n\r\n").status() == 200);

  server.stop();
  const int before = renders;
  auto after = testing::http_exchange(port, "GET /metrics HTTP/1.1\r\n\r\n", 2s);
  CHECK(after.status() != 200);
  CHECK(renders == before);
}

TEST_CASE("metrics endpoint: connections over the cap are closed; a taken port is a clear error") {
  net::IoThreads io(1);
  net::MetricsHttpOptions o;
  o.max_connections = 2;
  o.deadline = 1500ms;
  net::MetricsHttpServer server(io.context(), [] { return std::string("dgld_x 1\n"); }, o);
  REQUIRE(server.listen("127.0.0.1", 0).is_ok());
  // Two idle connections hold both places; the third is closed on accept.
  std::thread a([&] { testing::http_exchange(server.port(), "", 3s); });
  std::thread b([&] { testing::http_exchange(server.port(), "", 3s); });
  std::this_thread::sleep_for(300ms);
  auto third = testing::http_exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n", 3s);
  CHECK(third.status() == 0);
  a.join();
  b.join();
  CHECK(server.counts().over_limit >= 1);
  CHECK(server.counts().timed_out == 2);
  CHECK(testing::http_exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n").status() == 200);

  net::MetricsHttpServer second(io.context(), [] { return std::string(); }, {});
  const Status st = second.listen("127.0.0.1", server.port());
  REQUIRE(!st.is_ok());
  CHECK(st.message().find("--metrics-port") != std::string::npos);
  CHECK(st.message().find(std::to_string(server.port())) != std::string::npos);
}
