// Distributed data-parallel training end to end: two graph-server processes
// (two simulated machines on loopback), two trainer-host processes (ranks 0
// and 1) that sample through the servers, average gradients with c10d Gloo
// and sum evaluation counts; and a trainer killed mid-run making its peer fail
// with an error instead of hanging.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cerrno>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checkpoint_store.h"
#include "common/file_util.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "tests/support/dist_job.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST_CASE("dist trainer: two trainers train data-parallel and agree on accuracy", "[dist]") {
  DistJob job;
  job.run_all(30);
  auto j = job.read_metrics();
  CHECK(j["num_trainers"] == 2);
  CHECK(j["rank"] == 0);
  REQUIRE(j["epochs"].size() == 30);
  for (const char* k : {"epoch", "loss", "train_acc", "time_s", "sample_s", "fetch_s", "compute_s", "allreduce_s",
                        "seeds_per_s"}) {
    INFO(k);
    CHECK(j["epochs"][0].contains(k));
  }
  CHECK(j["epochs"][0]["allreduce_s"].get<double>() > 0);
  // CPU time per stage: on the threads that did the work, none above the whole process's.
  const auto& cpu = j["epochs"][1]["cpu"];
  for (const char* k : {"sample_s", "fetch_s", "compute_s", "allreduce_s", "process_s"}) {
    INFO(k);
    REQUIRE(cpu.contains(k));
    CHECK(cpu[k].get<double>() >= 0);
  }
  CHECK(cpu["compute_s"].get<double>() > 0);
  CHECK(cpu["sample_s"].get<double>() > 0);
  CHECK(cpu["process_s"].get<double>() >= cpu["compute_s"].get<double>() + cpu["allreduce_s"].get<double>());
  // Memory: the peak after each epoch never falls; the end-of-run record says
  // where it goes, every part below the peak.
  CHECK(j["epochs"][0]["peak_rss_bytes"].get<int64_t>() > 0);
  CHECK(j["epochs"][29]["peak_rss_bytes"].get<int64_t>() >= j["epochs"][0]["peak_rss_bytes"].get<int64_t>());
  const auto& mem = j["memory"];
  const int64_t peak = mem["peak_rss_bytes"].get<int64_t>();
  CHECK(peak >= j["epochs"][29]["peak_rss_bytes"].get<int64_t>());
  CHECK(mem["anon_bytes"].get<int64_t>() > 0);
  CHECK(mem["partition_bytes"].get<int64_t>() > 0);
  CHECK(mem["largest_batch_bytes"].get<int64_t>() > 0);
  CHECK(mem["largest_batch_bytes"].get<int64_t>() < peak);
  CHECK(mem["feature_cache_bytes"].get<int64_t>() >= 0);
  CHECK(mem["prefetch_limit_bytes"].get<int64_t>() == int64_t{512} << 20);
  CHECK(job.trainers[0].log().find("memory: peak RSS") != std::string::npos);
  CHECK(j["epochs"][29]["loss"].get<double>() < j["epochs"][0]["loss"].get<double>());
  REQUIRE(j["evals"].size() == 3);
  CHECK(j["test_acc"].get<double>() > 0.5);
  CHECK(j["val_acc"].get<double>() > 0.5);
  // Both trainers report the same (allreduced) accuracy.
  const std::string acc = "test acc " + fmt::format("{:.4f}", j["test_acc"].get<double>());
  CHECK(job.trainers[0].log().find(acc) != std::string::npos);
  CHECK(job.trainers[1].log().find(acc) != std::string::npos);
  // Rank 0 was asked to stop the servers once everyone was done.
  for (auto& s : job.servers) CHECK(s.wait(20s).has_value());
}

TEST_CASE("dist trainer: two trainers per machine (four in all)", "[dist]") {
  DistJob job(2);
  job.run_all(8);
  auto j = job.read_metrics();
  CHECK(j["num_trainers"] == 4);
  WARN("4 trainers, 8 epochs: test acc " << j["test_acc"].get<double>());
  CHECK(j["test_acc"].get<double>() > 0.5);
  // Each trainer took a quarter of the training seeds (node_split, force_even).
  for (auto& t : job.trainers) CHECK(t.log().find("of 4 (machine") != std::string::npos);
}

