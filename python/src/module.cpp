// dgld._C: the Python binding of dgld's client library (docs/python.md).
// The Python package (python/dgld/) builds DGL's API on these few types:
//   Client      one process's membership of a job (client::Cluster)
//   DistTensor  pull / push rows by global id (client::DistTensor)
//   DataLoader  mini-batches made by C++ threads or sampler-workers
//               (client::DistDataLoader), blocks as torch.classes.dgld.Block
// Tensors cross without copies where the memory allows; every call that may
// wait (a pull, a barrier, the next batch) releases the GIL, and waits that
// can be long check for Ctrl-C every 100 ms. A dgld error becomes an
// exception of dgld.DGLError's family (python/dgld/_errors.py) carrying the
// library's message.
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "common/buffer_pool.h"
#include "common/client/cluster.h"
#include "common/client/data_loader.h"
#include "common/client/link_loader.h"
#include "common/client/dist_graph.h"
#include "common/client/dist_tensor.h"
#include "common/client/split.h"
#include "common/logging.h"
#include "common/memory.h"
#include "common/net/auth.h"
#include "common/ops/block_graph.h"
#include "common/part_config.h"
#include "common/partition/link_split.h"
#include "common/partition/partition.h"
#include "common/sampling/multi_layer_sampler.h"
#include "daemons/trainer_host/model_impl.h"

namespace py = pybind11;
using namespace dgld;
using Clock = std::chrono::steady_clock;

