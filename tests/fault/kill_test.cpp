// Fault injection with kill -9: a graph-server mid-epoch (started daemon by
// daemon, and under dgl-launch --local), and sampler-workers mid-epoch.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fmt/format.h>

#include "tests/fault/fault_util.h"
#include "tests/launch/launch_util.h"
#include "tests/support/dist_job.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
// A run long enough to be killed in: training only, no evaluation.
const std::vector<std::string> kLongRun = {"--eval-every", "-1", "--collective-timeout-s", "30"};
}  // namespace

TEST_CASE("fault: kill -9 of a graph-server mid-epoch ends every trainer and sampler-worker within 10 s, "
          "naming the lost server", "[fault][kill-server]") {
  // Server 1 serves machine 1's partition; server 0 is also the coordinator.
  const int victim = GENERATE(1, 0);
  DistJob job(DistJob::Options{.samplers_per_trainer = 1});
  auto flags = kLongRun;
  flags.insert(flags.end(), {"--num-samplers", "1"});
  job.start_trainer(0, 1000, flags);
  job.start_trainer(1, 1000, flags);
  for (auto& t : job.trainers) {
    INFO("trainer log:\n" << t.log());
    REQUIRE(t.wait_for_log("Epoch 00001 | Loss", 90s));
  }
  std::vector<pid_t> samplers;
  for (auto& t : job.trainers) {
    for (pid_t p : logged_sampler_pids(t.log())) samplers.push_back(p);
  }
  REQUIRE(samplers.size() == 2);

  const std::string lost = fmt::format("graph-server {}", victim);
  INFO("kill -9 of " << lost << " (127.0.0.1:" << job.server_port(victim) << ", pid " << job.servers[victim].pid()
                     << ")");
  job.servers[victim].signal(SIGKILL);
  const auto t_kill = std::chrono::steady_clock::now();
  REQUIRE(job.servers[victim].wait(5s) == std::optional<int>(128 + SIGKILL));

  for (auto& t : job.trainers) {
    const auto rc = t.wait(10s);
    const double waited = seconds_since(t_kill);
    INFO("trainer log:\n" << t.log());
    REQUIRE(rc.has_value());  // within 10 s of the kill
    CHECK(*rc == 1);
    // The error it exits with names the server that went away.
    const std::string error = trainer_exit_error(t.log());
    CHECK_THAT(error, Catch::Contains(lost));
    WARN(lost << " killed: a trainer exited " << *rc << " after " << fmt::format("{:.2f}", waited)
              << " s with: " << error.substr(error.find("] error ") + 8));
  }
  // The trainers' sampler-workers are gone too (stopped by their trainer).
  CHECK(wait_until([&] { return !pid_alive(samplers[0]) && !pid_alive(samplers[1]); }, 5s));
  WARN("every trainer and sampler-worker gone " << fmt::format("{:.2f}", seconds_since(t_kill))
                                                << " s after the kill");
  // The surviving server still runs (servers serve job after job); the job's
  // destructor stops it.
  CHECK(job.servers[1 - victim].running());
}

TEST_CASE("fault: kill -9 of a graph-server under dgl-launch --local stops the whole job within 10 s; nothing is "
          "left", "[fault][kill-server]") {
  LocalJob job;
  auto p = job.start({"--num-trainers", "1", "--num-samplers", "1", "--stop-grace-ms", "3000"},
                     {trainer_host_bin().string(), "--num-epochs", "1000", "--fan-out", "5,10", "--batch-size", "200",
                      "--num-hidden", "16", "--eval-every", "-1", "--no-progress", "--collective-timeout-s", "30"});
  INFO("launcher output:\n" << p.log());
  REQUIRE(p.wait_for_log("Epoch 00001 | Loss", 90s));
  const auto server = recorded_pid(job.ws, job.job_id, 1, "server", 1);
  REQUIRE(server.has_value());
  ::kill(*server, SIGKILL);
  const auto t_kill = std::chrono::steady_clock::now();
  const auto rc = p.wait(10s);
  const double waited = seconds_since(t_kill);
  REQUIRE(rc.has_value());
  CHECK(*rc == 1);
  // The launcher names the lost process: machine, role, rank, PID and the signal.
  const std::string log = p.log();
  CHECK_THAT(log, Catch::Contains("server") && Catch::Contains(std::to_string(*server)));
  CHECK_THAT(log, Catch::Contains("SIGKILL") || Catch::Contains("signal 9"));
  WARN("dgl-launch exited " << *rc << " " << fmt::format("{:.2f}", waited) << " s after kill -9 of graph-server 1");
  job.check_nothing_left();
  CHECK(seconds_since(t_kill) < 10);
}

