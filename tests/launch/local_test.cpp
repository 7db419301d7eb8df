// dgl-launch --local: two simulated machines on loopback (two ip_config lines,
// different base ports), with a stand-in trainer (tests/launch/fake_trainer.sh)
// for the mechanics and the real trainer-host end to end. Every case ends by
// checking that no process of the job, no shared-memory segment and no port
// survives.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "common/net/auth.h"
#include <thread>

#include <nlohmann/json.hpp>

#include "client/server_api.h"
#include "common/net/io_threads.h"
#include "launcher/launch/files.h"
#include "launcher/launch/subprocess.h"
#include "tests/launch/launch_util.h"
#include "tests/support/partitioned_graph.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Two machines with two fake trainers each: `rank` exits 7 after `after_s`
// seconds, the others sleep a minute.
Process start_failing_job(LocalJob& job, int rank, int after_s) {
  return job.start({"--num-trainers", "2", "--extra-envs", "FAKE_SECONDS=60", "FAKE_FAIL_RANK=" + std::to_string(rank),
                    "FAKE_FAIL_AFTER=" + std::to_string(after_s), "FAKE_FAIL_CODE=7"});
}

// After start_failing_job: waits for the failing trainer's line, then for
// the launcher's exit, which must be 1; the time from that line to the exit.
std::chrono::duration<double> require_failed_exit(Process& p) {
  REQUIRE(p.wait_for_log("failing on purpose", 30s));
  const auto [rc, took] = wait_launcher_exit(p, std::chrono::steady_clock::now(), 15s);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(1));
  return took;
}

void require_trainer_started(Process& p, int rank, int of) {
  const std::string line = "fake trainer rank " + std::to_string(rank) + " of " + std::to_string(of);
  if (!p.wait_for_log(line, 30s)) FAIL("no '" << line << "' within 30 s; launcher output:\n" << p.log());
}

}  // namespace

TEST_CASE("launch --local: two machines run to the end; logs, records and metrics; nothing left", "[launch]") {
  LocalJob job;
  auto p = job.start({"--num-servers", "2", "--num-trainers", "2", "--extra-envs", "FAKE_SECONDS=0.3"},
                     {fake_trainer().string(), "--metrics-out", "out/metrics.json"});
  const auto rc = p.wait(60s);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(0));
  const std::string log = p.log();
  const std::string m0 = "127.0.0.1:" + std::to_string(job.base), m1 = "127.0.0.1:" + std::to_string(job.base + 10);
  // Output of every process, prefixed host/role/rank.
  CHECK_THAT(log, Catch::Contains(m0 + "/trainer/1: fake trainer rank 1 of 4 on machine 0: servers of 2 machines reachable"));
  CHECK_THAT(log, Catch::Contains(m1 + "/trainer/3: fake trainer rank 3 of 4 on machine 1"));
  CHECK_THAT(log, Catch::Contains(m1 + "/server/3: "));
  CHECK_THAT(log, Catch::Contains("(backup server of machine 1) listening on 127.0.0.1:" + std::to_string(job.base + 11)));
  // OMP_NUM_THREADS: the host's cores / (2 trainers per machine x the 2
  // machines this host runs); idle OpenMP threads sleep.
  const int omp = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 4);
  CHECK_THAT(log, Catch::Contains("OMP_NUM_THREADS=" + std::to_string(omp)));
  CHECK_THAT(log, Catch::Contains("OMP_WAIT_POLICY=PASSIVE"));
  // A log file per process, and the agents' records.
  for (const char* f : {"server-0.log", "server-3.log", "trainer-0.log", "trainer-3.log", "agent-m0.log", "agent-m1.log"}) {
    CHECK(fs::exists(job.logs() / f));
  }
  CHECK_THAT(read_text(job.logs() / "trainer-2.log"), Catch::Contains("fake trainer rank 2 done"));
  auto rec = nlohmann::json::parse(read_text(job.logs() / "machine-1.json"));
  CHECK(rec["job_id"] == job.job_id);
  REQUIRE(rec["processes"].size() == 4);
  for (const auto& proc : rec["processes"]) {
    if (proc["role"] == "trainer") CHECK(proc["status"] == 0);
  }
  // The workspace got the files; rank 0's metrics came back to the launcher's directory.
  CHECK(fs::exists(job.ws / "parts/part1/graph.dgld"));
  auto metrics = nlohmann::json::parse(read_text(job.src / "out/metrics.json"));
  CHECK(metrics["job_id"] == job.job_id);
  CHECK(metrics["num_trainers"] == 4);
  CHECK(metrics["num_client"] == 4);
  job.check_nothing_left();
}

