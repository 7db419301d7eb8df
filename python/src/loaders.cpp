// dgld._C's loaders: DataLoader (mini-batches of blocks made by C++ threads
// or sampler-workers, client::DistDataLoader) and EdgeDataLoader (link
// prediction, client::DistEdgeDataLoader); make_block. Waits for a batch
// release the GIL and check for Ctrl-C every 100 ms.
#include <chrono>
#include <memory>

#include "common/buffer_pool.h"
#include "client/link_loader.h"
#include "common/partition/link_split.h"
#include "common/sampling/multi_layer_sampler.h"
#include "python/src/client.h"

namespace dgld::python {
namespace {

// The next batch of a loader (DistDataLoader, DistEdgeDataLoader), waiting
// with the GIL released and Ctrl-C checked every 100 ms, at most
// `next_timeout`; nullopt at the end of the epoch.
template <typename Loader>
auto next_interruptibly(Loader& loader, std::chrono::milliseconds next_timeout, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  wait_interruptibly([&](std::chrono::milliseconds step) {
    return loader.wait_ready(step) || std::chrono::steady_clock::now() - t0 >= next_timeout;
  });
  py::gil_scoped_release release;
  auto r = loader.next(std::chrono::milliseconds(0));
  if (!r.is_ok() && r.status().code() == StatusCode::timeout) {
    throw StatusError(timeout_error(std::string(what) + ": no batch within " + std::to_string(next_timeout.count()) +
                                    " ms (" + r.status().message() + ")"));
  }
  return unwrap(std::move(r));
}

py::object make_block(const torch::Tensor& indptr, const torch::Tensor& indices, int64_t num_src,
                      const std::optional<torch::Tensor>& src_ids, const std::optional<torch::Tensor>& dst_ids) {
  auto g = unwrap(ops::BlockGraph::create(as_ids(indptr, "block indptr"), as_ids(indices, "block indices"), num_src));
  if (src_ids) g->src_ids = as_ids(*src_ids, "block src ids");
  if (dst_ids) g->dst_ids = as_ids(*dst_ids, "block dst ids");
  return to_python(g);
}

// A heterogeneous batch's input rows: [(node type id, positions in
// input_nodes, rows)] for every type with the feature.
py::list typed_rows(std::vector<client::TypedRows>&& typed) {
  py::list out;
  for (auto& t : typed) {
    const auto n = static_cast<int64_t>(t.index.size());
    torch::Tensor rows;
    if (t.rows.empty()) {
      rows = torch::empty({n, t.dim}, torch::kFloat32);
    } else {
      auto* owned = new std::vector<float>(std::move(t.rows));
      rows = torch::from_blob(owned->data(), {n, t.dim}, [owned](void*) { delete owned; }, torch::kFloat32);
    }
    out.append(py::make_tuple(t.ntype, tensor_of(std::move(t.index)), rows));
  }
  return out;
}

// A finished batch as Python sees it: (input_nodes, seeds, blocks, features
// or None, labels or None, timings dict); the rows fetched with the batch are
// also the first block's srcdata[feature_] and the last's dstdata[label_].
// A heterogeneous batch's blocks carry every edge's type (block.etypes(), of
// num_etypes types) and its features are typed_rows' list.
py::object to_python_batch(client::Batch&& b, const std::string& feature_, const std::string& label_,
                           int64_t num_etypes = 0) {
  auto& mb = b.mini_batch;
  std::vector<ops::BlockGraphPtr> graphs;
  for (Block& blk : mb.blocks) graphs.push_back(unwrap(ops::block_graph_from(std::move(blk), true, num_etypes)));
  const int64_t n = static_cast<int64_t>(mb.input_nodes.size());
  py::object features = py::none(), labels = py::none();
  if (b.feature_dim > 0) {
    torch::Tensor f;
    if (b.slot_features) {
      auto holder = b.slot_features;
      f = torch::from_blob(const_cast<float*>(holder.get()), {n, b.feature_dim},
                           [holder](void*) mutable { holder.reset(); }, torch::kFloat32);
    } else {
      auto* owned = new std::vector<float>(std::move(b.features));
      auto pool = b.features_pool;
      if (owned->data() == nullptr) {
        delete owned;
        f = torch::empty({n, b.feature_dim}, torch::kFloat32);
      } else {
        f = torch::from_blob(
            owned->data(), {n, b.feature_dim},
            [owned, pool](void*) {
              if (pool) pool->give(std::move(*owned));
              delete owned;
            },
            torch::kFloat32);
      }
    }
    features = py::cast(f);
  }
  if (!b.labels.empty() || mb.seeds.empty()) labels = py::cast(tensor_of(std::move(b.labels)));
  // The rows fetched with the batch, also as DGL's block.srcdata / dstdata.
  if (!features.is_none()) graphs.front()->src_data[feature_] = features.cast<torch::Tensor>();
  if (!labels.is_none()) graphs.back()->dst_data[label_] = labels.cast<torch::Tensor>();
  if (!b.typed_features.empty()) features = typed_rows(std::move(b.typed_features));
  py::list blocks;
  for (const auto& g : graphs) blocks.append(to_python(g));
  py::dict timings;
  timings["sample_s"] = b.timings.sample_s;
  timings["fetch_s"] = b.timings.fetch_s;
  timings["wait_s"] = b.timings.wait_s;
  return py::make_tuple(tensor_of(std::move(mb.input_nodes)), tensor_of(std::move(mb.seeds)), blocks, features,
                        labels, timings);
}


class DataLoader {
 public:
  DataLoader(std::shared_ptr<Client> c, const torch::Tensor& seeds_in, SamplingSpec sampling, int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed, int prefetch, std::string feature,
             std::string label, int num_threads, std::vector<std::string> samplers, double batch_timeout_s,
             int64_t feature_cache_mb)
      : client_(std::move(c)), feature_(feature), label_(label) {
    const auto seeds = as_ids(seeds_in, "DistNodeDataLoader");
    client::DataLoaderOptions o;
    o.batch_size = batch_size;
    o.shuffle = shuffle;
    o.drop_last = drop_last;
    o.seed = seed;
    check(sampling.validate());
    o.spec.sampling = std::move(sampling);
    o.spec.feature = std::move(feature);
    o.spec.label = std::move(label);
    o.spec.feature_cache_bytes = static_cast<size_t>(std::max<int64_t>(0, feature_cache_mb)) << 20;
    if (samplers.empty()) {
      o.spec.shared_feature_cache = client_->shared_halo_cache(o.spec.feature, o.spec.feature_cache_bytes);
    }
    o.prefetch = prefetch;
    o.samplers = std::move(samplers);
    o.local_threads = num_threads;
    o.local_thread_nice = 10;  // the training step in Python takes the cores first
    o.batch_timeout = std::chrono::milliseconds(static_cast<int64_t>(batch_timeout_s * 1000));
    o.next_timeout = std::max(o.next_timeout, 2 * o.batch_timeout);
    next_timeout_ = o.next_timeout;
    if (batch_size < 1) throw StatusError(invalid_argument("batch_size must be >= 1"));
    std::vector<int64_t> ids(seeds.data_ptr<int64_t>(), seeds.data_ptr<int64_t>() + seeds.numel());
    client::Cluster& cluster = client_->cluster();
    {
      py::gil_scoped_release release;
      loader_ = unwrap(client::DistDataLoader::create(cluster, std::move(ids), std::move(o)));
    }
    num_etypes_ = cluster.config().types.num_etypes();
    client_->add_loader(loader_);
  }

