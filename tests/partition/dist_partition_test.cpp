// dgl-partition --distributed on this machine (--local): mpirun starts the
// ranks, each reads its chunks, PT-Scotch cuts, the ranks exchange nodes,
// edges and rows and write their partitions; the result must verify and hold
// exactly the input graph. Failures: a missing chunk, a bad row, a rank killed
// mid-run: the job fails naming the rank, and no partition config appears.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "common/file_util.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "partition/verify.h"
#include "tests/support/partitioned_graph.h"
#include "tests/support/process.h"

namespace dgld {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// No entry of `dir` whose name starts with `prefix`.
bool no_entry_named(const fs::path& dir, const std::string& prefix) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) return false;
  }
  return true;
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

const char* kGraph = "sbm:nodes=3000,avg_degree=10,classes=4,feat_dim=8,seed=2";

struct Run {
  int code = -1;
  std::string log;
};

Run run_tool(const std::vector<std::string>& args, const fs::path& log, std::chrono::seconds timeout = 180s) {
  std::vector<std::string> argv = {testing::partition_bin().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = testing::Process::start(argv, log);
  const auto rc = p.wait(timeout);
  return {rc.value_or(-1), p.log()};
}

// Every edge of a partitioned graph as original (src, dst) by original edge
// id, and every node's feature row by original node id.
struct Content {
  std::map<int64_t, std::pair<int64_t, int64_t>> edges;
  std::map<int64_t, std::vector<float>> rows;
  int64_t cut = 0;
};

Content content_of(const fs::path& json) {
  auto c = load_part_config(json);
  REQUIRE(c.is_ok());
  std::vector<std::unique_ptr<MappedPartition>> parts;
  for (int i = 0; i < c->num_parts; ++i) {
    auto p = open_partition(*c, i, true);
    REQUIRE(p.is_ok());
    parts.push_back(std::move(*p));
  }
  auto orig_of = [&](int64_t gid) {
    for (int p = 0; p < c->num_parts; ++p) {
      if (gid >= c->node_map[p].start && gid < c->node_map[p].end) return parts[p]->orig_node_ids()[gid - c->node_map[p].start];
    }
    FAIL("global id " << gid << " is in no partition");
    return int64_t{-1};
  };
  Content out;
  for (const auto& p : parts) {
    const auto gid = p->node_global_ids();
    const auto& in = p->in_edges();
    const TensorView* f = p->node_tensor("_N/features");
    REQUIRE(f != nullptr);
    const int64_t d = f->shape[1];
    for (int64_t v = 0; v < p->num_inner_nodes(); ++v) {
      const int64_t o = p->orig_node_ids()[v];
      out.rows[o].assign(f->as<float>().data() + v * d, f->as<float>().data() + (v + 1) * d);
      for (int64_t k = in.indptr[v]; k < in.indptr[v + 1]; ++k) {
        const int64_t src = gid[in.indices[k]];
        out.edges[p->orig_edge_ids()[k]] = {orig_of(src), o};
        out.cut += p->node_owner()[in.indices[k]] != p->part_id();
      }
    }
  }
  return out;
}

struct Chunks {
  testing::TempDir dir{"dgld-dist-partition"};
  fs::path chunks = dir.path() / "chunks";
  Chunks() {
    auto r = run_tool({"--generate", kGraph, "--to-chunks", "4", "--graph-name", "g", "--output", chunks.string()},
                      dir.path() / "to-chunks.log");
    INFO(r.log);
    REQUIRE(r.code == 0);
  }
  Run distributed(int ranks, const fs::path& out, const std::string& log_name = "dist.log",
                  const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"--distributed", "--local", "--num-parts", std::to_string(ranks),
                                     "--chunks", chunks.string(), "--output", out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_tool(args, dir.path() / log_name);
  }
};

TEST_CASE("distributed partitioning on this machine: 2 and 4 ranks give a valid partition of the same graph",
          "[distributed]") {
  Chunks c;
  // The single-process reference: METIS on the same graph.
  const fs::path single = c.dir.path() / "single";
  auto s = run_tool({"--generate", kGraph, "--num-parts", "2", "--graph-name", "g", "--output", single.string()},
                    c.dir.path() / "single.log");
  REQUIRE(s.code == 0);
  const Content want = content_of(single / "g.json");
  for (int ranks : {2, 4}) {
    INFO(ranks << " ranks");
    const fs::path out = c.dir.path() / ("dist" + std::to_string(ranks));
    auto r = c.distributed(ranks, out);
    INFO(r.log);
    REQUIRE(r.code == 0);
    CHECK(r.log.find("distributed partition: " + std::to_string(ranks) + " ranks") != std::string::npos);
    VerifyReport report;
    Status st = verify_partitions(out / "g.json", &report);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    auto config = load_part_config(out / "g.json");
    REQUIRE(config.is_ok());
    CHECK(config->num_parts == ranks);
    CHECK(config->part_method == "ptscotch");
    // Exactly the input graph: every edge between the same original nodes,
    // every node's feature row.
    const Content got = content_of(out / "g.json");
    CHECK(got.edges == want.edges);
    CHECK(got.rows == want.rows);
    // A real cut: far below a random assignment's (1 - 1/ranks of the edges).
    const double random_cut = (1.0 - 1.0 / ranks) * static_cast<double>(got.edges.size());
    WARN(ranks << " ranks: edge cut " << got.cut << " (random: about " << random_cut << ")");
    CHECK(static_cast<double>(got.cut) < 0.6 * random_cut);
    // No hidden partial directory left behind.
    CHECK(no_entry_named(out, ".part"));
  }
}

TEST_CASE("distributed partitioning: PT-Scotch on a sample of the edges still partitions the whole graph",
          "[distributed]") {
  Chunks c;
  const fs::path whole = c.dir.path() / "whole", sampled = c.dir.path() / "sampled";
  auto w = c.distributed(2, whole, "whole.log");  // --scotch-edge-fraction auto
  INFO(w.log);
  REQUIRE(w.code == 0);
  // The test graph is small: auto gives PT-Scotch every edge.
  CHECK(w.log.find("PT-Scotch on 100.0% of the edges") != std::string::npos);
  auto r = c.distributed(2, sampled, "sampled.log", {"--scotch-edge-fraction", "0.5"});
  INFO(r.log);
  REQUIRE(r.code == 0);
  CHECK(r.log.find("PT-Scotch on 50.0% of the edges") != std::string::npos);
  VerifyReport report;
  REQUIRE(verify_partitions(sampled / "g.json", &report).is_ok());
  const Content all = content_of(whole / "g.json"), got = content_of(sampled / "g.json");
  CHECK(got.edges == all.edges);  // every edge is in the partitions, not only the sampled ones
  CHECK(got.rows == all.rows);
  const double random_cut = 0.5 * static_cast<double>(got.edges.size());
  WARN("2 ranks: edge cut " << got.cut << " with half the edges seen by PT-Scotch, " << all.cut << " with all");
  CHECK(got.cut != all.cut);  // PT-Scotch did see another graph
  CHECK(static_cast<double>(got.cut) < 0.7 * random_cut);

  for (const char* bad : {"0", "1.5", "half"}) {
    INFO(bad);
    auto b = c.distributed(2, c.dir.path() / "bad", "bad.log", {"--scotch-edge-fraction", bad});
    CHECK(b.code != 0);
    CHECK(b.log.find("--scotch-edge-fraction '" + std::string(bad) + "': expected auto or a number in (0, 1]") !=
          std::string::npos);
  }
}

TEST_CASE("distributed partitioning: refinement over every edge lowers a sampled cut, within the imbalance",
          "[distributed]") {
  Chunks c;
  const fs::path plain = c.dir.path() / "plain", refined = c.dir.path() / "refined";
  // PT-Scotch sees a fifth of the edges: its cut is poor on the whole graph.
  auto p = c.distributed(2, plain, "plain.log", {"--scotch-edge-fraction", "0.2", "--refine-rounds", "0"});
  INFO(p.log);
  REQUIRE(p.code == 0);
  CHECK(p.log.find("refinement:") == std::string::npos);
  auto r = c.distributed(2, refined, "refined.log", {"--scotch-edge-fraction", "0.2"});
  INFO(r.log);
  REQUIRE(r.code == 0);
  CHECK(r.log.find("refinement: edge cut") != std::string::npos);
  VerifyReport report;
  REQUIRE(verify_partitions(refined / "g.json", &report).is_ok());
  const Content before = content_of(plain / "g.json"), after = content_of(refined / "g.json");
  CHECK(after.edges == before.edges);  // the same graph, only cut elsewhere
  CHECK(after.rows == before.rows);
  WARN("2 ranks, PT-Scotch on 20% of the edges: edge cut " << before.cut << ", refined " << after.cut);
  CHECK(after.cut < before.cut);
  // No part above (1 + imbalance) N / P nodes (imbalance 0.05).
  auto config = load_part_config(refined / "g.json");
  REQUIRE(config.is_ok());
  for (const IdRange& range : config->node_map) {
    CHECK(static_cast<double>(range.size()) <= 1.05 * static_cast<double>(config->num_nodes) / 2 + 1);
  }
  auto bad = c.distributed(2, c.dir.path() / "bad", "bad.log", {"--refine-rounds", "-1"});
  CHECK(bad.code != 0);
  CHECK(bad.log.find("--refine-rounds must be >= 0, got -1") != std::string::npos);
}

TEST_CASE("distributed partitioning: a missing chunk or a bad row stops every rank; no config is written",
          "[distributed]") {
  Chunks c;
  auto meta = read_file(c.chunks / "metadata.json");
  REQUIRE(meta.is_ok());
  // The edge chunk files as metadata.json names them.
  std::vector<fs::path> edge_files;
  for (const auto& e : fs::recursive_directory_iterator(c.chunks)) {
    if (e.is_regular_file() && e.path().parent_path().filename() == "edges") edge_files.push_back(e.path());
  }
  std::sort(edge_files.begin(), edge_files.end());
  REQUIRE(edge_files.size() == 4);

  SECTION("a bad row names the rank, the file and the line") {
    auto text = read_file(edge_files[3]);
    REQUIRE(text.is_ok());
    std::string bad = *text;
    const size_t second = bad.find('\n') + 1;
    bad.insert(second, "17 x\n");
    write_text(edge_files[3], bad);
    const fs::path out = c.dir.path() / "out-bad";
    auto r = c.distributed(2, out, "bad.log");
    CHECK(r.code != 0);
    CHECK(r.log.find("rank 1") != std::string::npos);
    CHECK(r.log.find(edge_files[3].filename().string() + ":2") != std::string::npos);
    CHECK_FALSE(fs::exists(out / "g.json"));
    CHECK_FALSE(fs::exists(out / "part0"));
  }
  SECTION("a missing chunk names the file") {
    fs::remove(edge_files[0]);
    const fs::path out = c.dir.path() / "out-missing";
    auto r = c.distributed(2, out, "missing.log");
    CHECK(r.code != 0);
    CHECK(r.log.find("rank 0") != std::string::npos);
    CHECK(r.log.find(edge_files[0].filename().string()) != std::string::npos);
    CHECK_FALSE(fs::exists(out / "g.json"));
  }
}

// The PIDs of dgl-partition-rank processes writing to `out`, by rank.
std::map<int, pid_t> rank_pids(const fs::path& out) {
  std::map<int, pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto cmd = read_file(e.path() / "cmdline");
    if (!cmd.is_ok() || cmd->find("dgl-partition-rank") == std::string::npos ||
        cmd->find(out.string()) == std::string::npos) {
      continue;
    }
    auto env = read_file(e.path() / "environ");
    if (!env.is_ok()) continue;
    const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
    const auto at = env->find(key);
    if (at == std::string::npos) continue;
    pids[std::stoi(env->substr(at + key.size()))] = static_cast<pid_t>(std::stol(name));
  }
  return pids;
}

