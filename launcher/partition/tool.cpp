#include "launcher/partition/tool.h"

#include <iostream>

#include "common/cli.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "launcher/partition/file_input.h"
#include "launcher/partition/generator.h"
#include "launcher/partition/hetero_generator.h"
#include "launcher/partition/hetero_input.h"
#include "launcher/partition/partitioner.h"
#include "launcher/partition/verify.h"

namespace dgld {
namespace po = boost::program_options;

namespace {

constexpr const char* kProgram = "dgl-partition";
constexpr const char* kUsage =
    "(--input ogb:DIR | --input edges:FILE | --generate sbm:key=value,... | --generate hsbm:key=value,...)\n"
    "       --output DIR [options]\n"
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
    "  src,dst lines (train/valid/test.csv, optional valid_neg/test_neg.csv) is split that way.";

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
  po::options_description desc("Options");
  desc.add_options()
      ("input", po::value(&in.spec), "ogb:DIR or edges:FILE")
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
      ("verify", po::value(&verify), "check a partitioned graph (its JSON) and exit");
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
  if (in.spec.empty() == generate.empty()) {
    std::cerr << kProgram << ": give exactly one of --input and --generate (try --help)\n";
    return 2;
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
  } else {
    if (Status st = homogeneous_only("--input " + in.spec); !st.is_ok()) return fail(st);
    auto s = make_file_source(in);
    if (!s.is_ok()) return fail(s.status());
    source = std::move(s).value();
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