TEST_CASE("dist trainer: settings from DGL's environment variables; sampler-workers started by the trainer",
          "[dist][samplers]") {
  DistJob job(1, /*samplers_per_trainer=*/1);
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> argv = {trainer_host_bin().string()};
    for (const auto& f : job.train_flags(3)) argv.push_back(f);
    if (r == 0) argv.push_back("--shutdown-servers");
    job.trainers.push_back(Process::start(argv, job.dir.path() / ("trainer" + std::to_string(r) + ".log"),
                                          {{"OMP_NUM_THREADS", "2"},
                                           {"DGL_IP_CONFIG", job.ip_config.string()},
                                           {"DGL_CONF_PATH", job.part_config.string()},
                                           {"DGL_NUM_SERVER", "1"},
                                           {"DGL_NUM_SAMPLER", "1"},
                                           {"DGLD_MACHINE_ID", std::to_string(r)},
                                           {"DGLD_TRAINER_RANK", std::to_string(r)},
                                           {"DGLD_NUM_TRAINERS", "2"}}));
  }
  for (auto& t : job.trainers) {
    const auto rc = t.wait(120s);
    INFO("trainer log:\n" << t.log());
    REQUIRE(rc == std::optional<int>(0));
    const std::string log = t.log();
    const auto at = log.find("started 1 sampler-worker(s): 127.0.0.1:");
    REQUIRE(at != std::string::npos);
    const auto pid_at = log.find("(pid ", at);
    REQUIRE(pid_at != std::string::npos);
    const pid_t pid = std::stoi(log.substr(pid_at + 5));
    INFO("sampler-worker pid " << pid);
    CHECK((::kill(pid, 0) != 0 && errno == ESRCH));  // stopped and reaped with its trainer
    CHECK(log.find("batches made by sampler-workers: 0,") == std::string::npos);
    CHECK(log.find("batches made by sampler-workers: ") != std::string::npos);
  }
  CHECK(job.read_metrics()["epochs"].size() == 3);
}

TEST_CASE("dist trainer: a learnable embedding, checkpoints, and an exact resume", "[dist][checkpoint]") {
  DistJob job;
  job.servers_stop_at_end = false;  // three runs against the same servers
  auto flags = [&](const std::string& ckpt) {
    return std::vector<std::string>{"--learnable-features", "concat", "--embed-dim", "8",
                                    "--checkpoint-dir", (job.dir.path() / ckpt).string()};
  };
  job.run_all(3, flags("whole"));
  const auto whole = job.read_metrics();
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    CHECK(CheckpointStore(job.dir.path() / "whole", rank).valid().front() == CheckpointPosition{3, 0});
  }

  job.run_all(1, flags("split"));
  auto resume = flags("split");
  resume.push_back("--resume");
  job.run_all(3, resume);
  const auto resumed = job.read_metrics();
  CHECK(resumed["resumed_from_epoch"] == 0);
  CHECK(resumed["resumed_at"]["epoch"] == 1);
  REQUIRE(resumed["epochs"].size() == 3);
  for (int e = 0; e < 3; ++e) {
    INFO("epoch " << e);
    CHECK(resumed["epochs"][e]["loss"].get<double>() == Approx(whole["epochs"][e]["loss"].get<double>()).epsilon(1e-6));
  }
  CHECK(resumed["test_acc"].get<double>() == Approx(whole["test_acc"].get<double>()).margin(0.002));
  for (auto& t : job.trainers) CHECK(t.log().find("resumed from the checkpoint of the end of epoch 0") != std::string::npos);
}

TEST_CASE("dist trainer: an unknown --feature stops every trainer with the partition's tensors named", "[dist]") {
  DistJob job;
  job.start_trainer(0, 1, {"--feature", "nope"});
  job.start_trainer(1, 1, {"--feature", "nope"});
  for (auto& t : job.trainers) {
    const auto rc = t.wait(60s);
    INFO(t.log());
    REQUIRE(rc.has_value());
    CHECK(*rc == 1);
    CHECK(t.log().find("--feature: partition") != std::string::npos);
    CHECK(t.log().find("has no node tensor '_N/nope' (it has: ") != std::string::npos);
  }
}