TEST_CASE("distributed partitioning: a rank killed mid-run fails the job; no config is written", "[distributed]") {
  // Killed while the ranks exchange edges, or as they refine PT-Scotch's cut
  // (the step right after it).
  const std::string after = GENERATE(std::string("reading its chunks done"), std::string("PT-Scotch done"));
  INFO("killed after: " << after);
  testing::TempDir dir("dgld-dist-partition-kill");
  const fs::path chunks = dir.path() / "chunks", out = dir.path() / "out";
  // Large enough that the ranks are still at work when one is killed.
  auto r = run_tool({"--generate", "sbm:nodes=200000,avg_degree=16,classes=8,feat_dim=32,seed=3", "--to-chunks", "2",
                     "--graph-name", "g", "--output", chunks.string()},
                    dir.path() / "to-chunks.log");
  REQUIRE(r.code == 0);
  auto job = testing::Process::start({testing::partition_bin().string(), "--distributed", "--local", "--num-parts", "2",
                                      "--chunks", chunks.string(), "--output", out.string()},
                                     dir.path() / "dist.log");
  REQUIRE(job.wait_for_log(after, 120s));
  std::map<int, pid_t> pids;
  for (int i = 0; i < 100 && pids.size() < 2; ++i) {
    pids = rank_pids(out);
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE(pids.count(1) == 1);
  ::kill(pids[1], SIGKILL);
  const auto rc = job.wait(120s);
  INFO(job.log());
  REQUIRE(rc.has_value());
  CHECK(*rc != 0);
  CHECK(job.log().find("no partition config was written") != std::string::npos);
  CHECK_FALSE(fs::exists(out / "g.json"));
  // Every rank is gone.
  for (int i = 0; i < 100 && !rank_pids(out).empty(); ++i) std::this_thread::sleep_for(100ms);
  CHECK(rank_pids(out).empty());
}

}  // namespace
}  // namespace dgld
