// Checkpoint replicas (--checkpoint-replicas, docs/reliability.md): each
// machine's checkpoints on a path of its own (as on machines without shared
// storage), the job killed with kill -9 once epoch 2 is committed, then
// machine 1's whole checkpoint directory wiped (its disk lost with it). The
// job started again with --resume: trainer 1 gets its files from the copy
// machine 0 holds, verifies them, and the run ends as an uninterrupted one.
// Without replicas the same loss is refused, naming what each rank holds.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checkpoint_store.h"
#include "tests/fault/fault_util.h"
#include "tests/launch/launch_util.h"
#include "tests/support/dist_job.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The last epoch the newest intact position of `store` completes, -1 while there is none.
int latest(const CheckpointStore& store) {
  const auto held = store.valid();
  return held.empty() ? -1 : static_cast<int>(held.front().epoch) - 1;
}

}  // namespace

TEST_CASE("fault: a machine's checkpoint directory lost with the job; its trainer resumes from the replica another "
          "machine holds", "[fault][replica]") {
  constexpr int kEpochs = 8;
  LocalJob job(2, kDistGraph);
  // Machine m's trainer writes into <ckpt>/m<m>: a directory of its own.
  auto command = [&](const fs::path& ckpt, const std::string& metrics, const std::vector<std::string>& extra) {
    std::vector<std::string> c = {"/bin/sh", "-c",
                                  fmt::format("exec \"$0\" \"$@\" --checkpoint-dir {}/m$DGLD_MACHINE_ID",
                                              ckpt.string()),
                                  trainer_host_bin().string(), "--num-epochs", std::to_string(kEpochs),
                                  "--fan-out", "5,10", "--batch-size", "200", "--num-hidden", "32", "--lr", "0.03",
                                  "--eval-every", "0", "--no-progress", "--seed", "11", "--collective-timeout-s",
                                  "30", "--metrics-out", metrics};
    c.insert(c.end(), extra.begin(), extra.end());
    return c;
  };
  const std::vector<std::string> launch_flags = {"--num-trainers", "1", "--num-samplers", "1"};
  // The uninterrupted run.
  {
    auto p = job.start(launch_flags, command(job.ws / "ckpt-ref", "reference.json", {}));
    const auto rc = p.wait(120s);
    INFO("launcher output:\n" << p.log());
    REQUIRE(rc == std::optional<int>(0));
  }
  const auto reference = nlohmann::json::parse(read_text(job.src / "reference.json"));
  // Every checkpoint was copied: rank 0's to machine 1 and back.
  REQUIRE(reference.contains("checkpoints"));
  CHECK(reference["checkpoints"]["replicas"] == 1);
  CHECK(reference["checkpoints"]["replica_bytes_sent"].get<int64_t>() > 0);
  CHECK(latest(CheckpointStore::replica(job.ws / "ckpt-ref" / "m0", 1)) == kEpochs - 1);
  CHECK(latest(CheckpointStore::replica(job.ws / "ckpt-ref" / "m1", 0)) == kEpochs - 1);

  // The run killed once rank 1's epoch 2 is committed and copied to machine 0.
  const fs::path ckpt = job.ws / "ckpt";
  const CheckpointStore own0(ckpt / "m0", 0), own1(ckpt / "m1", 1);
  const CheckpointStore replica1 = CheckpointStore::replica(ckpt / "m0", 1);
  {
    auto p = job.start(launch_flags, command(ckpt, "resumed.json", {}));
    INFO("launcher output:\n" << p.log());
    REQUIRE(wait_until([&] { return std::min({latest(own0), latest(own1), latest(replica1)}) >= 2 || !p.running(); },
                       120s));
    REQUIRE(p.running());
    const auto victims = job_processes(job.job_id);
    for (pid_t pid : victims) ::kill(pid, SIGSTOP);  // as in fault_resume: no clean exit on the way down
    for (pid_t pid : victims) ::kill(pid, SIGKILL);
    const auto left = wait_job_gone(job.job_id, 10s);
    INFO("still running after kill -9:\n" << describe_pids(left));
    REQUIRE(left.empty());
    REQUIRE(p.wait(5s).has_value());
  }
  // Machine 1's disk is gone: its own checkpoints and the replica of rank 0 it held.
  fs::remove_all(ckpt / "m1");
  const int committed = std::min(latest(own0), latest(replica1));  // the newest rank 0 and machine 0 hold of both
  REQUIRE(committed >= 2);
  REQUIRE(committed < kEpochs - 1);

  auto p = job.start(launch_flags, command(ckpt, "resumed.json", {"--resume"}));
  const auto rc = p.wait(120s);
  const std::string log = p.log();
  INFO("launcher output:\n" << log);
  REQUIRE(rc == std::optional<int>(0));
  const std::string t1 = read_text(job.logs() / "trainer-1.log");
  CHECK_THAT(t1, Catch::Contains(fmt::format("no intact checkpoint of the end of epoch {} in {}: fetched from rank 0's "
                                             "replica (machine 0)",
                                             committed, own1.dir().string())) &&
                     Catch::Contains(") and verified"));
  for (int rank : {0, 1}) {
    INFO("trainer " << rank);
    CHECK_THAT(read_text(job.logs() / fmt::format("trainer-{}.log", rank)),
               Catch::Contains(fmt::format("resumed from the checkpoint of the end of epoch {}", committed)));
  }
  const auto resumed = nlohmann::json::parse(read_text(job.src / "resumed.json"));
  CHECK(resumed["resumed_from_epoch"] == committed);
  REQUIRE(resumed["epochs"].size() == kEpochs);
  for (int e = 0; e < kEpochs; ++e) {
    INFO("epoch " << e);
    CHECK(resumed["epochs"][e]["loss"].get<double>() ==
          Approx(reference["epochs"][e]["loss"].get<double>()).epsilon(1e-6));
  }
  CHECK(resumed["test_acc"].get<double>() == Approx(reference["test_acc"].get<double>()).margin(1e-9));
  // Machine 1 holds a replica of rank 0 again, and its own files.
  CHECK(latest(CheckpointStore::replica(ckpt / "m1", 0)) == kEpochs - 1);
  CHECK(latest(own1) == kEpochs - 1);
  WARN(fmt::format("machine 1's checkpoints wiped after epoch {} was committed; resumed from machine 0's replica, "
                   "test acc {:.4f} (uninterrupted {:.4f}); replication per checkpoint: {:.3f} s of {:.3f} s, {} "
                   "bytes sent by rank 0",
                   committed, resumed["test_acc"].get<double>(), reference["test_acc"].get<double>(),
                   reference["checkpoints"]["replica_time_s"].get<double>() / kEpochs,
                   reference["checkpoints"]["time_s"].get<double>() / kEpochs,
                   reference["checkpoints"]["replica_bytes_sent"].get<int64_t>() / kEpochs));

  // Without replicas the same loss is refused, naming what each rank holds.
  {
    const fs::path bare = job.ws / "ckpt-bare";
    auto first = job.start(launch_flags, command(bare, "bare.json", {"--checkpoint-replicas", "0"}));
    REQUIRE(first.wait(120s) == std::optional<int>(0));
    CHECK_FALSE(fs::exists(bare / "m0" / "replica"));
    fs::remove_all(bare / "m1");
    auto again = job.start(launch_flags, command(bare, "bare.json", {"--checkpoint-replicas", "0", "--resume"}));
    const auto rc2 = again.wait(120s);
    const std::string log2 = again.log() + read_text(job.logs() / "trainer-0.log");
    INFO("launcher output and trainer 0's log:\n" << log2);
    CHECK(rc2 != std::optional<int>(0));
    CHECK_THAT(log2, Catch::Contains(fmt::format("(rank 0: the end of epoch {}; rank 1: none)", kEpochs - 1)));
  }
  job.check_nothing_left();
}