TEST_CASE("dist trainer: a killed trainer makes its peer fail, not hang", "[dist]") {
  // Rank 0 also hosts the rendezvous store; either loss must end the other.
  const int victim = GENERATE(1, 0);
  const int survivor = 1 - victim;
  DistJob job;
  job.start_trainer(0, 1000);
  job.start_trainer(1, 1000);
  Process& dead = job.trainers[static_cast<size_t>(victim)];
  Process& alive = job.trainers[static_cast<size_t>(survivor)];
  INFO("killing rank " << victim);
  REQUIRE(alive.wait_for_log("Epoch 00001 | Loss", 60s));
  dead.signal(SIGKILL);
  REQUIRE(dead.wait(10s).has_value());
  const auto t_kill = std::chrono::steady_clock::now();
  const auto rc = alive.wait(40s);
  const auto waited = std::chrono::steady_clock::now() - t_kill;
  INFO("surviving trainer's log:\n" << alive.log());
  REQUIRE(rc.has_value());
  INFO("surviving trainer exit code " << *rc);
  CHECK(*rc != 0);
  CHECK(waited < 35s);
  CHECK(alive.log().find("rank " + std::to_string(survivor) + " of 2") != std::string::npos);
  CHECK(alive.log().find("error trainer:") != std::string::npos);
  CHECK(alive.log().find("Epoch 00999") == std::string::npos);
}

TEST_CASE("dist trainer: GraphSAGE on Cora, 2 partitions and 2 trainers", "[dist][cora]") {
  const fs::path cora = source_root() / "../shared/datasets/cora";
  if (!fs::exists(cora / "raw/edge.csv.gz")) {
    WARN("skipped: the Cora dataset is not at " << cora.string() << " (it is in the shared folder next to the repo)");
    return;
  }
  TempDir data("dgld-dist-cora");
  const std::string cmd = "'" + partition_bin().string() + "' --input ogb:" + cora.string() +
                          " --num-parts 2 --graph-name cora --output '" + (data.path() / "parts").string() +
                          "' --log-level warn > '" + (data.path() / "partition.log").string() + "' 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  DistJob job(1, 0, data.path() / "parts/cora.json");
  // A shorter run than scripts/bench/accuracy.sh's (100 epochs, >= 0.78):
  // Cora's 140 training nodes make one step per epoch.
  job.run_all(50, {"--num-hidden", "64", "--weight-decay", "5e-4", "--row-normalize", "--eval-every", "0",
                   "--fan-out", "10,25", "--num-threads", "1"});
  const auto j = job.read_metrics();
  WARN("Cora, 2 partitions, 2 trainers, 50 epochs: val acc " << j["val_acc"].get<double>() << ", test acc "
                                                             << j["test_acc"].get<double>());
  CHECK(j["test_acc"].get<double>() >= 0.72);
  CHECK(j["val_acc"].get<double>() >= 0.68);
}

TEST_CASE("dist trainer: a job with a shared secret; a trainer without it is refused", "[dist][auth]") {
  DistJob job(1, /*samplers_per_trainer=*/1, dist_dataset().json, /*with_secret=*/true);
  SECTION("every connection authenticates: servers, trainers and their sampler-workers") {
    job.run_all(2, {"--num-samplers", "1"});
    CHECK(job.read_metrics()["epochs"].size() == 2);
    for (auto& t : job.trainers) CHECK(t.log().find("batches made by sampler-workers: 0,") == std::string::npos);
  }
  SECTION("a trainer without the secret gets a clear error, and the server logs the attempt") {
    std::vector<std::string> argv = {trainer_host_bin().string(), "--ip-config", job.ip_config.string(),
                                     "--part-config", job.part_config.string(), "--machine-id", "0",
                                     "--rank", "0", "--num-trainers", "2"};
    auto intruder = Process::start(argv, job.dir.path() / "intruder.log");  // no DGLD_SECRET_FILE
    const auto rc = intruder.wait(60s);
    INFO(intruder.log());
    REQUIRE(rc.has_value());
    CHECK(*rc == 1);
    CHECK(intruder.log().find("authentication required") != std::string::npos);
    CHECK(job.servers[0].wait_for_log("refused client 127.0.0.1:", 10s));
    CHECK(job.servers[0].log().find("registered trainer") == std::string::npos);
  }
}

namespace {
// The distributed training graph with a seeded 85/5/10 link split.
PartitionedGraph& link_dataset() {
  static PartitionedGraph d(kDistGraph, 2, "dgld-dist-link", {"--link-split", "0.85,0.05,0.1", "--seed", "3"});
  return d;
}
}  // namespace