  ~DataLoader() {
    py::gil_scoped_release release;
    loader_->shutdown();
  }

  int64_t num_batches() const { return loader_->num_batches_per_epoch(); }

  void start_epoch(int epoch, int64_t first_batch) {
    client_->starting_epoch(loader_);
    py::gil_scoped_release release;
    loader_->start_epoch(epoch, first_batch);
  }

  // What the loader holds (bytes): its feature cache, the largest batch so
  // far, the idle feature buffers kept for its next batches; and the feature
  // cache's hits (shared by the loaders that share the cache).
  py::dict memory() const {
    const auto m = loader_->memory();
    py::dict d;
    d["feature_cache"] = m.feature_cache;
    d["largest_batch"] = m.largest_batch;
    d["idle_buffers"] = m.idle_buffers;
    d["feature_cache_hits"] = loader_->feature_cache_hits_misses().first;
    return d;
  }

  // None at the end of the epoch; else (input_nodes, seeds, blocks,
  // features or None, labels or None, timings dict).
  py::object next() {
    auto b = next_interruptibly(*loader_, next_timeout_, "DistNodeDataLoader");
    if (!b) return py::none();
    return to_python_batch(std::move(*b), feature_, label_, num_etypes_);
  }

 private:
  std::shared_ptr<Client> client_;
  std::string feature_, label_;
  std::shared_ptr<client::DistDataLoader> loader_;
  int64_t num_etypes_ = 0;  // heterogeneous graphs: blocks carry edge types
  std::chrono::milliseconds next_timeout_{120000};
};

// DistEdgeDataLoader (link prediction): batches of training edges with
// negatives, the blocks of their ends (client/link_loader.h).
class EdgeDataLoader {
 public:
  EdgeDataLoader(std::shared_ptr<Client> c, const torch::Tensor& eids_in, SamplingSpec sampling, int64_t batch_size, bool shuffle, uint64_t seed, int prefetch, std::string feature, int num_threads,
                 int num_negatives, const std::string& negative_sampler, bool exclude_seed_edges,
                 bool exclude_positives, int64_t feature_cache_mb, bool exclude_reverse)
      : client_(std::move(c)), feature_(feature) {
    const auto eids = as_ids(eids_in, "DistEdgeDataLoader");
    client::LinkLoaderOptions o;
    o.batch_size = batch_size;
    o.shuffle = shuffle;
    o.seed = seed;
    check(sampling.validate());
    o.sampling = std::move(sampling);
    o.feature = std::move(feature);
    o.feature_cache_bytes = static_cast<size_t>(std::max<int64_t>(0, feature_cache_mb)) << 20;
    o.shared_feature_cache = client_->shared_halo_cache(o.feature, o.feature_cache_bytes);
    o.num_negatives = num_negatives;
    o.negative_sampler = unwrap(client::parse_negative_sampler(negative_sampler));
    o.sampling.exclude = exclude_seed_edges ? SamplingSpec::Exclude::seed_edges : SamplingSpec::Exclude::none;
    o.exclude_positives = exclude_positives;
    o.exclude_reverse = exclude_reverse;
    o.prefetch = prefetch;
    o.threads = num_threads;
    o.thread_nice = 10;
    next_timeout_ = o.next_timeout;
    std::vector<int64_t> ids(eids.data_ptr<int64_t>(), eids.data_ptr<int64_t>() + eids.numel());
    client::Cluster& cluster = client_->cluster();
    {
      py::gil_scoped_release release;
      if (exclude_positives) {
        // Every partition's held-out edges (the link split files are where
        // the config says; on one machine, all of them).
        auto held = std::make_shared<EdgePairSet>();
        auto pairs = held_out_pairs(cluster.config());
        if (!pairs.is_ok()) {
          throw StatusError(pairs.status().with_context("exclude_positives needs every partition's held-out edges"));
        }
        for (const auto& [u, v] : *pairs) held->add(u, v);
        o.held_out = std::move(held);
      }
      loader_ = unwrap(client::DistEdgeDataLoader::create(cluster, std::move(ids), std::move(o)));
    }
    num_etypes_ = cluster.config().types.num_etypes();
  }