namespace {

// ------------------------------------------------------------------ errors

struct StatusError : std::exception {
  StatusCode code;
  std::string message;
  explicit StatusError(const Status& st) : code(st.code()), message(st.message()) {}
  const char* what() const noexcept override { return message.c_str(); }
};

void check(const Status& st) {
  if (!st.is_ok()) throw StatusError(st);
}

template <typename T>
T unwrap(Result<T>&& r) {
  if (!r.is_ok()) throw StatusError(r.status());
  return std::move(r).value();
}

// The class of dgld._errors that a status code raises.
const char* error_class(StatusCode code) {
  switch (code) {
    case StatusCode::invalid_argument: return "InvalidArgument";
    case StatusCode::not_found: return "NotFound";
    case StatusCode::io_error: return "IOError";
    case StatusCode::timeout: return "Timeout";
    case StatusCode::closed: return "Closed";
    case StatusCode::protocol_error: return "ProtocolError";
    case StatusCode::corruption: return "Corruption";
    case StatusCode::already_exists: return "AlreadyExists";
    case StatusCode::resource_exhausted: return "ResourceExhausted";
    default: return "DGLError";
  }
}

// Waits `step` at a time with the GIL released until `ready` says so,
// checking for a pending signal (Ctrl-C) in between.
template <typename Ready>
void wait_interruptibly(Ready&& ready, std::chrono::milliseconds step = std::chrono::milliseconds(100)) {
  for (;;) {
    bool done = false;
    {
      py::gil_scoped_release release;
      done = ready(step);
    }
    if (done) return;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

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

// ------------------------------------------------------------------ tensors

std::optional<DType> dtype_of_scalar(at::ScalarType t) {
  switch (t) {
    case at::kChar: return DType::int8;
    case at::kByte: return DType::uint8;
    case at::kBool: return DType::uint8;
    case at::kInt: return DType::int32;
    case at::kLong: return DType::int64;
    case at::kFloat: return DType::float32;
    case at::kDouble: return DType::float64;
    default: return std::nullopt;
  }
}

at::ScalarType scalar_of(DType t) {
  switch (t) {
    case DType::int8: return at::kChar;
    case DType::uint8: return at::kByte;
    case DType::int32: return at::kInt;
    case DType::int64: return at::kLong;
    case DType::float32: return at::kFloat;
    case DType::float64: return at::kDouble;
  }
  return at::kByte;
}

// ids as a contiguous int64 CPU tensor (converted when given otherwise).
torch::Tensor as_ids(const torch::Tensor& ids, const char* what) {
  if (!ids.defined()) throw StatusError(invalid_argument(std::string(what) + ": no ids given"));
  if (ids.dim() > 1) {
    throw StatusError(invalid_argument(std::string(what) + ": ids must be a 1-d tensor, got " +
                                       std::to_string(ids.dim()) + " dimensions"));
  }
  if (ids.is_floating_point() || ids.is_complex()) {
    throw StatusError(invalid_argument(std::string(what) + ": ids must be integers, got " +
                                       std::string(c10::toString(ids.scalar_type()))));
  }
  return ids.reshape({-1}).to(torch::kInt64).contiguous();
}

std::span<const int64_t> span_of(const torch::Tensor& ids) {
  return {ids.data_ptr<int64_t>(), static_cast<size_t>(ids.numel())};
}

torch::Tensor tensor_of(std::vector<int64_t>&& v) {
  auto* owned = new std::vector<int64_t>(std::move(v));
  if (owned->empty()) {
    delete owned;
    return torch::empty({0}, torch::kInt64);
  }
  return torch::from_blob(owned->data(), {static_cast<int64_t>(owned->size())},
                          [owned](void*) { delete owned; }, torch::kInt64);
}

// ------------------------------------------------------------------ Client

struct ClientOptions {
  std::string ip_config, part_config;
  std::string role = "trainer";
  int machine_id = -1, rank = -1, num_trainers = 0, num_servers = 1, group = -1;
  std::string job_id, secret_file;
  double connect_timeout_s = 30, call_timeout_s = 60;
};

class Client {
 public:
  explicit Client(const ClientOptions& o) {
    tune_allocator_for_large_buffers();
    client::ClusterOptions co;
    co.ip_config = o.ip_config;
    co.part_config = o.part_config;
    if (o.role == "trainer") co.role = client::Role::trainer;
    else if (o.role == "sampler") co.role = client::Role::sampler;
    else throw StatusError(invalid_argument("role must be 'trainer' or 'sampler', got '" + o.role + "'"));
    co.machine_id = o.machine_id;
    co.requested_rank = o.rank;
    co.num_trainers = o.num_trainers;
    co.num_servers = o.num_servers;
    co.group = o.group;
    co.job_id = o.job_id;
    co.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.connect_timeout_s * 1000));
    co.call_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.call_timeout_s * 1000));
    co.attach_timeout = co.connect_timeout;
    co.secret = unwrap(net::secret_from_flag_or_env(o.secret_file));
    timeout_ = co.call_timeout;
    py::gil_scoped_release release;
    cluster_ = unwrap(client::Cluster::connect(co));
  }

  client::Cluster& cluster() {
    if (!cluster_) throw StatusError(closed_error("this dgld client has left the job (close() was called)"));
    return *cluster_;
  }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Loaders made over this client: stopped before the cluster goes.
  void add_loader(std::weak_ptr<client::DistDataLoader> l) { loaders_.push_back(std::move(l)); }

  // Leaves the job (rank 0 may stop the servers). With `abort` (an
  // interrupted process) the connections are closed first, so threads in
  // server calls return at once, and nobody is told.
  void close(bool shutdown_servers, const std::string& reason, bool abort) {
    if (!cluster_) return;
    py::gil_scoped_release release;
    if (abort) cluster_->close_connections();
    for (auto& w : loaders_) {
      if (auto l = w.lock()) l->shutdown();
    }
    loaders_.clear();
    Status st;
    if (!abort) st = shutdown_servers ? cluster_->shutdown_servers(reason) : cluster_->leave();
    cluster_.reset();
    // A server that stops before its reply reaches us is stopping as asked.
    if (!st.is_ok() && !(shutdown_servers && st.code() == StatusCode::closed)) throw StatusError(st);
  }

  void barrier(const std::string& name, double timeout_s) {
    client::Cluster& c = cluster();
    Status st;
    {
      py::gil_scoped_release release;
      st = c.barrier(name, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    }
    check(st);
  }

  py::list tensors() {
    client::Cluster& c = cluster();
    std::vector<client::TensorInfo> list;
    {
      py::gil_scoped_release release;
      list = unwrap(c.main_server(c.machine_id()).list_tensors());
    }
    py::list out;
    for (const auto& t : list) out.append(t.name);
    return out;
  }

  torch::Tensor degrees(const torch::Tensor& ids_in, bool out) {
    const auto ids = as_ids(ids_in, out ? "out_degrees" : "in_degrees");
    client::DistGraph g(cluster());
    std::vector<int64_t> d;
    {
      py::gil_scoped_release release;
      d = unwrap(out ? g.out_degrees(span_of(ids)) : g.in_degrees(span_of(ids)));
    }
    return tensor_of(std::move(d));
  }

  py::tuple find_edges(const torch::Tensor& eids_in) {
    const auto eids = as_ids(eids_in, "find_edges");
    client::DistGraph g(cluster());
    client::Edges e;
    {
      py::gil_scoped_release release;
      e = unwrap(g.find_edges(span_of(eids)));
    }
    return py::make_tuple(tensor_of(std::move(e.src)), tensor_of(std::move(e.dst)));
  }

  py::tuple sample_neighbors(const torch::Tensor& seeds_in, int64_t fanout, bool replace, bool out_edges,
                             const std::string& prob, uint64_t rng_seed) {
    const auto seeds = as_ids(seeds_in, "sample_neighbors");
    if (fanout < -1) throw StatusError(invalid_argument("sample_neighbors: fanout must be >= -1"));
    client::DistSampleOptions so;
    so.out_edges = out_edges;
    so.prob = prob;
    client::DistNeighborSource source(cluster(), so);
    SampleOptions opt;
    opt.fanout = fanout;
    opt.replace = replace;
    opt.rng_seed = rng_seed;
    SampledEdges e;
    {
      py::gil_scoped_release release;
      e = unwrap(source.sample(span_of(seeds), opt));
    }
    return py::make_tuple(tensor_of(std::move(e.src)), tensor_of(std::move(e.dst)), tensor_of(std::move(e.eid)));
  }

  torch::Tensor split(const torch::Tensor& mask_in, bool edges, bool force_even, int rank, int num_trainers,
                      const std::optional<torch::Tensor>& trainer_ids_in) {
    client::Cluster& c = cluster();
    const auto& book = c.partition_book();
    const int64_t n = edges ? book.num_edges() : book.num_nodes();
    const char* what = edges ? "edge_split" : "node_split";
    if (mask_in.dim() != 1 || mask_in.size(0) != n) {
      throw StatusError(invalid_argument(std::string(what) + ": the mask must have one value per " +
                                         (edges ? "edge (" : "node (") + std::to_string(n) + "), got shape " +
                                         c10::str(mask_in.sizes())));
    }
    const auto mask = (mask_in != 0).to(torch::kUInt8).contiguous();
    torch::Tensor tids;
    client::SplitOptions so;
    so.force_even = force_even;
    if (trainer_ids_in) {
      tids = as_ids(*trainer_ids_in, what);
      if (tids.size(0) != n) {
        throw StatusError(invalid_argument(std::string(what) + ": trainer ids must have one value per " +
                                           (edges ? "edge" : "node")));
      }
      so.trainer_ids = span_of(tids);
    }
    const int world = num_trainers > 0 ? num_trainers : c.num_trainers();
    const int who = rank >= 0 ? rank : c.rank();
    const int per_machine = std::max(1, world / std::max(1, c.num_machines()));
    client::SplitRank sr{who / per_machine, who, world};
    std::span<const uint8_t> bits(mask.data_ptr<uint8_t>(), static_cast<size_t>(n));
    auto ids = unwrap(edges ? client::edge_split(bits, book, sr, so) : client::node_split(bits, book, sr, so));
    return tensor_of(std::move(ids));
  }

 private:
  std::unique_ptr<client::Cluster> cluster_;
  std::vector<std::weak_ptr<client::DistDataLoader>> loaders_;
  std::chrono::milliseconds timeout_{60000};
};