TEST_CASE("launch --local: a second run copies nothing and reuses the workspace", "[launch]") {
  LocalJob job;
  auto p1 = job.start({});
  REQUIRE(p1.wait(60s) == std::optional<int>(0));
  CHECK_THAT(p1.log(), Catch::Contains("copied 8 file(s), 0 already there"));
  job.job_id += "b";
  auto p2 = job.start({});
  REQUIRE(p2.wait(60s) == std::optional<int>(0));
  CHECK_THAT(p2.log(), Catch::Contains("copied 0 file(s), 8 already there"));
  job.check_nothing_left();
}

TEST_CASE("launch --local: a trainer that fails stops every process and names itself", "[launch]") {
  LocalJob job;
  auto p = start_failing_job(job, 3, 1);
  const auto took = require_failed_exit(p);
  const std::string log = p.log();
  INFO(log);
  CHECK(took < 10s);
  CHECK_THAT(log, Catch::Contains("(machine 1): trainer 3 (pid"));
  CHECK_THAT(log, Catch::Contains("exited with code 7; last lines of"));
  CHECK_THAT(log, Catch::Contains("| fake trainer 3: failing on purpose"));
  CHECK_THAT(log, Catch::Contains("job " + job.job_id + " failed: "));
  job.check_nothing_left();
}

TEST_CASE("launch --local: a trainer frozen by SIGSTOP when the job stops is continued to act on SIGTERM, not "
          "killed after the grace period", "[launch]") {
  LocalJob job;
  auto p = start_failing_job(job, 3, 3);
  require_trainer_started(p, 1, 4);
  // The agent records its processes before it relays their output.
  const auto frozen = recorded_pid(job.ws, job.job_id, 0, "trainer", 1);
  REQUIRE(frozen.has_value());
  ::kill(*frozen, SIGSTOP);
  const auto took = require_failed_exit(p);
  const std::string log = p.log();
  INFO(log);
  CHECK_THAT(log, !Catch::Contains("still running"));  // no SIGKILL after --stop-grace-ms (3 s)
  CHECK(took < 2500ms);
  job.check_nothing_left();
}

TEST_CASE("launch --local: an agent silent when the job stops (frozen, its machine lost) is cleaned up after at "
          "once, not after waiting for its confirmation", "[launch]") {
  LocalJob job;
  auto p = start_failing_job(job, 1, 9);
  require_trainer_started(p, 3, 4);
  const auto agent = recorded_agent_pid(job.ws, job.job_id, 1);
  REQUIRE(agent.has_value());
  ::kill(*agent, SIGSTOP);  // machine 1's agent answers no ping from now on; rank 1 (machine 0) fails 9 s in
  const auto took = require_failed_exit(p);
  const std::string log = p.log();
  INFO(log);
  CHECK_THAT(log, Catch::Contains("(machine 1): nothing heard from its agent for"));
  CHECK_THAT(log, Catch::Contains("(machine 1): cleaned up after its lost agent: "));  // its trainers, their sleeps, its server
  CHECK(took < 3s);  // before: the stop's wait for every agent's confirmation, --stop-grace-ms + 1.5 s
  job.check_nothing_left();
}

TEST_CASE("launch --local: SIGINT or SIGTERM stops every process within 5 s", "[launch]") {
  const int sig = GENERATE(SIGINT, SIGTERM);
  LocalJob job;
  auto p = job.start({"--num-trainers", "2", "--extra-envs", "FAKE_SECONDS=60"});
  require_trainer_started(p, 3, 4);
  const auto t0 = std::chrono::steady_clock::now();
  p.signal(sig);
  const auto [rc, took] = wait_launcher_exit(p, t0, 10s);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(128 + sig));
  CHECK(took < 5s);
  CHECK_THAT(p.log(), Catch::Contains(std::string("interrupted by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM")));
  job.check_nothing_left();
}