  ~EdgeDataLoader() {
    py::gil_scoped_release release;
    loader_.reset();
  }

  int64_t num_batches() const { return loader_->num_batches_per_epoch(); }

  void start_epoch(int epoch, int64_t first_batch) {
    py::gil_scoped_release release;
    loader_->start_epoch(epoch, first_batch);
  }

  // None at the end of the epoch; else the node batch's tuple followed by
  // (pos_u, pos_v, neg_u, neg_v): rows of seeds, and pos_eid: the positive
  // edges' ids. A heterogeneous graph's blocks carry edge types and its
  // features are typed_rows' list, as DataLoader's.
  py::object next() {
    auto b = next_interruptibly(*loader_, next_timeout_, "DistEdgeDataLoader");
    if (!b) return py::none();
    std::vector<int64_t> neg_u;
    neg_u.reserve(b->neg_v.size());
    for (const int64_t u : b->pos_u) neg_u.insert(neg_u.end(), static_cast<size_t>(b->num_negatives), u);
    auto node = to_python_batch(std::move(b->batch), feature_, "", num_etypes_).cast<py::tuple>();
    return py::make_tuple(node[0], node[1], node[2], node[3], node[5], tensor_of(std::move(b->pos_u)),
                          tensor_of(std::move(b->pos_v)), tensor_of(std::move(neg_u)), tensor_of(std::move(b->neg_v)),
                          tensor_of(std::move(b->pos_eid)));
  }

