// dgl-launch --max-restarts with --local and the stand-in trainer
// (fake_trainer.sh): a failed job starts again by itself, a failure that
// repeats without progress ends it, the limit ends a storm, and a machine
// whose processes cannot start is replaced by a spare of the ip_config. The
// real trainer-host resuming on emulated machines is tests/cluster's.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tests/launch/launch_util.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A socket listening on 127.0.0.1:port (closed on destruction): the port is taken.
struct PortBlocker {
  int fd = -1;
  explicit PortBlocker(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
  }
  ~PortBlocker() { ::close(fd); }
};

nlohmann::json restarts_report(const LocalJob& job) {
  return nlohmann::json::parse(read_text(job.src / "dgld-logs" / (job.job_id + "-restarts.json")));
}

}  // namespace

TEST_CASE("restart: a trainer that fails once; the job starts again by itself and finishes", "[restart]") {
  LocalJob job;
  auto p = job.start({"--num-trainers", "2", "--max-restarts", "2", "--restart-backoff-s", "0.2", "--extra-envs",
                      "FAKE_FAIL_RANK=1", "FAKE_FAIL_UNTIL_RESTART=1", "FAKE_FAIL_CODE=9"});
  const auto rc = p.wait(60s);
  const std::string log = p.log();
  INFO(log);
  REQUIRE(rc == std::optional<int>(0));
  CHECK_THAT(log, Catch::Contains("(machine 0): trainer 1 (pid"));
  CHECK_THAT(log, Catch::Contains("exited with code 9"));
  CHECK_THAT(log, Catch::Contains("restart 1 of at most 2 in 0.2 s (no checkpoint yet: training starts over)"));
  CHECK_THAT(log, Catch::Contains("job " + job.job_id + "-r1 (restart 1): logs in"));
  CHECK_THAT(log, Catch::Contains("restart 1 at +"));
  CHECK_THAT(log, Catch::Contains("job " + job.job_id + " finished in"));
  CHECK_THAT(log, Catch::Contains("after 1 restart(s): 4 trainer(s) exited 0"));
  const auto report = restarts_report(job);
  REQUIRE(report.size() == 1);
  CHECK(report[0]["cause"]["kind"] == "process");
  CHECK(report[0]["cause"]["rank"] == 1);
  CHECK(report[0]["restart_s"].get<double>() > 0);
  // Each attempt logs apart.
  CHECK(fs::exists(job.ws / "dgld-logs" / job.job_id / "trainer-1.log"));
  CHECK(fs::exists(job.ws / "dgld-logs" / (job.job_id + "-r1") / "trainer-1.log"));
  job.check_nothing_left();
}

TEST_CASE("restart: a trainer that always fails ends the job, naming the cause", "[restart]") {
  LocalJob job;
  SECTION("without progress: after the same failure twice") {
    auto p = job.start({"--max-restarts", "5", "--restart-backoff-s", "0.1", "--extra-envs", "FAKE_FAIL_RANK=1"});
    const auto rc = p.wait(60s);
    const std::string log = p.log();
    INFO(log);
    REQUIRE(rc == std::optional<int>(1));
    CHECK_THAT(log, Catch::Contains("failed after 1 restart(s): host 127.0.0.1"));
    CHECK_THAT(log, Catch::Contains("trainer 1 (pid"));
    CHECK_THAT(log, Catch::Contains("not started again: it failed the same way twice in a row without a new "
                                    "checkpoint in between"));
  }
  SECTION("with a checkpoint every attempt: after the limit") {
    auto p = job.start({"--max-restarts", "2", "--restart-backoff-s", "0.1", "--extra-envs", "FAKE_FAIL_RANK=1",
                        "FAKE_FAIL_AFTER=1", "FAKE_PROGRESS=1"});  // rank 0 reports its checkpoint first
    const auto rc = p.wait(60s);
    const std::string log = p.log();
    INFO(log);
    REQUIRE(rc == std::optional<int>(1));
    CHECK_THAT(log, Catch::Contains("checkpoint of the end of epoch 1 committed by every trainer"));
    CHECK_THAT(log, Catch::Contains("failed after 2 restart(s)"));
    CHECK_THAT(log, Catch::Contains("exited with code 3"));
    CHECK_THAT(log, Catch::Contains("not started again: the limit of 2 restart(s) (--max-restarts) is reached"));
    const auto report = restarts_report(job);
    REQUIRE(report.size() == 2);
    // Each attempt committed a checkpoint: the back-off does not double
    // (it would be 0.2 s for the second restart).
    CHECK(report[0]["backoff_s"].get<double>() == 0.1);
    CHECK(report[1]["backoff_s"].get<double>() == 0.1);
  }
  job.check_nothing_left();
}

TEST_CASE("restart: a machine whose processes cannot start is replaced by a spare under the same machine id",
          "[restart]") {
  LocalJob job;
  const int spare_port = job.base + 20;
  {
    std::ofstream(job.src / "ip_config.txt", std::ios::app) << "# spare 127.0.0.1 " << spare_port << "\n";
  }
  const std::string original = read_text(job.src / "ip_config.txt");
  auto taken = std::make_unique<PortBlocker>(job.base + 10);  // machine 1's graph-server port
  auto p = job.start({"--max-restarts", "3", "--restart-backoff-s", "0.1"});
  const auto rc = p.wait(90s);
  const std::string log = p.log();
  INFO(log);
  REQUIRE(rc == std::optional<int>(0));
  CHECK_THAT(log, Catch::Contains(fmt::format("port {} on 127.0.0.1 is already in use", job.base + 10)));
  CHECK_THAT(log, Catch::Contains(fmt::format("spare 127.0.0.1:{} (ip_config.txt line 3) took the place of "
                                              "machine 1 (127.0.0.1:{}, lost: its processes failed to start twice "
                                              "in a row)", spare_port, job.base + 10)));
  CHECK_THAT(log, Catch::Contains("after 2 restart(s)"));
  // The trainers reached machine 1's servers on the spare: the job's own ip_config says where.
  const fs::path job_ip = job.ws / "dgld-logs" / (job.job_id + "-r2") / "ip_config.txt";
  const std::string text = read_text(job_ip);
  CHECK_THAT(text, Catch::Contains(fmt::format("127.0.0.1 {}\n", spare_port)));
  CHECK_THAT(read_text(job.ws / "dgld-logs" / (job.job_id + "-r2") / "trainer-1.log"),
             Catch::Contains("servers of 2 machines reachable"));
  CHECK(read_text(job.src / "ip_config.txt") == original);  // the user's file is left alone
  taken.reset();
  job.check_nothing_left();
  CHECK_FALSE(port_listened_on(spare_port));
}