TEST_CASE("launch --local: a machine whose agent dies fails the job; what it left is cleaned up", "[launch]") {
  LocalJob job;
  auto p = job.start({"--extra-envs", "FAKE_SECONDS=60"});
  REQUIRE(p.wait_for_log("fake trainer rank 1 of 2", 30s));
  auto agent = recorded_agent_pid(job.ws, job.job_id, 1);
  REQUIRE(agent.has_value());
  ::kill(*agent, SIGKILL);  // its trainer's `sleep` is orphaned: only the job id finds it
  const auto t0 = std::chrono::steady_clock::now();
  const auto [rc, took] = wait_launcher_exit(p, t0, 15s);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(1));
  CHECK(took < 10s);
  CHECK_THAT(p.log(), Catch::Contains("(machine 1, ip_config.txt line 2): lost the connection to its machine agent"));
  CHECK_THAT(p.log(), Catch::Contains("cleaned up after its lost agent"));
  job.check_nothing_left();
}

TEST_CASE("launch --local: an agent that hears nothing from the launcher stops its processes", "[launch]") {
  TempDir dir("dgld-launch-agent");
  launch::SpawnOptions so;
  so.argv = {launch_bin().string(), "--machine-agent", "--job-id", "silent", "--machine", "0", "--agent-timeout-s", "5"};
  so.pipe_stdin = true;  // open, but nothing is ever written
  so.separate_stderr = true;
  auto agent = launch::Subprocess::spawn(so);
  REQUIRE(agent.is_ok());
  const auto rc = agent->wait_for(15s);
  REQUIRE(rc.has_value());
  CHECK(*rc == 0);
  std::string out(4096, '\0');
  out.resize(static_cast<size_t>(std::max<ssize_t>(0, ::read(agent->stdout_fd(), out.data(), out.size()))));
  CHECK_THAT(out, Catch::Contains("\"ev\":\"stopped\""));
  CHECK_THAT(out, Catch::Contains("nothing from dgl-launch for 5 s"));
}

TEST_CASE("launch --local: bad input fails before anything starts, naming the host and the problem", "[launch]") {
  LocalJob job;
  std::vector<std::string> extra;
  std::vector<std::string> command = {fake_trainer().string()};
  std::string expect;
  std::optional<int> listener;  // a port taken before the launch

  SECTION("ip_config lines != num_parts") {
    write_ip_config(job.src, {{"127.0.0.1", job.base}, {"127.0.0.1", job.base + 10}, {"127.0.0.1", job.base + 20}});
    expect = "ip_config.txt lists 3 machine(s) but parts/g.json has num_parts=2";
  }
  SECTION("a partition file missing here") {
    fs::remove(job.src / "parts/part1/graph.dgld");
    expect = "partition file for machine 1 (127.0.0.1:" + std::to_string(job.base + 10) + ") is missing here: " +
             (job.src / "parts/part1/graph.dgld").string();
  }
  SECTION("--no-copy and a partition file missing in the workspace") {
    fs::create_directories(job.ws);
    fs::copy(job.src, job.ws, fs::copy_options::recursive);
    fs::remove(job.ws / "parts/part1/node_feat.dgld");
    extra = {"--no-copy"};
    expect = "host 127.0.0.1:" + std::to_string(job.base + 10) + " (machine 1, ip_config.txt line 2): partition 1 file " +
             (job.ws / "parts/part1/node_feat.dgld").string() + " is missing";
  }
  SECTION("a trainer command that is not found") {
    command = {"no-such-trainer-dgld"};
    expect = "trainer command 'no-such-trainer-dgld' not found in PATH";
  }
  SECTION("a trainer command path that does not exist in the workspace") {
    command = {"./bin/trainer"};
    expect = "trainer command ./bin/trainer does not exist or is not executable (relative paths start in " +
             job.ws.string() + ")";
  }
  SECTION("a server port already taken") {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(job.base + 10));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    listener = fd;
    expect = "(machine 1, ip_config.txt line 2): port " + std::to_string(job.base + 10) + " on 127.0.0.1 is already in use";
  }
  SECTION("a graph-server of another version") {
    const fs::path fake = job.dir.path() / "graph-server";
    std::ofstream(fake) << "#!/bin/sh\necho 'graph-server 9.9.9'\n";
    fs::permissions(fake, fs::perms::owner_all);
    extra = {"--graph-server-bin", fake.string()};
    expect = "graph-server " + fake.string() + " is version 9.9.9 but dgl-launch is";
  }
  SECTION("a host that refuses ssh") {
    // Not --local: ssh to 127.0.0.1 on a port nothing listens on.
    const int port = free_port_range(1);
    auto a = job.args({"--ssh-port", std::to_string(port), "--connect-timeout-s", "5"}, command);
    a.erase(a.begin());  // drop --local
    auto p = start_launch(a, job.src, job.dir.path() / "launch.log");
    const auto rc = p.wait(60s);
    INFO(p.log());
    REQUIRE(rc == std::optional<int>(2));
    // Both machines are refused; either may be reported first.
    CHECK_THAT(p.log(), Catch::Contains("failed before anything started: host 127.0.0.1:") &&
                            Catch::Contains("): cannot start the machine agent over ssh: ssh failed (exit 255)"));
    CHECK_THAT(p.log(), Catch::Contains("Connection refused"));
    job.check_nothing_left();
    return;
  }
  auto p = job.start(extra, command);
  const auto rc = p.wait(60s);
  if (listener) ::close(*listener);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(2));
  CHECK_THAT(p.log(), Catch::Contains(expect));
  CHECK_THAT(p.log(), Catch::Contains("failed before anything started"));
  CHECK_FALSE(fs::exists(job.logs() / "server-0.log"));  // no process was started
  job.check_nothing_left();
}

