// Checkpoint replicas (--checkpoint-replicas, docs/reliability.md): each
// machine's checkpoints on a path of its own (as on machines without shared
// storage), the job killed with kill -9 once a position is committed, then
// machine 1's whole checkpoint directory wiped (its disk lost with it). The
// job started again with --resume: trainer 1 gets its files from the copy
// machine 0 holds, verifies them, and the run ends as an uninterrupted one.
// The same for node classification, link prediction (--task link, with the
// mlp scorer, resumed mid-epoch) and R-GCN on a heterogeneous graph. Without
// replicas the same loss is refused, naming what each rank holds.
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

// The newest intact position of `store`, {0, 0} while there is none.
CheckpointPosition latest(const CheckpointStore& store) {
  const auto held = store.valid();
  return held.empty() ? CheckpointPosition{} : held.front();
}

const std::vector<std::string> kLaunchFlags = {"--num-trainers", "1", "--num-samplers", "1"};

// trainer-host with `train` (replacing the shared flags of the same name)
// writing its metrics to `metrics` (in the job's src) and its checkpoints
// into <ckpt>/m<machine>: a directory of its own per machine.
std::vector<std::string> trainer_command(const fs::path& ckpt, const std::string& metrics,
                                         const std::vector<std::string>& train) {
  std::vector<std::string> c = {"/bin/sh", "-c",
                                fmt::format("exec \"$0\" \"$@\" --checkpoint-dir {}/m$DGLD_MACHINE_ID", ckpt.string()),
                                trainer_host_bin().string()};
  const auto flags = DistJob::merge_flags({"--fan-out", "5,10", "--batch-size", "200", "--num-hidden", "32", "--lr",
                                           "0.03", "--eval-every", "0", "--no-progress", "--seed", "11",
                                           "--collective-timeout-s", "30", "--metrics-out", metrics},
                                          train);
  c.insert(c.end(), flags.begin(), flags.end());
  return c;
}

// " history bytes from byte N": where trainer `rank`'s first checkpoint copy
// after its last resume began its journal (the job's logs hold every run's
// lines); empty when there is none.
std::string first_copy_after_resume(LocalJob& job, int rank) {
  const std::string log = read_text(job.logs() / fmt::format("trainer-{}.log", rank));
  const auto resumed = log.rfind("resumed from the checkpoint of");
  if (resumed == std::string::npos) return {};
  const auto at = log.find(" history bytes from byte ", resumed);
  return at == std::string::npos ? std::string() : log.substr(at, log.find(" to rank", at) - at);
}

struct WipedRun {
  nlohmann::json reference, resumed;  // metrics of rank 0
  CheckpointPosition committed;       // where the resumed run started
};