// ------------------------------------------------------------------ DistTensor

class PyDistTensor {
 public:
  PyDistTensor(std::shared_ptr<Client> client, client::DistTensor t) : client_(std::move(client)), t_(std::move(t)) {}
  int ntype() const { return t_.ntype(); }

  static PyDistTensor open(std::shared_ptr<Client> c, const std::string& name) {
    client::DistTensor t = [&] {
      py::gil_scoped_release release;
      return unwrap(client::DistTensor::open(c->cluster(), name));
    }();
    return PyDistTensor(std::move(c), std::move(t));
  }

  static PyDistTensor create(std::shared_ptr<Client> c, const std::string& name, const std::vector<int64_t>& shape,
                             py::object dtype, bool edges, const std::string& init, double a, double b,
                             uint64_t seed, bool persistent, double timeout_s) {
    const auto scalar = torch::python::detail::py_object_to_dtype(std::move(dtype));
    const auto dt = dtype_of_scalar(scalar);
    if (!dt) throw StatusError(invalid_argument("DistTensor '" + name + "': unsupported dtype"));
    client::CreateTensor spec;
    spec.name = name;
    spec.dtype = *dt;
    spec.shape = shape;
    spec.policy = edges ? client::Policy::edge : client::Policy::node;
    if (init == "zeros") spec.init = client::Init::zeros;
    else if (init == "uniform") spec.init = client::Init::uniform;
    else if (init == "normal") spec.init = client::Init::normal;
    else throw StatusError(invalid_argument("DistTensor '" + name + "': init must be zeros, uniform or normal"));
    spec.init_a = a;
    spec.init_b = b;
    spec.seed = seed;
    spec.persistent = persistent;
    client::DistTensor t = [&] {
      py::gil_scoped_release release;
      return unwrap(client::DistTensor::create(c->cluster(), spec,
                                               std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))));
    }();
    return PyDistTensor(std::move(c), std::move(t));
  }

  std::string name() const { return t_.name(); }
  std::vector<int64_t> shape() const { return t_.shape(); }
  py::object dtype() const {
    return py::reinterpret_borrow<py::object>(
        reinterpret_cast<PyObject*>(torch::getTHPDtype(scalar_of(t_.dtype()))));
  }
  bool is_edge() const { return t_.policy() == client::Policy::edge; }

  torch::Tensor pull(const torch::Tensor& ids_in) const {
    const auto ids = as_ids(ids_in, ("DistTensor '" + t_.name() + "'").c_str());
    std::vector<int64_t> shape = t_.shape();
    shape[0] = ids.size(0);
    auto out = torch::empty(shape, torch::TensorOptions().dtype(scalar_of(t_.dtype())));
    Status st;
    {
      py::gil_scoped_release release;
      st = t_.pull_into(span_of(ids), out.data_ptr());
    }
    check(st);
    return out;
  }

  void push(const torch::Tensor& ids_in, const torch::Tensor& rows_in) const {
    const auto ids = as_ids(ids_in, ("DistTensor '" + t_.name() + "'").c_str());
    std::vector<int64_t> want = t_.shape();
    want[0] = ids.size(0);
    auto rows = rows_in.to(scalar_of(t_.dtype())).contiguous();
    if (rows.numel() != c10::multiply_integers(want)) {
      throw StatusError(invalid_argument("DistTensor '" + t_.name() + "': " + std::to_string(ids.size(0)) +
                                         " ids need rows of shape " + c10::str(c10::IntArrayRef(want)) +
                                         ", got " + c10::str(rows_in.sizes())));
    }
    Status st;
    {
      py::gil_scoped_release release;
      st = t_.push(span_of(ids), rows.data_ptr());
    }
    check(st);
  }

  void destroy(double timeout_s) {
    Status st;
    {
      py::gil_scoped_release release;
      st = t_.destroy(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    }
    check(st);
  }

  const client::DistTensor& tensor() const { return t_; }

 private:
  std::shared_ptr<Client> client_;  // the cluster must outlive the tensor
  client::DistTensor t_;
};