TEST_CASE("dist trainer: link prediction (--task link) trains and ranks held-out edges", "[dist][link]") {
  DistJob job(1, 0, link_dataset().json);
  // GCN: on this SBM graph the community signal is in the neighbourhoods
  // (features alone barely separate the classes); see bench/link results
  // for GraphSAGE on Cora.
  job.run_all(8, {"--task", "link", "--model", "gcn", "--num-hidden", "32", "--batch-size", "512", "--lr", "0.01",
                  "--eval-every", "2", "--keep-best", "mrr", "--num-negatives", "5", "--neg-exclude-positives",
                  "--fan-out", "10,10", "--dropout", "0"});
  const auto j = job.read_metrics();
  CHECK(j["task"] == "link");
  REQUIRE(j["epochs"].size() == 8);
  // --keep-best mrr: the reported figures are those of the evaluation with
  // the best validation MRR (the first of equals).
  REQUIRE(j["evals"].size() == 4);
  size_t best = 0;
  for (size_t i = 1; i < j["evals"].size(); ++i) {
    if (j["evals"][i]["val"]["mrr"].get<double>() > j["evals"][best]["val"]["mrr"].get<double>()) best = i;
  }
  CHECK(j["best_epoch"] == j["evals"][best]["epoch"]);
  CHECK(j["test"] == j["evals"][best]["test"]);
  CHECK(j["val"] == j["evals"][best]["val"]);
  CHECK(j["epochs"][7]["loss"].get<double>() < j["epochs"][0]["loss"].get<double>());
  const auto& t = j["test"];
  WARN("generated graph, link prediction, 8 epochs: test MRR " << t["mrr"].get<double>() << ", AUC "
                                                               << t["roc_auc"].get<double>());
  CHECK(t["num_edges"].get<int64_t>() == link_dataset().config.link_split.num_test);
  for (const char* k : {"mrr", "hits@1", "hits@10", "hits@50", "roc_auc"}) {
    INFO(k);
    CHECK(t[k].get<double>() >= 0.0);
    CHECK(t[k].get<double>() <= 1.0);
  }
  // 100 negatives per test edge: a random scorer's MRR is about 0.05, its AUC 0.5.
  CHECK(t["roc_auc"].get<double>() > 0.6);
  CHECK(t["mrr"].get<double>() > 0.09);
  CHECK(t["hits@10"].get<double>() >= t["hits@1"].get<double>());
  CHECK(t["hits@50"].get<double>() >= t["hits@10"].get<double>());
  // Both trainers report the same (allreduced) metrics.
  const std::string mrr = fmt::format("Test MRR {:.4f}", t["mrr"].get<double>());
  CHECK(job.trainers[0].log().find(mrr) != std::string::npos);
  CHECK(job.trainers[1].log().find(mrr) != std::string::npos);
}

TEST_CASE("dist trainer: --task link on a partition without a link split is refused, naming the config",
          "[dist][link]") {
  DistJob job;
  auto& t0 = job.start_trainer(0, 1, {"--task", "link"});
  auto& t1 = job.start_trainer(1, 1, {"--task", "link"});
  for (Process* t : {&t0, &t1}) {
    const auto rc = t->wait(60s);
    REQUIRE(rc.has_value());
    CHECK(*rc != 0);
    CHECK(t->log().find("has no link split") != std::string::npos);
  }
}

// ---------------------------------------------------------------- heterogeneous graphs

namespace {

// A typed graph whose relations carry the class (hsbm, docs/heterogeneous.md),
// in 2 partitions, with reverse relations.
PartitionedGraph& hetero_dataset() {
  static PartitionedGraph d("hsbm:papers=3000,authors=1500,venues=24,topics=60,feat_dim=16,seed=4", 2,
                            "dgld-dist-hetero", {"--add-reverse"});
  return d;
}

}  // namespace

