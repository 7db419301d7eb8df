#include "partition/tool.h"

#include <iostream>

#include "common/cli.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "partition/chunked.h"
#include "partition/dist_launch.h"
#include "partition/file_input.h"
#include "partition/generator.h"
#include "partition/hetero_generator.h"
#include "partition/hetero_input.h"
#include "partition/partitioner.h"
#include "partition/verify.h"

namespace dgld {
namespace po = boost::program_options;

namespace {

constexpr const char* kProgram = "dgl-partition";
constexpr const char* kUsage =
    "(--input ogb:DIR | --input edges:FILE | --input chunks:DIR |\n"
    "        --generate sbm:key=value,... | --generate hsbm:key=value,...) --output DIR [options]\n"
    "       dgl-partition (--input ... | --generate sbm:...) --to-chunks N --output DIR [--graph-name NAME]\n"
    "       dgl-partition --verify DIR/<graph_name>.json\n\n"
    "Partitions a graph for dgld (DGL's partition_graph): writes DIR/<graph_name>.json and\n"
    "DIR/part<i>/{graph,node_feat,edge_feat}.dgld (docs/partition-format.md).\n\n"
    "Inputs:\n"
    "  ogb:DIR     OGB raw layout: DIR/raw/{edge,node-feat,node-label,num-node-list}.csv[.gz],\n"
    "              DIR/split/<split>/{train,valid,test}.csv[.gz]; each undirected edge once,\n"
    "              the reverse is added (edge E+i reverses edge i).\n"
    "  edges:FILE  'src,dst' per line (directed, edge i = line i), with optional\n"
    "              --node-feats (one row of floats per node), --labels (one int per line),\n"
    "              --train-ids/--val-ids/--test-ids (one node id per line). The node count is\n"
    "              --num-nodes, else the number of labels, else the largest id + 1.\n"
    "  chunks:DIR  DGL's chunked graph layout (homogeneous): DIR/metadata.json naming node\n"
    "              chunks, edge chunks ('src dst' text files, edge ids in order) and node data\n"
    "              .npy chunks (features, labels, train_mask, val_mask, test_mask).\n"
    "  sbm:...     degree-corrected stochastic block model; keys nodes, avg_degree, classes,\n"
    "              feat_dim, p_in, gamma, centroid_scale, train, val, test, seed\n"
    "              (e.g. sbm:nodes=200000,avg_degree=20,classes=47,feat_dim=100,p_in=0.8)\n\n"
    "Heterogeneous inputs (several node and edge types):\n"
    "  ogb:DIR     with DIR/raw/num-node-dict.csv[.gz]: the OGB heterogeneous layout (ogbn-mag):\n"
    "              raw/num-node-dict.csv (type names, then counts), raw/relations/<src>___<rel>___<dst>/\n"
    "              edge.csv[.gz] (per-type ids), raw/node-feat/<type>/node-feat.csv[.gz],\n"
    "              raw/node-label/<type>/node-label.csv[.gz] (the target type; --target-ntype picks\n"
    "              one when several have labels), split/<split>/<target>/{train,valid,test}.csv[.gz].\n"
    "              Edges are taken as listed (directed); --add-reverse adds the reverse relations.\n"
    "  hsbm:...    typed stochastic block model: node types paper (target), author, venue, topic;\n"
    "              relations author:writes:paper, paper:cites:paper, paper:published_in:venue,\n"
    "              paper:has_topic:topic; keys papers, authors, venues, topics, classes, feat_dim,\n"
    "              writes_per_paper, cites_per_paper, topics_per_paper, p_in, centroid_scale,\n"
    "              train, val, test, seed (e.g. hsbm:papers=100000,authors=50000,classes=16)\n"
    "  --add-reverse  for every relation src:rel:dst add dst:rev-rel:src with every edge reversed\n"
    "              (after the input's relations; the reverse of edge i gets id E+i).\n\n"
    "Link prediction (docs/formats.md, 'Link split'):\n"
    "  --link-split 0.85,0.05,0.1 holds out a seeded (--seed) random 5 % / 10 % of the edges\n"
    "  (undirected edges on a symmetric graph) as validation / test edges: they leave the graph\n"
    "  and go to part<i>/link_split.dgld with --link-negatives K negatives each; the training\n"
    "  edges are marked in the edge tensor train_mask. An OGB input whose split directory holds\n"
    "  src,dst lines (train/valid/test.csv, optional valid_neg/test_neg.csv) is split that way.\n\n"
    "Chunked output (docs/formats.md, 'Chunked graphs'):\n"
    "  --to-chunks N  instead of partitioning, write the (homogeneous) input to --output DIR in\n"
    "  DGL's chunked layout: N node chunks and N edge chunks of near-equal size, edges in original\n"
    "  id order, node data as .npy; --graph-name names the graph. Partitioning options\n"
    "  (--num-parts, --part-method, ...) are not used; --link-split is an error.";

Status run_verify(const std::string& json) {
  VerifyReport r;
  DGLD_RETURN_IF_ERROR(verify_partitions(json, &r));
  std::cout << json << ": OK (" << r.num_parts << " partitions, " << r.num_nodes << " nodes, " << r.num_edges
            << " edges, " << r.halo_nodes << " halo nodes, " << r.halo_edges << " halo edges";
  if (r.link_split) {
    std::cout << "; link split: " << r.link_train << " train / " << r.link_valid << " valid / " << r.link_test
              << " test edges";
  }
  std::cout << ")\n";
  return Status::ok();
}

}  // namespace

int run_partition_tool(int argc, const char* const argv[]) {
  PartitionOptions opts;
  FileInputOptions in;
  LogOptions log_opts;
  log_opts.program = kProgram;
  std::string generate, verify, stats_json, link_split, target_ntype;
  bool add_reverse = false;
  int to_chunks = 0;
  DistLaunchOptions dist;
  bool distributed = false;
  std::string chunks_dir, ip_config, scotch_edge_fraction;
  po::options_description desc("Options");
  desc.add_options()
      ("input", po::value(&in.spec), "ogb:DIR, edges:FILE or chunks:DIR")
      ("generate", po::value(&generate),
       "built-in generator: sbm:nodes=100000,avg_degree=20,... or hsbm:papers=20000,...")
      ("split", po::value(&in.split), "OGB split name (default: the only one under DIR/split)")
      ("node-feats", po::value(&in.node_feats), "edges input: node feature CSV")
      ("labels", po::value(&in.labels), "edges input: node label file")
      ("train-ids", po::value(&in.train_ids), "edges input: training node ids")
      ("val-ids", po::value(&in.val_ids), "edges input: validation node ids")
      ("test-ids", po::value(&in.test_ids), "edges input: test node ids")
      ("num-nodes", po::value(&in.num_nodes), "edges input: number of nodes")
      ("target-ntype", po::value(&target_ntype),
       "heterogeneous input: the node type with labels and masks (default: the only one with labels)")
      ("add-reverse", po::bool_switch(&add_reverse),
       "heterogeneous input: add the reverse relation dst:rev-REL:src of every relation src:REL:dst")
      ("num-parts", po::value(&opts.num_parts)->default_value(1), "number of partitions (machines)")
      ("part-method", po::value(&opts.part_method)->default_value("metis"), "metis or random")
      ("balance-train", po::bool_switch(&opts.balance_train), "balance training nodes across partitions")
      ("balance-edges", po::bool_switch(&opts.balance_edges), "balance in-edges across partitions")
      ("num-hops", po::value(&opts.num_hops)->default_value(1), "halo depth")
      ("num-trainers-per-machine", po::value(&opts.num_trainers_per_machine)->default_value(1),
       "METIS into parts*T pieces and store a trainer_id per node")
      ("graph-name", po::value(&opts.graph_name)->default_value("graph"), "name of the graph (and the JSON file)")
      ("output", po::value<std::string>(), "output directory")
      ("overwrite", po::bool_switch(&opts.overwrite), "replace an existing non-empty output directory")
      ("seed", po::value(&opts.seed)->default_value(0),
       "seed for METIS, random partitioning and the --link-split shuffle and negatives")
      ("link-split", po::value(&link_split),
       "TRAIN,VALID,TEST edge fractions (sum 1): hold out validation and test edges for link prediction")
      ("link-negatives", po::value(&opts.link.num_negatives),
       "negative destinations drawn per validation/test edge (default 100; 0: none)")
      ("stats-json", po::value(&stats_json), "also write the summary as JSON to this file")
      ("verify", po::value(&verify), "check a partitioned graph (its JSON) and exit")
      ("to-chunks", po::value(&to_chunks),
       "write the input as N chunks in DGL's chunked graph layout to --output instead of partitioning")
      ("distributed", po::bool_switch(&distributed),
       "partition --chunks across the machines of --ip-config (one rank each, mpirun over ssh) with PT-Scotch "
       "(docs/distributed-partitioning.md)")
      ("chunks", po::value(&chunks_dir), "--distributed: the chunked graph (--to-chunks), at this path on every machine")
      ("ip-config", po::value(&ip_config), "--distributed: the machines, one rank each (dgl-launch's ip_config.txt)")
      ("local", po::bool_switch(&dist.local), "--distributed: every rank on this machine (--num-parts of them)")
      ("imbalance", po::value(&dist.imbalance)->default_value(dist.imbalance),
       "--distributed: PT-Scotch's node count imbalance ratio")
      ("scotch-edge-fraction", po::value(&scotch_edge_fraction)->default_value("auto"),
       "--distributed: the share of edges PT-Scotch cuts by (each undirected edge kept with this probability); "
       "below 1 its memory shrinks in proportion, at some cost in edge cut; auto: as much as keeps each rank "
       "within 2.5x its share of the input; 1: every edge")
      ("refine-rounds", po::value(&dist.refine_rounds)->default_value(dist.refine_rounds),
       "--distributed: rounds of size-constrained label propagation on every edge after PT-Scotch's cut of a "
       "sample (each moves boundary nodes to the part most of their neighbours are in, within --imbalance); 0: none")
      ("identity-file", po::value(&dist.identity_file), "--distributed: ssh private key for the remote ranks")
      ("ssh-option", po::value(&dist.ssh_options)->composing(),
       "--distributed: extra ssh option K=V for the remote ranks (repeatable)");
  add_log_options(desc, log_opts);
  po::variables_map vm;
  switch (parse_command_line(argc, argv, kProgram, kUsage, desc, vm)) {
    case CliOutcome::exit_ok: return 0;
    case CliOutcome::exit_error: return 2;
    case CliOutcome::run: break;
  }
  if (Status st = setup_logging(log_opts); !st.is_ok()) {
    std::cerr << kProgram << ": " << st.to_string() << "\n";
    return 2;
  }
  auto fail = [](const Status& st) {
    std::cerr << kProgram << ": " << st.to_string() << "\n";
    return 1;
  };
  if (!verify.empty()) {
    Status st = run_verify(verify);
    return st.is_ok() ? 0 : fail(st);
  }
  if (vm.count("output")) opts.output = vm["output"].as<std::string>();
  if (distributed) {
    if (!in.spec.empty() || !generate.empty()) {
      return fail(invalid_argument("--distributed reads --chunks DIR (write them with --to-chunks), not --input or "
                                   "--generate"));
    }
    if (opts.num_hops != 1 || opts.num_trainers_per_machine != 1 || !link_split.empty() || opts.balance_train ||
        opts.balance_edges) {
      return fail(invalid_argument("--distributed supports neither --num-hops > 1, --num-trainers-per-machine > 1, "
                                   "--link-split nor --balance-* yet"));
    }
    dist.ip_config = ip_config;
    dist.num_parts = vm["num-parts"].defaulted() ? 0 : opts.num_parts;
    dist.chunks = chunks_dir;
    dist.output = opts.output;
    dist.graph_name = vm["graph-name"].defaulted() ? "" : opts.graph_name;
    dist.seed = opts.seed;
    dist.overwrite = opts.overwrite;
    dist.stats_json = stats_json;
    dist.log_level = log_opts.level;
    auto fraction = parse_scotch_edge_fraction(scotch_edge_fraction);
    if (!fraction.is_ok()) return fail(fraction.status());
    dist.scotch_edge_fraction = *fraction;
    Status st = run_distributed_partition(dist);
    if (!st.is_ok()) return fail(st);
    return 0;
  }
  if (in.spec.empty() == generate.empty()) {
    std::cerr << kProgram << ": give exactly one of --input and --generate (try --help)\n";
    return 2;
  }
  if (vm.count("to-chunks")) {
    if (to_chunks < 1) return fail(invalid_argument("--to-chunks " + std::to_string(to_chunks) + ": expected at least 1 chunk"));
    if (!link_split.empty() || vm.count("link-negatives")) {
      return fail(invalid_argument("--link-split/--link-negatives do not apply to --to-chunks (the chunked layout "
                                   "holds no edge split)"));
    }
    if (opts.output.empty()) return fail(invalid_argument("--to-chunks needs --output DIR"));
  }
  if (!link_split.empty()) {
    auto f = parse_link_split_fractions(link_split);
    if (!f.is_ok()) return fail(f.status());
    opts.link.random = true;
    opts.link.fractions = *f;
  }
  if (Status st = check_partition_options(opts); !st.is_ok()) return fail(st);

  std::unique_ptr<GraphSource> source;
  // --add-reverse and --target-ntype apply to heterogeneous inputs only.
  auto homogeneous_only = [&](const std::string& what) -> Status {
    if (add_reverse) {
      return invalid_argument("--add-reverse applies to heterogeneous inputs only (ogb:DIR with "
                              "raw/num-node-dict.csv, hsbm:...), not to " + what +
                              " (a homogeneous OGB input already gets its reverse edges)");
    }
    if (!target_ntype.empty()) {
      return invalid_argument("--target-ntype applies to heterogeneous inputs only, not to " + what);
    }
    return Status::ok();
  };
  if (!generate.empty()) {
    const std::string name = generate.substr(0, generate.find(':'));
    if (name == "hsbm") {
      auto params = parse_hsbm_spec(generate);
      if (!params.is_ok()) return fail(params.status());
      if (!target_ntype.empty() && target_ntype != kHsbmNtypes[0]) {
        return fail(invalid_argument("--target-ntype '" + target_ntype + "': the target type of hsbm is '" +
                                     kHsbmNtypes[0] + "'"));
      }
      source = make_hsbm_source(*params, add_reverse);
    } else if (name == "sbm") {
      if (Status st = homogeneous_only("--generate sbm"); !st.is_ok()) return fail(st);
      auto params = parse_generator_spec(generate);
      if (!params.is_ok()) return fail(params.status());
      source = make_sbm_source(*params);
    } else {
      return fail(invalid_argument("--generate '" + generate + "': unknown generator '" + name +
                                   "' (known: sbm, hsbm)"));
    }
  } else if (in.spec.rfind("ogb:", 0) == 0 && is_ogb_hetero_dir(in.spec.substr(4))) {
    if (!in.node_feats.empty() || !in.labels.empty() || !in.train_ids.empty() || !in.val_ids.empty() ||
        !in.test_ids.empty() || in.num_nodes != 0) {
      return fail(invalid_argument("--node-feats/--labels/--train-ids/--val-ids/--test-ids/--num-nodes apply to "
                                   "--input edges:FILE only"));
    }
    HeteroOgbOptions h;
    h.dir = in.spec.substr(4);
    h.split = in.split;
    h.target_ntype = target_ntype;
    h.add_reverse = add_reverse;
    auto s = make_ogb_hetero_source(h);
    if (!s.is_ok()) return fail(s.status());
    source = std::move(s).value();
  } else if (in.spec.rfind("chunks:", 0) == 0) {
    if (Status st = homogeneous_only("--input " + in.spec); !st.is_ok()) return fail(st);
    if (!in.node_feats.empty() || !in.labels.empty() || !in.train_ids.empty() || !in.val_ids.empty() ||
        !in.test_ids.empty() || in.num_nodes != 0 || !in.split.empty()) {
      return fail(invalid_argument("--node-feats/--labels/--train-ids/--val-ids/--test-ids/--num-nodes/--split do "
                                   "not apply to --input chunks:DIR (its metadata.json names everything)"));
    }
    auto s = make_chunked_source(in.spec.substr(std::string("chunks:").size()));
    if (!s.is_ok()) return fail(s.status());
    source = std::move(s).value();
  } else {
    if (Status st = homogeneous_only("--input " + in.spec); !st.is_ok()) return fail(st);
    auto s = make_file_source(in);
    if (!s.is_ok()) return fail(s.status());
    source = std::move(s).value();
  }
  if (to_chunks > 0) {
    if (Status st = write_chunked(*source, opts.output, to_chunks, opts.graph_name, opts.overwrite); !st.is_ok()) {
      return fail(st);
    }
    auto written = read_chunked_metadata(opts.output);
    if (!written.is_ok()) return fail(written.status());
    std::cout << "wrote " << to_chunks << " chunks: " << written->num_nodes() << " nodes, " << written->num_edges()
              << " edges to " << opts.output.string() << "\n";
    return 0;
  }
  PartitionStats stats;
  if (Status st = partition_graph(*source, opts, &stats); !st.is_ok()) return fail(st);
  std::cout << format_stats(stats);
  if (!stats_json.empty()) {
    if (Status st = write_file_atomic(stats_json, stats_to_json(stats)); !st.is_ok()) return fail(st);
  }
  return 0;
}

}  // namespace dgld