// ------------------------------------------------------------------ blocks

py::object to_python(const ops::BlockGraphPtr& g) { return torch::jit::toPyObject(c10::IValue(g)); }

py::object make_block(const torch::Tensor& indptr, const torch::Tensor& indices, int64_t num_src,
                      const std::optional<torch::Tensor>& src_ids, const std::optional<torch::Tensor>& dst_ids) {
  auto g = unwrap(ops::BlockGraph::create(as_ids(indptr, "block indptr"), as_ids(indices, "block indices"), num_src));
  if (src_ids) g->src_ids = as_ids(*src_ids, "block src ids");
  if (dst_ids) g->dst_ids = as_ids(*dst_ids, "block dst ids");
  return to_python(g);
}

// ------------------------------------------------------------------ DataLoader

// A finished batch as Python sees it: (input_nodes, seeds, blocks, features
// or None, labels or None, timings dict); the rows fetched with the batch are
// also the first block's srcdata[feature_] and the last's dstdata[label_].
py::object to_python_batch(client::Batch&& b, const std::string& feature_, const std::string& label_) {
  auto& mb = b.mini_batch;
  std::vector<ops::BlockGraphPtr> graphs;
  for (const Block& blk : mb.blocks) graphs.push_back(unwrap(ops::block_graph_from(blk, true)));
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
  DataLoader(std::shared_ptr<Client> c, const torch::Tensor& seeds_in, std::vector<int64_t> fanouts, bool replace,
             int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed, int prefetch, std::string feature,
             std::string label, int num_threads, std::vector<std::string> samplers, double batch_timeout_s,
             int64_t feature_cache_mb)
      : client_(std::move(c)), feature_(feature), label_(label) {
    const auto seeds = as_ids(seeds_in, "DistNodeDataLoader");
    client::DataLoaderOptions o;
    o.batch_size = batch_size;
    o.shuffle = shuffle;
    o.drop_last = drop_last;
    o.seed = seed;
    o.spec.fanouts = std::move(fanouts);
    o.spec.replace = replace;
    o.spec.feature = std::move(feature);
    o.spec.label = std::move(label);
    o.spec.feature_cache_bytes = static_cast<size_t>(std::max<int64_t>(0, feature_cache_mb)) << 20;
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
    client_->add_loader(loader_);
  }

  ~DataLoader() {
    py::gil_scoped_release release;
    loader_->shutdown();
  }

  int64_t num_batches() const { return loader_->num_batches_per_epoch(); }

  void start_epoch(int epoch) {
    py::gil_scoped_release release;
    loader_->start_epoch(epoch);
  }

  // None at the end of the epoch; else (input_nodes, seeds, blocks,
  // features or None, labels or None, timings dict).
  py::object next() {
    auto b = next_interruptibly(*loader_, next_timeout_, "DistNodeDataLoader");
    if (!b) return py::none();
    return to_python_batch(std::move(*b), feature_, label_);
  }

 private:
  std::shared_ptr<Client> client_;
  std::string feature_, label_;
  std::shared_ptr<client::DistDataLoader> loader_;
  std::chrono::milliseconds next_timeout_{120000};
};