TEST_CASE("dist trainer: R-GCN on a heterogeneous graph beats a model of the papers' own features", "[dist][hetero]") {
  const std::vector<std::string> rgcn = {"--model", "rgcn", "--embed-dim", "32", "--num-bases", "4", "--eval-every", "0"};
  double rgcn_acc = 0;
  {
    DistJob job(1, 0, hetero_dataset().json);
    job.run_all(8, rgcn);
    auto j = job.read_metrics();
    rgcn_acc = j["test_acc"].get<double>();
    CHECK(j["epochs"][7]["loss"].get<double>() < j["epochs"][0]["loss"].get<double>());
    // Both trainers report the same (allreduced) accuracy.
    const std::string acc = "test acc " + fmt::format("{:.4f}", rgcn_acc);
    for (auto& t : job.trainers) CHECK(t.log().find(acc) != std::string::npos);
    CHECK(job.trainers[0].log().find("rels=8, bases=4") != std::string::npos);
  }
  // No neighbours in training or evaluation: each paper's own features only.
  auto own = DistJob::merge_flags(rgcn, {"--fan-out", "0,0", "--eval-fan-out", "0"});
  DistJob job(1, 0, hetero_dataset().json);
  job.run_all(8, own);
  const double own_acc = job.read_metrics()["test_acc"].get<double>();
  WARN("R-GCN test acc " << rgcn_acc << ", papers' own features only " << own_acc);
  CHECK(rgcn_acc > 0.8);
  CHECK(rgcn_acc > own_acc + 0.2);
}

TEST_CASE("dist trainer: R-GCN on typed batches made by sampler-workers", "[dist][hetero][sampler]") {
  // Typed blocks (edge types) and per-type feature rows come through the
  // workers' replies: the same batches as the trainer makes itself (same
  // seeds and random streams), so the same losses and accuracy.
  const std::vector<std::string> rgcn = {"--model", "rgcn", "--embed-dim", "32", "--num-bases", "4",
                                         "--eval-every", "0"};
  DistJob job(1, /*samplers_per_trainer=*/1, hetero_dataset().json);
  job.run_all(4, DistJob::merge_flags(rgcn, {"--num-samplers", "1"}));
  const auto j = job.read_metrics();
  for (auto& t : job.trainers) {
    INFO(t.log());
    CHECK(t.log().find("batches made by sampler-workers: 0,") == std::string::npos);
    CHECK(t.log().find("by this trainer: 0,") != std::string::npos);
  }
  DistJob own(1, 0, hetero_dataset().json);
  own.run_all(4, rgcn);
  const auto k = own.read_metrics();
  WARN("R-GCN on sampler-workers' batches: test acc " << j["test_acc"].get<double>() << ", on the trainers' own "
                                                      << k["test_acc"].get<double>());
  CHECK(j["test_acc"].get<double>() == k["test_acc"].get<double>());
  for (int e = 0; e < 4; ++e) CHECK(j["epochs"][e]["loss"].get<double>() == k["epochs"][e]["loss"].get<double>());
}

TEST_CASE("dist trainer: what R-GCN and heterogeneous graphs do not do yet is refused up front", "[dist][hetero]") {
  DistJob job(1, 0, hetero_dataset().json);
  // A homogeneous model on a heterogeneous graph.
  auto& t = job.start_trainer(0, 1, {"--model", "sage"});
  REQUIRE(t.wait(60s) == std::optional<int>(1));
  CHECK(t.log().find("is heterogeneous") != std::string::npos);
  CHECK(t.log().find("--model rgcn") != std::string::npos);
  // A target type that does not exist.
  job.trainers.clear();
  auto& u = job.start_trainer(0, 1, {"--model", "rgcn", "--target-ntype", "journal"});
  REQUIRE(u.wait(60s) == std::optional<int>(1));
  CHECK(u.log().find("'journal' is not a node type") != std::string::npos);
}

