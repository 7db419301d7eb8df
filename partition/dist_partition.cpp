#include "partition/dist_partition.h"

// dgl-partition-rank's command line and its MPI life; the job itself is
// rank/rank_job.h.
#include "partition/rank/rank_job.h"

#include <malloc.h>

#include <cstdlib>
#include <iostream>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "partition/dist_launch.h"

namespace dgld {
namespace fs = std::filesystem;

int run_partition_rank(int argc, const char* const argv[]) {
  namespace po = boost::program_options;
  DistPartitionOptions o;
  LogOptions log;
  log.program = "dgl-partition-rank";
  std::string chunks, output, stats_json, fraction;
  po::options_description desc("dgl-partition-rank options (started by dgl-partition --distributed through mpirun)");
  desc.add_options()("chunks", po::value(&chunks)->required(), "the chunked graph (metadata.json), on every machine")
      ("output", po::value(&output)->required(), "where this machine's part<rank> goes; rank 0 writes the config")
      ("graph-name", po::value(&o.graph_name), "name of the partitioned graph (default: the chunked graph's)")
      ("seed", po::value(&o.seed)->default_value(o.seed), "PT-Scotch's random seed")
      ("imbalance", po::value(&o.imbalance)->default_value(o.imbalance), "PT-Scotch's load imbalance ratio")
      ("scotch-edge-fraction", po::value(&fraction)->default_value("auto"),
       "the share of undirected edges PT-Scotch sees (a symmetric hash sample); 1: all; auto: see dist_partition.h")
      ("refine-rounds", po::value(&o.refine_rounds)->default_value(o.refine_rounds),
       "rounds of label propagation on every edge after PT-Scotch's cut; 0: none")
      ("overwrite", po::bool_switch(&o.overwrite), "replace an existing part<rank> and config")
      ("stats-json", po::value(&stats_json), "rank 0 writes the run's figures here");
  add_log_options(desc, log);
  po::variables_map vm;
  if (auto r = parse_command_line(argc, argv, "dgl-partition-rank", "--chunks DIR --output DIR [options]", desc, vm);
      r != CliOutcome::run) {
    return r == CliOutcome::exit_ok ? 0 : 2;
  }
  o.chunks = chunks;
  o.output = output;
  o.stats_json = stats_json;
  if (auto f = parse_scotch_edge_fraction(fraction); f.is_ok()) {
    o.scotch_edge_fraction = *f;
  } else {
    std::cerr << "dgl-partition-rank: " << f.status().message() << "\n";
    return 2;
  }
  // PT-Scotch's own threads call MPI, which MPI_Init (MPI_THREAD_SINGLE) does
  // not allow: with them, 4 ranks on this 2-core machine hung in
  // SCOTCH_dgraphPart; with one thread per rank they finish in 0.15 s. Parallelism comes
  // from the ranks (one per machine). An explicit setting is kept.
  setenv("SCOTCH_PTHREAD_NUMBER", "1", /*overwrite=*/0);
  // Blocks of 1 MiB and more come straight from mmap and go back to the
  // system when freed. glibc's default threshold rises to 32 MiB after the
  // first large free, and the exchange buffers below it then stay in the
  // heap: the peak RSS of a 1 M-node rank grew by a third that way.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  int argc_mpi = 0;
  char** argv_mpi = nullptr;
  MPI_Init(&argc_mpi, &argv_mpi);
  int rc = 0;
  {
    rank::Comm comm(MPI_COMM_WORLD);
    log.program = fmt::format("dgl-partition-rank[{}]", comm.rank());
    if (!setup_logging(log).is_ok()) {
      MPI_Abort(MPI_COMM_WORLD, 2);
      return 2;
    }
    std::error_code ec;
    fs::create_directories(o.output, ec);
    rank::RankJob job(comm, o);
    Status st = job.run();
    if (st.is_ok()) {
      nlohmann::json j = job.figures();
      if (comm.rank() == 0) {
        std::cout << fmt::format("distributed partition: {} ranks, {} nodes, {} edges, edge cut {} ({:.2f}%), "
                                 "PT-Scotch on {:.1f}% of the edges {:.2f} s, total {:.2f} s, peak rss / share of the "
                                 "input at most {:.2f}x\n",
                                 j["num_parts"].get<int>(), j["num_nodes"].get<int64_t>(), j["num_edges"].get<int64_t>(),
                                 j["edge_cut"].get<int64_t>(),
                                 100.0 * static_cast<double>(j["edge_cut"].get<int64_t>()) /
                                     static_cast<double>(std::max<int64_t>(1, j["num_edges"].get<int64_t>())),
                                 100 * j["scotch_edge_fraction"].get<double>(), j["scotch_s"].get<double>(),
                                 j["total_s"].get<double>(),
                                 j["max_rss_over_share"].get<double>());
        if (!o.stats_json.empty()) st = write_file_atomic(o.stats_json, j.dump(2) + "\n");
      }
    }
    if (!st.is_ok()) {
      job.clean_up();
      std::cerr << "dgl-partition-rank: rank " << comm.rank() << ": " << st.message() << "\n";
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}

}  // namespace dgld