// Every partition's held-out edges of the config's link split (the files
// must all be on this machine); read_link_split's error naming the file
// otherwise.
Result<std::vector<std::pair<int64_t, int64_t>>> held_out_pairs(const PartitionConfig& config) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int p = 0; p < config.num_parts; ++p) {
    DGLD_ASSIGN_OR_RETURN(LinkSplitPart part, read_link_split(config, p));
    for (const LinkEdges* e : {&part.valid, &part.test}) {
      for (size_t i = 0; i < e->src.size(); ++i) out.emplace_back(e->src[i], e->dst[i]);
    }
  }
  return out;
}

// DistEdgeDataLoader (link prediction): batches of training edges with
// negatives, the blocks of their ends (common/client/link_loader.h).
class EdgeDataLoader {
 public:
  EdgeDataLoader(std::shared_ptr<Client> c, const torch::Tensor& eids_in, std::vector<int64_t> fanouts, bool replace,
                 int64_t batch_size, bool shuffle, uint64_t seed, int prefetch, std::string feature, int num_threads,
                 int num_negatives, const std::string& negative_sampler, bool exclude_seed_edges,
                 bool exclude_positives, int64_t feature_cache_mb)
      : client_(std::move(c)), feature_(feature) {
    const auto eids = as_ids(eids_in, "DistEdgeDataLoader");
    client::LinkLoaderOptions o;
    o.batch_size = batch_size;
    o.shuffle = shuffle;
    o.seed = seed;
    o.fanouts = std::move(fanouts);
    o.replace = replace;
    o.feature = std::move(feature);
    o.feature_cache_bytes = static_cast<size_t>(std::max<int64_t>(0, feature_cache_mb)) << 20;
    o.num_negatives = num_negatives;
    o.negative_sampler = unwrap(client::parse_negative_sampler(negative_sampler));
    o.exclude_seed_edges = exclude_seed_edges;
    o.exclude_positives = exclude_positives;
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
  }

  ~EdgeDataLoader() {
    py::gil_scoped_release release;
    loader_.reset();
  }

  int64_t num_batches() const { return loader_->num_batches_per_epoch(); }

  void start_epoch(int epoch) {
    py::gil_scoped_release release;
    loader_->start_epoch(epoch);
  }

  // None at the end of the epoch; else the node batch's tuple followed by
  // (pos_u, pos_v, neg_u, neg_v): rows of seeds.
  py::object next() {
    auto b = next_interruptibly(*loader_, next_timeout_, "DistEdgeDataLoader");
    if (!b) return py::none();
    std::vector<int64_t> neg_u;
    neg_u.reserve(b->neg_v.size());
    for (const int64_t u : b->pos_u) neg_u.insert(neg_u.end(), static_cast<size_t>(b->num_negatives), u);
    auto node = to_python_batch(std::move(b->batch), feature_, "").cast<py::tuple>();
    return py::make_tuple(node[0], node[1], node[2], node[3], node[5], tensor_of(std::move(b->pos_u)),
                          tensor_of(std::move(b->pos_v)), tensor_of(std::move(neg_u)), tensor_of(std::move(b->neg_v)));
  }