TEST_CASE("fault: kill -9 of sampler-workers mid-epoch loses no seed; training completes with the batches of an "
          "undisturbed run", "[fault][kill-sampler]") {
  // Trainer 0 has two sampler-workers: the first is killed as epoch 2 starts
  // (the other takes its batches), the second as epoch 4 starts (the trainer
  // makes the rest itself). Batches depend only on (seed, epoch, batch id), so every
  // epoch must match an undisturbed run: the same seeds, the same loss.
  // An epoch here can take 30-50 ms: 16 of them leave the trainer running
  // well past the second kill, after the reaper (every 50 ms) has said the first.
  constexpr int kEpochs = 16;
  DistJob job(DistJob::Options{.samplers_per_trainer = 2});
  job.servers_stop_at_end = false;  // two runs against the same servers
  // Small batches: many per epoch, so a worker always has some in hand.
  const std::vector<std::string> flags = {"--num-samplers", "2", "--eval-every", "0", "--batch-size", "50"};
  job.run_all(kEpochs, flags);
  const auto reference = job.read_metrics();

  job.trainers.clear();
  job.start_trainer(0, kEpochs, flags);
  job.start_trainer(1, kEpochs, flags);
  Process& t0 = job.trainers[0];
  INFO("trainer 0 log:\n" << t0.log());
  REQUIRE(t0.wait_for_log("started 2 sampler-worker(s)", 60s));
  const auto workers = logged_sampler_pids(t0.log());
  REQUIRE(workers.size() == 2);
  // An epoch takes a fraction of a second: the trainer is held (SIGSTOP) while
  // a worker is killed, so a busy machine cannot let training run past the
  // point the test means before the kill lands.
  auto kill_worker_at = [&](const std::string& line, pid_t worker) {
    REQUIRE(t0.wait_for_log(line, 60s));
    ::kill(t0.pid(), SIGSTOP);
    // Not yet exited: the trainer still needs it. Once its trainer reaped it,
    // its PID may belong to any process (pid_max is 32768 on some machines):
    // killed only while it is alive and still the trainer's child.
    const bool alive = pid_alive(worker) && parent_pid(worker) == t0.pid();
    if (alive) ::kill(worker, SIGKILL);
    ::kill(t0.pid(), SIGCONT);
    REQUIRE(alive);
  };
  kill_worker_at("Epoch 00001 | Loss", workers[0]);
  // The trainer reaps the dead worker while it trains on (no zombie until the end) and says so.
  CHECK(t0.wait_for_log(fmt::format("sampler-worker pid {} ended with signal 9 while training ran", workers[0]), 30s));
  kill_worker_at("Epoch 00003 | Loss", workers[1]);
  for (auto& t : job.trainers) {
    const auto rc = t.wait(120s);
    INFO("trainer log:\n" << t.log());
    REQUIRE(rc == std::optional<int>(0));
  }
  CHECK_FALSE(pid_alive(workers[0]));
  CHECK_FALSE(pid_alive(workers[1]));
  const auto run = job.read_metrics();
  REQUIRE(run["epochs"].size() == kEpochs);

  // Every batch of every epoch was made once: by the workers, or by the trainer after they died.
  const int64_t steps = number_before(t0.log(), "steps per epoch").value_or(-1);
  const auto c0 = loader_counts(t0.log());
  REQUIRE(c0.has_value());
  CHECK(c0->by_workers + c0->by_trainer == steps * kEpochs);
  CHECK(c0->by_trainer > 0);  // after the second worker died
  const auto c1 = loader_counts(job.trainers[1].log());
  REQUIRE(c1.has_value());
  CHECK(c1->by_trainer == 0);  // trainer 1's workers were left alone
  CHECK(c1->reissued == 0);
  // Every epoch trained every seed of the undisturbed run, with the same loss.
  const int64_t all_seeds = number_before(t0.log(), "training seeds").value_or(-1) +
                            number_before(job.trainers[1].log(), "training seeds").value_or(-1);
  const auto seeds = seeds_per_epoch(run), ref_seeds = seeds_per_epoch(reference);
  for (int e = 0; e < kEpochs; ++e) {
    INFO("epoch " << e);
    CHECK(seeds[e] == ref_seeds[e]);
    CHECK(seeds[e] == all_seeds);
    CHECK(run["epochs"][e]["loss"].get<double>() ==
          Approx(reference["epochs"][e]["loss"].get<double>()).epsilon(1e-6));
  }
  CHECK(run["test_acc"].get<double>() == Approx(reference["test_acc"].get<double>()).margin(1e-9));
  WARN("sampler-workers killed: trainer 0 batches by workers " << c0->by_workers << ", by itself " << c0->by_trainer
                                                              << ", re-issued " << c0->reissued << " of " << steps
                                                              << " x " << kEpochs << "; " << all_seeds
                                                              << " seeds in every epoch, losses as undisturbed");
}