 private:
  std::shared_ptr<Client> client_;
  std::string feature_;
  std::unique_ptr<client::DistEdgeDataLoader> loader_;
  int64_t num_etypes_ = 0;  // heterogeneous graphs: blocks carry edge types
  std::chrono::milliseconds next_timeout_{120000};
};

}  // namespace

py::object to_python(const ops::BlockGraphPtr& g) { return torch::jit::toPyObject(c10::IValue(g)); }

namespace {

// The blocks C++'s multi-layer sampler makes for `seeds` with `rng_seed`
// over the job's servers, without the data loader: what the tests compare
// the loader's blocks against. A test hook that stays in _C, not in
// dgld._test_hooks: it needs this process's job connection (the Client's
// cluster, made by _C's copy of the client library) and returns
// torch.classes.dgld.Block objects, whose class a second extension module
// could only get by linking common/ops again, which registers the "dgld"
// TORCH_LIBRARY a second time: LibTorch aborts the process when it loads.
py::list sample_blocks(std::shared_ptr<Client> c, const torch::Tensor& seeds_in, std::vector<int64_t> fanouts,
                       uint64_t rng_seed) {
  const auto seeds = as_ids(seeds_in, "sample_blocks");
  client::DistNeighborSource source(c->cluster());
  MultiLayerNeighborSampler sampler(std::move(fanouts));
  MiniBatch mb;
  {
    py::gil_scoped_release release;
    mb = unwrap(sampler.sample(source, span_of(seeds), rng_seed));
  }
  py::list out;
  for (Block& b : mb.blocks) out.append(to_python(unwrap(ops::block_graph_from(std::move(b), true))));
  return out;
}

}  // namespace

void bind_loaders(py::module_& m) {
  // DGL's NeighborSampler arguments, checked once (common/sampling/sampling_spec.h).
  py::class_<SamplingSpec>(m, "SamplingSpec")
      .def(py::init([](std::vector<int64_t> fanouts, std::vector<std::vector<int64_t>> etype_fanouts, bool out_edges,
                       bool replace, std::string prob) {
             SamplingSpec spec{.fanouts = std::move(fanouts),
                               .etype_fanouts = std::move(etype_fanouts),
                               .out_edges = out_edges,
                               .replace = replace,
                               .prob = std::move(prob)};
             check(spec.validate());
             return spec;
           }),
           py::arg("fanouts"), py::arg("etype_fanouts") = std::vector<std::vector<int64_t>>{},
           py::arg("out_edges") = false, py::arg("replace") = false, py::arg("prob") = "")
      .def_readonly("fanouts", &SamplingSpec::fanouts)
      .def_readonly("etype_fanouts", &SamplingSpec::etype_fanouts)
      .def_readonly("out_edges", &SamplingSpec::out_edges)
      .def_readonly("replace", &SamplingSpec::replace)
      .def_readonly("prob", &SamplingSpec::prob)
      .def("__repr__", [](const SamplingSpec& s) { return "SamplingSpec(" + s.to_string() + ")"; });

  py::class_<DataLoader>(m, "DataLoader")
      .def(py::init<std::shared_ptr<Client>, const torch::Tensor&, SamplingSpec, int64_t, bool, bool,
                    uint64_t, int, std::string, std::string, int, std::vector<std::string>, double, int64_t>(),
           py::arg("client"), py::arg("seeds"), py::arg("sampling"), py::arg("batch_size"),
           py::arg("shuffle"), py::arg("drop_last"), py::arg("seed"), py::arg("prefetch"), py::arg("feature"),
           py::arg("label"), py::arg("num_threads"), py::arg("samplers"), py::arg("batch_timeout_s"),
           py::arg("feature_cache_mb"))
      .def("num_batches", &DataLoader::num_batches)
      .def("start_epoch", &DataLoader::start_epoch, py::arg("epoch"), py::arg("first_batch") = 0)
      .def("memory", &DataLoader::memory)
      .def("next", &DataLoader::next);

  py::class_<EdgeDataLoader>(m, "EdgeDataLoader")
      .def(py::init<std::shared_ptr<Client>, const torch::Tensor&, SamplingSpec, int64_t, bool, uint64_t,
                    int, std::string, int, int, const std::string&, bool, bool, int64_t, bool>())
      .def("num_batches", &EdgeDataLoader::num_batches)
      .def("start_epoch", &EdgeDataLoader::start_epoch, py::arg("epoch"), py::arg("first_batch") = 0)
      .def("next", &EdgeDataLoader::next);
  m.def("make_block", &make_block, py::arg("indptr"), py::arg("indices"), py::arg("num_src"),
        py::arg("src_ids") = std::nullopt, py::arg("dst_ids") = std::nullopt);
  m.def("_batch_rng_seed", &client::batch_rng_seed);
  m.def("_sample_blocks", &sample_blocks);
}

}  // namespace dgld::python