 private:
  std::shared_ptr<Client> client_;
  std::string feature_;
  std::unique_ptr<client::DistEdgeDataLoader> loader_;
  std::chrono::milliseconds next_timeout_{120000};
};

// ------------------------------------------------------------------ test hooks

// The rows of node tensor `name` (e.g. "_N/features") in partition
// `part_id`'s files, with the global ids of its owned nodes: what the tests
// check pulls against.
py::tuple partition_node_tensor(const std::string& part_config, int part_id, const std::string& name) {
  auto pc = unwrap(load_part_config(part_config));
  auto part = unwrap(open_partition(pc, part_id, /*verify_checksums=*/true));
  const TensorView* t = part->node_tensor(name);
  if (!t) throw StatusError(not_found("partition " + std::to_string(part_id) + " has no node tensor '" + name + "'"));
  auto rows = torch::empty(t->shape, torch::TensorOptions().dtype(scalar_of(t->dtype)));
  std::memcpy(rows.data_ptr(), t->data, t->num_bytes);
  // The homogeneous ids of the rows: every inner node, or on a heterogeneous
  // graph the partition's nodes of the tensor's type.
  const IdRange r = node_tensor_range(pc, part_id, name);
  std::vector<int64_t> ids(static_cast<size_t>(r.size()));
  std::iota(ids.begin(), ids.end(), r.start);
  return py::make_tuple(tensor_of(std::move(ids)), rows);
}

// Every partition's held-out (validation and test) edges of a link split,
// as (src, dst) pairs in partitioned ids: what the tests check negatives
// against.
std::vector<std::pair<int64_t, int64_t>> link_split_pairs(const std::string& part_config) {
  return unwrap(held_out_pairs(unwrap(load_part_config(part_config))));
}

// The blocks C++'s multi-layer sampler makes for `seeds` with `rng_seed`
// over the job's servers, without the data loader.
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
  for (const Block& b : mb.blocks) out.append(to_python(unwrap(ops::block_graph_from(b, true))));
  return out;
}