// An uninterrupted run of `epochs` epochs; the same run killed with kill -9
// once every rank's files and machine 0's replica of rank 1 hold `kill_at`
// (or newer), machine 1's checkpoint directory removed, and the run resumed.
// Checks that trainer 1 fetched its files from the replica, that both
// resumed at the same position and that every epoch's loss is the
// uninterrupted run's; the caller compares the final metrics.
WipedRun wipe_machine1_and_resume(LocalJob& job, int epochs, const std::vector<std::string>& flags,
                                  CheckpointPosition kill_at) {
  auto train = DistJob::merge_flags(flags, {"--num-epochs", std::to_string(epochs)});
  WipedRun run;
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto p = job.start(kLaunchFlags, trainer_command(job.ws / "ckpt-ref", "reference.json", train));
    const auto rc = p.wait(120s);
    INFO("launcher output:\n" << p.log());
    REQUIRE(rc == std::optional<int>(0));
  }
  run.reference = nlohmann::json::parse(read_text(job.src / "reference.json"));
  // Every checkpoint was copied: rank 0's to machine 1 and back.
  REQUIRE(run.reference.contains("checkpoints"));
  CHECK(run.reference["checkpoints"]["replicas"] == 1);
  CHECK(run.reference["checkpoints"]["replica_bytes_sent"].get<int64_t>() > 0);
  const CheckpointPosition end{epochs, 0};
  CHECK(latest(CheckpointStore::replica(job.ws / "ckpt-ref" / "m0", 1)) == end);
  CHECK(latest(CheckpointStore::replica(job.ws / "ckpt-ref" / "m1", 0)) == end);
  const double reference_s = seconds_since(t0);

  const fs::path ckpt = job.ws / "ckpt";
  const CheckpointStore own0(ckpt / "m0", 0), own1(ckpt / "m1", 1);
  const CheckpointStore replica1 = CheckpointStore::replica(ckpt / "m0", 1);
  {
    auto p = job.start(kLaunchFlags, trainer_command(ckpt, "resumed.json", train));
    INFO("launcher output:\n" << p.log());
    REQUIRE(wait_until([&] { return std::min({latest(own0), latest(own1), latest(replica1)}) >= kill_at ||
                                    !p.running(); },
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
  run.committed = std::min(latest(own0), latest(replica1));  // the newest machine 0 holds of both ranks
  REQUIRE(run.committed >= kill_at);
  REQUIRE(run.committed < end);

  auto p = job.start(kLaunchFlags, trainer_command(ckpt, "resumed.json", DistJob::merge_flags(train, {"--resume"})));
  const auto rc = p.wait(120s);
  INFO("launcher output:\n" << p.log());
  REQUIRE(rc == std::optional<int>(0));
  const std::string where = run.committed.str();
  CHECK_THAT(read_text(job.logs() / "trainer-1.log"),
             Catch::Contains(fmt::format("no intact checkpoint of {} in {}: fetched from rank 0's replica (machine 0)",
                                         where, own1.dir().string())) &&
                 Catch::Contains(") and verified"));
  for (int rank : {0, 1}) {
    INFO("trainer " << rank);
    CHECK_THAT(read_text(job.logs() / fmt::format("trainer-{}.log", rank)),
               Catch::Contains(fmt::format("resumed from the checkpoint of {}", where)));
  }
  // The resumed run's first copies: rank 1's history goes on from what
  // machine 0's replica held at the agreed position; rank 0's whole (machine
  // 1's replica of it is gone).
  CHECK(first_copy_after_resume(job, 0) == " history bytes from byte 0");
  CHECK_FALSE(first_copy_after_resume(job, 1).empty());
  CHECK(first_copy_after_resume(job, 1) != " history bytes from byte 0");
  run.resumed = nlohmann::json::parse(read_text(job.src / "resumed.json"));
  CHECK(run.resumed["resumed_at"]["epoch"] == run.committed.epoch);
  CHECK(run.resumed["resumed_at"]["step"] == run.committed.step);
  REQUIRE(run.resumed["epochs"].size() == static_cast<size_t>(epochs));
  for (int e = 0; e < epochs; ++e) {
    INFO("epoch " << e);
    CHECK(run.resumed["epochs"][e]["loss"].get<double>() ==
          Approx(run.reference["epochs"][e]["loss"].get<double>()).epsilon(1e-6));
  }
  // Machine 1 holds a replica of rank 0 again, and its own files.
  CHECK(latest(CheckpointStore::replica(ckpt / "m1", 0)) == end);
  CHECK(latest(own1) == end);
  WARN(fmt::format("machine 1's checkpoints wiped after {} was committed; resumed from machine 0's replica. "
                   "Uninterrupted run {:.1f} s, disturbed and resumed {:.1f} s; per checkpoint {:.3f} s, of which "
                   "the replica {:.3f} s, {} bytes sent by rank 0",
                   where, reference_s, seconds_since(t0) - reference_s,
                   run.reference["checkpoints"]["time_s"].get<double>() /
                       run.reference["checkpoints"]["count"].get<double>(),
                   run.reference["checkpoints"]["replica_time_s"].get<double>() /
                       run.reference["checkpoints"]["count"].get<double>(),
                   run.reference["checkpoints"]["replica_bytes_sent"].get<int64_t>() /
                       run.reference["checkpoints"]["count"].get<int64_t>()));
  return run;
}

}  // namespace

TEST_CASE("fault: a machine's checkpoint directory lost with the job; its trainer resumes from the replica another "
          "machine holds", "[fault][replica]") {
  constexpr int kEpochs = 8;
  LocalJob job(2, kDistGraph);
  const WipedRun run = wipe_machine1_and_resume(job, kEpochs, {}, {3, 0});  // the end of epoch 2
  CHECK(run.resumed["resumed_from_epoch"] == run.committed.epoch - 1);
  CHECK(run.resumed["test_acc"].get<double>() == Approx(run.reference["test_acc"].get<double>()).margin(1e-9));
  WARN(fmt::format("node classification: test acc {:.4f} (uninterrupted {:.4f})", run.resumed["test_acc"].get<double>(),
                   run.reference["test_acc"].get<double>()));

  // A copy that did not happen: every rank wrote the end of the last epoch,
  // then the job failed before machine 1 received rank 0's copy of it (the
  // 60-minute soak's kill -9 of a trainer mid-copy). The next run resumes
  // there from the ranks' own files, and rank 0's first copy continues from
  // the newest copy machine 1 holds (the one before), not from byte 0.
  {
    const fs::path ckpt = job.ws / "ckpt";
    const CheckpointStore held0 = CheckpointStore::replica(ckpt / "m1", 0);
    const CheckpointPosition end{kEpochs, 0};
    REQUIRE(latest(held0) == end);
    fs::remove(held0.meta_path(end));
    fs::remove(held0.payload_path(end));
    const CheckpointPosition before = latest(held0);
    REQUIRE(before < end);
    auto meta = held0.verify(before);
    REQUIRE(meta.is_ok());
    const auto mark = CheckpointStore::history_mark(*meta, held0.meta_path(before));
    REQUIRE((mark.is_ok() && mark->has_value()));
    auto p = job.start(kLaunchFlags, trainer_command(ckpt, "more.json", {"--num-epochs", std::to_string(kEpochs + 1),
                                                                        "--resume"}));
    const auto rc = p.wait(120s);
    INFO("launcher output:\n" << p.log());
    REQUIRE(rc == std::optional<int>(0));
    CHECK_THAT(read_text(job.logs() / "trainer-0.log"),
               Catch::Contains(fmt::format("resumed from the checkpoint of {}", end.str())));
    CHECK(first_copy_after_resume(job, 0) == fmt::format(" history bytes from byte {}", (*mark)->bytes));
    CHECK(latest(held0) == CheckpointPosition{kEpochs + 1, 0});
  }

  // Without replicas the same loss is refused, naming what each rank holds.
  const std::vector<std::string> train = {"--num-epochs", std::to_string(kEpochs), "--checkpoint-replicas", "0"};
  const fs::path bare = job.ws / "ckpt-bare";
  auto first = job.start(kLaunchFlags, trainer_command(bare, "bare.json", train));
  REQUIRE(first.wait(120s) == std::optional<int>(0));
  CHECK_FALSE(fs::exists(bare / "m0" / "replica"));
  fs::remove_all(bare / "m1");
  auto again = job.start(kLaunchFlags, trainer_command(bare, "bare.json", DistJob::merge_flags(train, {"--resume"})));
  const auto rc = again.wait(120s);
  const std::string log = again.log() + read_text(job.logs() / "trainer-0.log");
  INFO("launcher output and trainer 0's log:\n" << log);
  CHECK(rc != std::optional<int>(0));
  CHECK_THAT(log, Catch::Contains(fmt::format("(rank 0: the end of epoch {}; rank 1: none)", kEpochs - 1)));
  job.check_nothing_left();
}

TEST_CASE("fault: link prediction (--task link, mlp scorer) resumed mid-epoch from a wiped machine's replica ends as "
          "the uninterrupted run", "[fault][replica-link]") {
  constexpr int kEpochs = 6;
  LocalJob job(2, kDistGraph, {"--link-split", "0.85,0.05,0.1", "--seed", "3"});
  // A checkpoint every 8 steps: killed inside epoch 2, so the edge loader,
  // the negatives and dropout continue from a step inside an epoch, and the
  // evaluation after epoch 1 comes back from the checkpoint's history.
  const std::vector<std::string> link = {"--task", "link", "--model", "gcn", "--scorer", "mlp", "--num-negatives", "3",
                                         "--batch-size", "512", "--lr", "0.02", "--checkpoint-every-steps", "8",
                                         "--eval-every", "2"};
  const WipedRun run = wipe_machine1_and_resume(job, kEpochs, link, {2, 8});
  CHECK(run.committed.step > 0);
  REQUIRE(run.resumed["evals"].size() == kEpochs / 2);
  for (int i = 0; i < kEpochs / 2; ++i) {
    INFO("evaluation " << i);
    CHECK(run.resumed["evals"][i]["epoch"] == run.reference["evals"][i]["epoch"]);
    CHECK(run.resumed["evals"][i]["test"]["roc_auc"].get<double>() ==
          Approx(run.reference["evals"][i]["test"]["roc_auc"].get<double>()).margin(1e-6));
  }
  const auto& ref = run.reference["test"];
  const auto& got = run.resumed["test"];
  for (const char* k : {"roc_auc", "mrr", "hits@10"}) {
    INFO(k);
    CHECK(got[k].get<double>() == Approx(ref[k].get<double>()).margin(1e-6));
  }
  CHECK(ref["roc_auc"].get<double>() > 0.6);  // it learned something worth resuming
  WARN(fmt::format("link prediction: test ROC-AUC {:.4f}, MRR {:.4f} (uninterrupted {:.4f}, {:.4f}); resumed at {}",
                   got["roc_auc"].get<double>(), got["mrr"].get<double>(), ref["roc_auc"].get<double>(),
                   ref["mrr"].get<double>(), run.committed.str()));
  job.check_nothing_left();
}

TEST_CASE("fault: R-GCN on a heterogeneous graph resumed from a wiped machine's replica ends as the uninterrupted run",
          "[fault][replica-hetero]") {
  constexpr int kEpochs = 8;
  LocalJob job(2, "hsbm:papers=3000,authors=1500,venues=24,topics=60,feat_dim=16,seed=4", {"--add-reverse"});
  // The node types' projections, the featureless types' embedding rows
  // (sparse Adagrad) and the relations' weights all come back.
  const std::vector<std::string> rgcn = {"--model", "rgcn", "--embed-dim", "16", "--num-bases", "4",
                                         "--batch-size", "64", "--checkpoint-every-steps", "3"};
  const WipedRun run = wipe_machine1_and_resume(job, kEpochs, rgcn, {2, 1});
  CHECK(run.resumed["test_acc"].get<double>() == Approx(run.reference["test_acc"].get<double>()).margin(1e-9));
  CHECK(run.reference["test_acc"].get<double>() > 0.5);
  WARN(fmt::format("R-GCN: test acc {:.4f} (uninterrupted {:.4f}); resumed at {}", run.resumed["test_acc"].get<double>(),
                   run.reference["test_acc"].get<double>(), run.committed.str()));
  job.check_nothing_left();
}
