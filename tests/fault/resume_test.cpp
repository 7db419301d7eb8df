// Fault injection: the whole job killed (kill -9 of the launcher, its agents,
// the graph-servers, the trainers and their sampler-workers at once) after
// some epochs were checkpointed, then started again with --resume: it
// continues after the last committed epoch, redoes none of those, and ends
// where an uninterrupted run ends.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checkpoint_store.h"
#include "launcher/launch/files.h"
#include "tests/fault/fault_util.h"
#include "tests/launch/launch_util.h"
#include "tests/support/dist_job.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The last epoch a rank's newest intact checkpoint completes, -1 while there is none.
int latest(const fs::path& dir, int rank) {
  const auto held = CheckpointStore(dir, rank).valid();
  return held.empty() ? -1 : static_cast<int>(held.front().epoch) - 1;
}

}  // namespace

TEST_CASE("fault: a whole job killed with kill -9 resumes from its last checkpoint, redoes no committed epoch and "
          "ends as an uninterrupted run", "[fault][resume]") {
  constexpr int kEpochs = 10;
  LocalJob job(2, kDistGraph);
  auto command = [&](const std::string& ckpt, const std::string& metrics) {
    return std::vector<std::string>{trainer_host_bin().string(), "--num-epochs", std::to_string(kEpochs),
                                    "--fan-out", "5,10", "--batch-size", "200", "--num-hidden", "32",
                                    "--lr", "0.03", "--eval-every", "0", "--no-progress", "--seed", "11",
                                    "--collective-timeout-s", "30", "--checkpoint-dir", ckpt,
                                    "--metrics-out", metrics};
  };
  const std::vector<std::string> launch_flags = {"--num-trainers", "1", "--num-samplers", "1"};
  // The uninterrupted run.
  {
    auto p = job.start(launch_flags, command("ckpt-ref", "reference.json"));
    const auto rc = p.wait(120s);
    INFO("launcher output:\n" << p.log());
    REQUIRE(rc == std::optional<int>(0));
  }
  const auto reference = nlohmann::json::parse(read_text(job.src / "reference.json"));

  // The run that is killed once both trainers committed epoch 2.
  const fs::path ckpt = job.ws / "ckpt";
  int committed = -1;
  {
    auto p = job.start(launch_flags, command("ckpt", "resumed.json"));
    INFO("launcher output:\n" << p.log());
    REQUIRE(wait_until([&] { return std::min(latest(ckpt, 0), latest(ckpt, 1)) >= 2 || !p.running(); }, 120s));
    REQUIRE(p.running());
    // Stopped first: a server whose agent died before its own SIGKILL came
    // would get its parent-death SIGTERM, exit cleanly and unlink its shared
    // memory (seen once in a full-suite run), which is not the crash this
    // test makes. A stopped process keeps that SIGTERM pending until SIGKILL.
    const auto victims = job_processes(job.job_id);
    for (pid_t pid : victims) ::kill(pid, SIGSTOP);
    for (pid_t pid : victims) ::kill(pid, SIGKILL);
    const auto t_kill = std::chrono::steady_clock::now();
    const auto left = wait_job_gone(job.job_id, 10s);
    INFO("still running after kill -9:\n" << describe_pids(left));
    REQUIRE(left.empty());
    REQUIRE(p.wait(5s).has_value());
    committed = std::min(latest(ckpt, 0), latest(ckpt, 1));  // the newest both hold
    WARN(fmt::format("killed {} processes of the job (launcher, agents, servers, trainers, sampler-workers) after "
                     "epoch {} was committed; all gone after {:.2f} s",
                     victims.size(), committed, seconds_since(t_kill)));
  }
  REQUIRE(committed >= 2);
  REQUIRE(committed < kEpochs - 1);
  // What the killed job left: its shared memory (replaced by the new servers).
  CHECK_FALSE(launch::job_shm_segments(job.job_id, -1).empty());

  // The same job again, resuming.
  auto resume = command("ckpt", "resumed.json");
  resume.push_back("--resume");
  auto p = job.start(launch_flags, resume);
  const auto rc = p.wait(120s);
  const std::string log = p.log();
  INFO("launcher output:\n" << log);
  REQUIRE(rc == std::optional<int>(0));
  for (int rank : {0, 1}) {
    INFO("trainer " << rank);
    CHECK_THAT(read_text(job.logs() / fmt::format("trainer-{}.log", rank)),
               Catch::Contains(fmt::format("resumed from the checkpoint of the end of epoch {}", committed)));
  }
  // No committed epoch was trained again; every later one was, once.
  for (int e = 0; e < kEpochs; ++e) {
    INFO("epoch " << e);
    const bool trained = log.find(fmt::format("Epoch {:05d} | Loss", e)) != std::string::npos;
    CHECK(trained == (e > committed));
  }
  const auto resumed = nlohmann::json::parse(read_text(job.src / "resumed.json"));
  CHECK(resumed["resumed_from_epoch"] == committed);
  REQUIRE(resumed["epochs"].size() == kEpochs);
  for (int e = 0; e < kEpochs; ++e) {
    INFO("epoch " << e);
    CHECK(resumed["epochs"][e]["epoch"] == e);
    CHECK(resumed["epochs"][e]["loss"].get<double>() ==
          Approx(reference["epochs"][e]["loss"].get<double>()).epsilon(1e-6));
  }
  CHECK(resumed["test_acc"].get<double>() == Approx(reference["test_acc"].get<double>()).margin(1e-9));
  CHECK(resumed["val_acc"].get<double>() == Approx(reference["val_acc"].get<double>()).margin(1e-9));
  WARN(fmt::format("resumed after epoch {}: epochs {}..{} trained after the restart; test acc {:.4f} (uninterrupted {:.4f})",
                   committed, committed + 1, kEpochs - 1, resumed["test_acc"].get<double>(),
                   reference["test_acc"].get<double>()));
  job.check_nothing_left();
}