TEST_CASE("launch --local: trainer-host trains on two machines with sampler-workers; metrics come back", "[launch][real]") {
  LocalJob job;
  auto p = job.start({"--num-trainers", "1", "--num-samplers", "1"},
                     {trainer_host_bin().string(), "--num-epochs", "3", "--fan-out", "5,10", "--batch-size", "200",
                      "--num-hidden", "16", "--lr", "0.01", "--eval-every", "0", "--no-progress",
                      "--collective-timeout-s", "30", "--metrics-out", "metrics.json"});
  const auto rc = p.wait(120s);
  const std::string log = p.log();
  INFO(log);
  REQUIRE(rc == std::optional<int>(0));
  CHECK_THAT(log, Catch::Contains("/trainer/1: "));
  CHECK_THAT(log, Catch::Contains("sampler-worker for trainer 1 on machine 1"));
  CHECK_THAT(log, Catch::Contains("done (rank 1 of 2)"));
  auto metrics = nlohmann::json::parse(read_text(job.src / "metrics.json"));
  CHECK(metrics["num_trainers"] == 2);
  CHECK(metrics["rank"] == 0);
  CHECK(metrics["epochs"].size() == 3);
  // Every connection of the job authenticated with the job's secret, which
  // was never on a command line and is gone with the job.
  CHECK_THAT(log, !Catch::Contains("refused client"));
  CHECK_THAT(log, !Catch::Contains("authentication"));
  CHECK_FALSE(fs::exists(job.logs() / "secret"));
  job.check_nothing_left();
}

TEST_CASE("launch --local: a client outside the job cannot use its servers", "[launch][real]") {
  LocalJob job;
  // A trainer that waits while a stranger knocks (the fake trainer sleeps).
  auto p = job.start({"--extra-envs", "FAKE_SECONDS=20"}, {fake_trainer().string()});
  REQUIRE(p.wait_for_log("/trainer/1: ", 60s));
  net::IoThreads io(1);
  auto conn = client::ServerConnection::connect(io.context(), "127.0.0.1", static_cast<uint16_t>(job.base), 0, 5s, 5s);
  REQUIRE(conn.is_ok());  // TCP is open to anyone ...
  auto info = (*conn)->graph_info();  // ... but nothing is served without the secret
  REQUIRE_FALSE(info.is_ok());
  CHECK_THAT(info.status().message(), Catch::Contains("authentication required"));
  CHECK(p.wait_for_log("refused client 127.0.0.1:", 10s));
  const std::string secret = read_text(job.logs() / "secret");
  CHECK_THAT(p.log(), !Catch::Contains(secret.substr(0, 16)));  // not in any log line
  p.signal(SIGINT);
  REQUIRE(p.wait(30s).has_value());
  job.check_nothing_left();
}