// trainer-host's own layer `kind` (sage, gcn, gat) with the given parameters
// (by name, as the layer registers them) on a block: what the tests compare
// dgld.nn's layers against.
torch::Tensor builtin_layer_forward(const std::string& kind, int64_t in_dim, int64_t out_dim, int64_t heads,
                                    const std::map<std::string, torch::Tensor>& params, const py::object& block,
                                    const torch::Tensor& h) {
  auto g = torch::jit::toIValue(block, c10::getCustomClassType<ops::BlockGraphPtr>()).toCustomClass<ops::BlockGraph>();
  std::shared_ptr<torch::nn::Module> layer;
  std::function<torch::Tensor()> run;
  if (kind == "sage") {
    auto l = trainer::SageConv(in_dim, out_dim, trainer::Kernels::fused);
    layer = l.ptr();
    run = [l, g, h]() mutable { return l->forward(g, h); };
  } else if (kind == "gcn") {
    auto l = trainer::GraphConv(in_dim, out_dim, trainer::Kernels::fused);
    layer = l.ptr();
    run = [l, g, h]() mutable { return l->forward(g, h); };
  } else if (kind == "gat") {
    auto l = trainer::GatConv(in_dim, out_dim, heads, trainer::Kernels::fused);
    layer = l.ptr();
    run = [l, g, h]() mutable { return l->forward(g, h); };
  } else {
    throw StatusError(invalid_argument("unknown layer kind '" + kind + "'"));
  }
  torch::NoGradGuard no_grad;
  for (auto& p : layer->named_parameters()) {
    auto it = params.find(p.key());
    if (it == params.end()) throw StatusError(invalid_argument("no value for parameter '" + p.key() + "'"));
    p.value().copy_(it->second.view_as(p.value()));
  }
  return run();
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "dgld's client library (the dgld package builds DGL's API on it)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object cls = py::module_::import("dgld._errors").attr(error_class(e.code));
      PyErr_SetString(cls.ptr(), e.message.c_str());
    }
  });

  py::class_<ClientOptions>(m, "ClientOptions")
      .def(py::init<>())
      .def_readwrite("ip_config", &ClientOptions::ip_config)
      .def_readwrite("part_config", &ClientOptions::part_config)
      .def_readwrite("role", &ClientOptions::role)
      .def_readwrite("machine_id", &ClientOptions::machine_id)
      .def_readwrite("rank", &ClientOptions::rank)
      .def_readwrite("num_trainers", &ClientOptions::num_trainers)
      .def_readwrite("num_servers", &ClientOptions::num_servers)
      .def_readwrite("group", &ClientOptions::group)
      .def_readwrite("job_id", &ClientOptions::job_id)
      .def_readwrite("secret_file", &ClientOptions::secret_file)
      .def_readwrite("connect_timeout_s", &ClientOptions::connect_timeout_s)
      .def_readwrite("call_timeout_s", &ClientOptions::call_timeout_s);

  py::class_<Client, std::shared_ptr<Client>>(m, "Client")
      .def(py::init<const ClientOptions&>())
      .def_property_readonly("rank", [](Client& c) { return c.cluster().rank(); })
      .def_property_readonly("machine_id", [](Client& c) { return c.cluster().machine_id(); })
      .def_property_readonly("num_machines", [](Client& c) { return c.cluster().num_machines(); })
      .def_property_readonly("num_trainers", [](Client& c) { return c.cluster().num_trainers(); })
      .def_property_readonly("num_servers", [](Client& c) { return c.cluster().num_servers(); })
      .def_property_readonly("job_id", [](Client& c) { return c.cluster().job_id(); })
      .def_property_readonly("graph_name", [](Client& c) { return c.cluster().config().graph_name; })
      .def_property_readonly("num_nodes", [](Client& c) { return c.cluster().partition_book().num_nodes(); })
      .def_property_readonly("num_edges", [](Client& c) { return c.cluster().partition_book().num_edges(); })
      .def_property_readonly("ntype", [](Client& c) { return c.cluster().config().ntype; })
      .def_property_readonly("etype", [](Client& c) { return c.cluster().config().etype; })
      // Heterogeneous graphs (docs/heterogeneous.md): empty lists for a homogeneous one.
      .def_property_readonly("ntypes", [](Client& c) { return c.cluster().config().types.ntypes; })
      .def_property_readonly("canonical_etypes", [](Client& c) { return c.cluster().config().types.etypes; })
      .def_property_readonly("ntype_counts", [](Client& c) { return c.cluster().config().types.ntype_count; })
      .def_property_readonly("etype_counts", [](Client& c) { return c.cluster().config().types.etype_count; })
      .def_property_readonly("target_ntype", [](Client& c) { return c.cluster().config().types.target_ntype; })
      .def("to_homogeneous",
           [](Client& c, int type, const torch::Tensor& ids) {
             const auto& book = c.cluster().partition_book();
             auto in = ids.to(torch::kInt64).contiguous();
             auto out = torch::empty_like(in);
             const int64_t* src = in.data_ptr<int64_t>();
             int64_t* dst = out.data_ptr<int64_t>();
             for (int64_t i = 0; i < in.numel(); ++i) {
               dst[i] = book.to_homogeneous(type, src[i]);
               if (dst[i] < 0) {
                 throw StatusError(invalid_argument(
                     "node id " + std::to_string(src[i]) + " of type " +
                     (type >= 0 && type < book.num_ntypes() ? "'" + c.cluster().config().types.ntypes[type] + "'"
                                                            : std::to_string(type)) +
                     " is out of range [0, " +
                     std::to_string(type >= 0 && type < book.num_ntypes() ? book.type_count(type) : 0) + ")"));
               }
             }
             return out;
           })
      .def("to_type_wise",
           [](Client& c, const torch::Tensor& ids) {
             const auto& book = c.cluster().partition_book();
             auto in = ids.to(torch::kInt64).contiguous();
             auto types = torch::empty_like(in), out = torch::empty_like(in);
             const int64_t* src = in.data_ptr<int64_t>();
             for (int64_t i = 0; i < in.numel(); ++i) {
               int t = -1;
               out.data_ptr<int64_t>()[i] = book.to_type_wise(src[i], &t);
               if (t < 0) throw StatusError(invalid_argument("node id " + std::to_string(src[i]) + " is out of range"));
               types.data_ptr<int64_t>()[i] = t;
             }
             return py::make_tuple(types, out);
           })
      .def("node_ranges",
           [](Client& c) {
             std::vector<std::pair<int64_t, int64_t>> r;
             for (const auto& x : c.cluster().partition_book().node_ranges()) r.emplace_back(x.start, x.end);
             return r;
           })
      .def("edge_ranges",
           [](Client& c) {
             std::vector<std::pair<int64_t, int64_t>> r;
             for (const auto& x : c.cluster().partition_book().edge_ranges()) r.emplace_back(x.start, x.end);
             return r;
           })
      .def("machines",
           [](Client& c) {
             std::vector<std::pair<std::string, int>> r;
             for (const auto& x : c.cluster().machines()) r.emplace_back(x.host, x.base_port);
             return r;
           })
      .def("tensors", &Client::tensors)
      .def("barrier", &Client::barrier, py::arg("name"), py::arg("timeout_s"))
      .def("degrees", &Client::degrees, py::arg("ids"), py::arg("out"))
      .def("find_edges", &Client::find_edges)
      .def("sample_neighbors", &Client::sample_neighbors, py::arg("seeds"), py::arg("fanout"), py::arg("replace"),
           py::arg("out_edges"), py::arg("prob"), py::arg("rng_seed"))
      .def("split", &Client::split, py::arg("mask"), py::arg("edges"), py::arg("force_even"), py::arg("rank"),
           py::arg("num_trainers"), py::arg("trainer_ids"))
      .def("health",
           [](Client& c) {
             const Status st = c.cluster().health();
             return st.is_ok() ? std::string() : st.to_string();
           })
      .def("close", &Client::close, py::arg("shutdown_servers") = false, py::arg("reason") = "",
           py::arg("abort") = false);

  py::class_<PyDistTensor>(m, "DistTensor")
      .def_static("open", &PyDistTensor::open)
      .def_static("create", &PyDistTensor::create, py::arg("client"), py::arg("name"), py::arg("shape"),
                  py::arg("dtype"), py::arg("edges"), py::arg("init"), py::arg("a"), py::arg("b"), py::arg("seed"),
                  py::arg("persistent"), py::arg("timeout_s"))
      .def_property_readonly("name", &PyDistTensor::name)
      .def_property_readonly("shape", &PyDistTensor::shape)
      .def_property_readonly("dtype", &PyDistTensor::dtype)
      .def_property_readonly("is_edge", &PyDistTensor::is_edge)
      .def_property_readonly("ntype", &PyDistTensor::ntype)
      .def("pull", &PyDistTensor::pull)
      .def("push", &PyDistTensor::push)
      .def("destroy", &PyDistTensor::destroy, py::arg("timeout_s"));

  py::class_<DataLoader>(m, "DataLoader")
      .def(py::init<std::shared_ptr<Client>, const torch::Tensor&, std::vector<int64_t>, bool, int64_t, bool, bool,
                    uint64_t, int, std::string, std::string, int, std::vector<std::string>, double, int64_t>(),
           py::arg("client"), py::arg("seeds"), py::arg("fanouts"), py::arg("replace"), py::arg("batch_size"),
           py::arg("shuffle"), py::arg("drop_last"), py::arg("seed"), py::arg("prefetch"), py::arg("feature"),
           py::arg("label"), py::arg("num_threads"), py::arg("samplers"), py::arg("batch_timeout_s"),
           py::arg("feature_cache_mb"))
      .def("num_batches", &DataLoader::num_batches)
      .def("start_epoch", &DataLoader::start_epoch)
      .def("next", &DataLoader::next);

  py::class_<EdgeDataLoader>(m, "EdgeDataLoader")
      .def(py::init<std::shared_ptr<Client>, const torch::Tensor&, std::vector<int64_t>, bool, int64_t, bool, uint64_t,
                    int, std::string, int, int, const std::string&, bool, bool, int64_t>())
      .def("num_batches", &EdgeDataLoader::num_batches)
      .def("start_epoch", &EdgeDataLoader::start_epoch)
      .def("next", &EdgeDataLoader::next);
  m.def("make_block", &make_block, py::arg("indptr"), py::arg("indices"), py::arg("num_src"),
        py::arg("src_ids") = std::nullopt, py::arg("dst_ids") = std::nullopt);
  m.def("_builtin_layer_forward", &builtin_layer_forward);
  m.def("_partition_node_tensor", &partition_node_tensor);
  m.def("_sample_blocks", &sample_blocks);
  m.def("_link_split_pairs", &link_split_pairs);
  m.def("_batch_rng_seed", &client::batch_rng_seed);
  m.def("set_log_level", [](const std::string& level) {
    LogOptions lo;
    lo.level = level;
    lo.program = "dgld-python";
    check(setup_logging(lo));
  });
}