namespace {

// A small graph in OGB's heterogeneous raw layout (ogbn-mag's files):
// papers (features, labels, a split), authors and institutions (none).
// Paper p has class p % 4; author a writes papers of class a % 4 and cites
// stay inside a class, so the relations carry the label; paper features are
// a deterministic function of the paper's id (checked after partitioning).
float mag_feature(int64_t paper, int j) { return static_cast<float>((paper * 31 + j * 7) % 97) / 97.0f - 0.5f; }

void write_mag_layout(const fs::path& dir, int64_t papers, int64_t authors, int64_t institutions) {
  const fs::path raw = dir / "raw";
  fs::create_directories(raw / "relations/author___writes___paper");
  fs::create_directories(raw / "relations/paper___cites___paper");
  fs::create_directories(raw / "relations/author___affiliated_with___institution");
  fs::create_directories(raw / "node-feat/paper");
  fs::create_directories(raw / "node-label/paper");
  fs::create_directories(dir / "split/time/paper");
  std::ofstream(raw / "num-node-dict.csv") << "author,institution,paper\n"
                                           << authors << "," << institutions << "," << papers << "\n";
  {
    std::ofstream w(raw / "relations/author___writes___paper/edge.csv");
    for (int64_t a = 0; a < authors; ++a) {
      for (int k = 0; k < 4; ++k) w << a << "," << ((a * 13 + k * 29) % (papers / 4)) * 4 + a % 4 << "\n";
    }
    std::ofstream c(raw / "relations/paper___cites___paper/edge.csv");
    for (int64_t p = 0; p < papers; ++p) c << p << "," << (p + 4 * (1 + p % 5)) % papers << "\n";
    std::ofstream i(raw / "relations/author___affiliated_with___institution/edge.csv");
    for (int64_t a = 0; a < authors; ++a) i << a << "," << a % institutions << "\n";
  }
  std::ofstream f(raw / "node-feat/paper/node-feat.csv"), l(raw / "node-label/paper/node-label.csv");
  std::ofstream tr(dir / "split/time/paper/train.csv"), va(dir / "split/time/paper/valid.csv"),
      te(dir / "split/time/paper/test.csv");
  for (int64_t p = 0; p < papers; ++p) {
    for (int j = 0; j < 6; ++j) f << (j ? "," : "") << mag_feature(p, j);
    f << "\n";
    l << p % 4 << "\n";
    (p % 10 < 6 ? tr : p % 10 < 8 ? va : te) << p << "\n";
  }
}

}  // namespace

TEST_CASE("dist trainer: a graph in the ogbn-mag layout partitions, verifies, maps back and trains", "[dist][hetero]") {
  TempDir dir("dgld-mag-layout");
  write_mag_layout(dir.path() / "mag", 800, 300, 12);
  const fs::path out = dir.path() / "parts";
  auto part = Process::start({partition_bin().string(), "--input", "ogb:" + (dir.path() / "mag").string(),
                              "--add-reverse", "--num-parts", "2", "--graph-name", "g", "--output", out.string()},
                             dir.path() / "partition.log");
  REQUIRE(part.wait(120s) == std::optional<int>(0));
  auto verify = Process::start({partition_bin().string(), "--verify", (out / "g.json").string()},
                               dir.path() / "verify.log");
  REQUIRE(verify.wait(120s) == std::optional<int>(0));
  CHECK(verify.log().find("OK") != std::string::npos);

  // Every paper's row is the input row of its original (per-type) id, and
  // each type's original ids are all there once.
  auto config = load_part_config(out / "g.json");
  REQUIRE(config.is_ok());
  const GraphTypeInfo& t = config->types;
  REQUIRE(t.ntypes == std::vector<std::string>{"author", "institution", "paper"});
  CHECK(t.target_ntype == "paper");
  CHECK(t.etype_id("paper:rev-writes:author") >= 0);
  const int paper = t.ntype_id("paper");
  std::vector<std::set<int64_t>> seen(3);
  for (int p = 0; p < 2; ++p) {
    auto mp = open_partition(*config, p, true);
    REQUIRE(mp.is_ok());
    const auto orig = (*mp)->orig_node_ids();
    const IdRange own = config->node_map[p];
    for (int ty = 0; ty < 3; ++ty) {
      const IdRange r = t.ntype_map[ty][p];
      for (int64_t v = r.start; v < r.end; ++v) CHECK(seen[ty].insert(orig[v - own.start]).second);
    }
    const TensorView* f = (*mp)->node_tensor("paper/features");
    REQUIRE(f != nullptr);
    const IdRange r = t.ntype_map[paper][p];
    REQUIRE(f->num_rows() == r.size());
    const float* rows = f->as<float>().data();
    for (int64_t v = r.start; v < r.end; ++v) {
      const int64_t o = orig[v - own.start];
      for (int j = 0; j < 6; ++j) REQUIRE(rows[(v - r.start) * 6 + j] == Approx(mag_feature(o, j)).margin(1e-6));
    }
  }
  CHECK(seen[0].size() == 300);
  CHECK(seen[1].size() == 12);
  CHECK(seen[2].size() == 800);
  CHECK(*seen[2].rbegin() == 799);

  DistJob job(1, 0, out / "g.json");
  job.run_all(6, {"--model", "rgcn", "--embed-dim", "16", "--batch-size", "64", "--eval-every", "0"});
  auto j = job.read_metrics();
  WARN("ogbn-mag layout graph: R-GCN test acc " << j["test_acc"].get<double>());
  CHECK(j["test_acc"].get<double>() > 0.5);
}