TEST_CASE("launch --local --external-servers: servers run from --write-server-env files (as systemd runs them) "
          "serve the job and keep running", "[launch]") {
  LocalJob job;
  fs::create_directories(job.ws);
  fs::copy(job.src, job.ws, fs::copy_options::recursive);
  const fs::path env_dir = job.dir.path() / "env";
  // The operator's secret, which the servers' environment files point to.
  const fs::path secret = job.dir.path() / "job.secret";
  REQUIRE(dgld::net::write_new_secret_file(secret).is_ok());
  const std::vector<std::string> config = {"--workspace", job.ws.string(), "--ip-config", "ip_config.txt",
                                           "--part-config", "parts/g.json", "--job-id", job.job_id,
                                           "--secret-file", secret.string()};
  auto writer = config;
  writer.insert(writer.end(), {"--write-server-env", env_dir.string()});
  auto w = start_launch(writer, job.src, job.dir.path() / "write.log");
  REQUIRE(w.wait(30s) == std::optional<int>(0));
  const fs::path env0 = env_dir / "machine-0" / (job.job_id + "-0.env");
  const fs::path env1 = env_dir / "machine-1" / (job.job_id + "-1.env");
  CHECK_THAT(read_text(env1), Catch::Contains("DGL_SERVER_ID=1\n") &&
                                  Catch::Contains("DGL_CONF_PATH=" + (job.ws / "parts/g.json").string() + "\n") &&
                                  Catch::Contains("DGLD_JOB_ID=" + job.job_id + "\n") &&
                                  Catch::Contains("DGLD_GRAPH_SERVER_ARGS=--num-server-threads 2\n"));
  CHECK_THAT(read_text(env1), !Catch::Contains("DGLD_MACHINE_ID"));
  CHECK_THAT(read_text(env1), Catch::Contains("DGLD_SECRET_FILE=" + secret.string() + "\n"));

  auto args = config;
  args.insert(args.end(), {"--local", "--external-servers", "--no-copy", "--", fake_trainer().string()});
  // Servers not running yet: refused before any trainer starts.
  auto early = start_launch(args, job.src, job.dir.path() / "early.log");
  REQUIRE(early.wait(30s) == std::optional<int>(2));
  // Both machines are checked at once: either may be the one reported.
  CHECK_THAT(early.log(), Catch::Contains("no graph-server listens on 127.0.0.1:" + std::to_string(job.base)) ||
                              Catch::Contains("no graph-server listens on 127.0.0.1:" + std::to_string(job.base + 10)));

  // What systemd does with dgld-graph-server@.service: EnvironmentFile=, then
  // ExecStart=graph-server $DGLD_GRAPH_SERVER_ARGS.
  std::deque<Process> servers;
  for (const fs::path& f : {env0, env1}) {
    std::map<std::string, std::string> env;
    std::istringstream in(read_text(f));
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      env[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
    }
    std::vector<std::string> argv = {graph_server_bin().string()};
    std::istringstream words(env["DGLD_GRAPH_SERVER_ARGS"]);
    for (std::string w; words >> w;) argv.push_back(w);
    servers.push_back(Process::start(argv, job.dir.path() / f.filename().replace_extension(".log"), env));
  }
  for (auto& s : servers) REQUIRE(s.wait_for_log("listening on", 30s));

  auto p = start_launch(args, job.src, job.dir.path() / "launch.log");
  const auto rc = p.wait(60s);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(0));
  CHECK_THAT(p.log(), Catch::Contains("fake trainer rank 1 of 2 on machine 1: servers of 2 machines reachable"));
  CHECK_THAT(p.log(), Catch::Contains("(external: left running at the end)"));
  // The trainers are gone, the servers (and their shared memory) are not.
  for (auto& s : servers) CHECK(s.running());
  CHECK_FALSE(launch::job_shm_segments(job.job_id, 0).empty());
  auto left = job_processes(job.job_id);
  for (auto& s : servers) std::erase(left, s.pid());
  INFO("left:\n" << describe_pids(left));
  CHECK(left.empty());
  for (auto& s : servers) s.signal(SIGTERM);
  for (auto& s : servers) CHECK(s.wait(20s) == std::optional<int>(0));
  job.check_nothing_left();
}
