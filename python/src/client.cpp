// dgld._C's Client: one process's membership of a job (client::Cluster),
// its graph queries, splits and neighbour sampling.
#include "python/src/client.h"

#include "client/dist_graph.h"
#include "client/server_api.h"
#include "client/split.h"
#include "common/memory.h"
#include "common/net/auth.h"
#include "python/src/partition_book.h"

namespace dgld::python {

Client::Client(const ClientOptions& o) {
  client::JoinFlags join{.ip_config = o.ip_config,
                         .part_config = o.part_config,
                         .machine_id = o.machine_id,
                         .num_servers = o.num_servers,
                         .rank = o.rank,
                         .group = o.group,
                         .num_trainers = o.num_trainers,
                         .job_id = o.job_id,
                         .connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.connect_timeout_s * 1000)),
                         .call_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.call_timeout_s * 1000)),
                         .secret_file = o.secret_file};
  if (o.role == "trainer") join.role = client::Role::trainer;
  else if (o.role == "sampler") join.role = client::Role::sampler;
  else throw StatusError(invalid_argument("role must be 'trainer' or 'sampler', got '" + o.role + "'"));
  const client::ClusterOptions co = unwrap(client::join_options(join));
  timeout_ = co.call_timeout;
  py::gil_scoped_release release;
  cluster_ = unwrap(client::Cluster::connect(co));
}

client::Cluster& Client::cluster() {
  if (!cluster_) throw StatusError(closed_error("this dgld client has left the job (close() was called)"));
  return *cluster_;
}

// Leaves the job (rank 0 may stop the servers). With `abort` (an
// interrupted process) the connections are closed first, so threads in
// server calls return at once, and nobody is told.
void Client::close(bool shutdown_servers, const std::string& reason, bool abort) {
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

void Client::starting_epoch(const std::shared_ptr<client::DistDataLoader>& l) {
  if (l == last_epoch_loader_.lock()) return;
  last_epoch_loader_ = l;
  for (auto& w : loaders_) {
    auto other = w.lock();
    if (other && other != l) other->release_idle_buffers();
  }
  // Also what the others' finished batches left in the heap.
  trim_heap();
}

std::shared_ptr<const client::RowCache> Client::shared_halo_cache(const std::string& feature, size_t bytes) {
  client::Cluster& c = cluster();
  if (bytes == 0 || feature.empty() || c.config().types.present()) return nullptr;
  std::weak_ptr<const client::RowCache>& slot = halo_caches_[{feature, bytes}];
  if (auto cache = slot.lock()) return cache;
  auto t = client::DistGraph(c).ndata(feature);
  if (!t.is_ok() || t->dtype() != DType::float32 || t->shape().size() != 2) return nullptr;
  std::shared_ptr<const client::RowCache> cache;
  {
    py::gil_scoped_release release;
    cache = unwrap(client::build_halo_row_cache(c, *t, bytes));
  }
  slot = cache;
  return cache;
}

void Client::barrier(const std::string& name_in, double timeout_s) {
  client::Cluster& c = cluster();
  // DGL's scripts call g._client.barrier() with no name: every trainer's
  // n-th unnamed barrier meets the others' n-th.
  const std::string name = name_in.empty() ? "dgld.client." + std::to_string(++unnamed_barriers_) : name_in;
  Status st;
  {
    py::gil_scoped_release release;
    st = c.barrier(name, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  }
  check(st);
}

py::list Client::tensors() {
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

torch::Tensor Client::degrees(const torch::Tensor& ids_in, bool out) {
  const auto ids = as_ids(ids_in, out ? "out_degrees" : "in_degrees");
  client::DistGraph g(cluster());
  std::vector<int64_t> d;
  {
    py::gil_scoped_release release;
    d = unwrap(out ? g.out_degrees(span_of(ids)) : g.in_degrees(span_of(ids)));
  }
  return tensor_of(std::move(d));
}

py::tuple Client::find_edges(const torch::Tensor& eids_in) {
  const auto eids = as_ids(eids_in, "find_edges");
  client::DistGraph g(cluster());
  client::Edges e;
  {
    py::gil_scoped_release release;
    e = unwrap(g.find_edges(span_of(eids)));
  }
  return py::make_tuple(tensor_of(std::move(e.src)), tensor_of(std::move(e.dst)));
}

py::tuple Client::sample_neighbors(const torch::Tensor& seeds_in, int64_t fanout, bool replace, bool out_edges,
                                   const std::string& prob, uint64_t rng_seed,
                                   const std::vector<int64_t>& etype_fanouts) {
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
  opt.etype_fanouts = etype_fanouts;
  SampledEdges e;
  {
    py::gil_scoped_release release;
    e = unwrap(source.sample(span_of(seeds), opt));
  }
  return py::make_tuple(tensor_of(std::move(e.src)), tensor_of(std::move(e.dst)), tensor_of(std::move(e.eid)));
}

namespace {

// node_split / edge_split (client/split.h) for trainer `rank` among
// `num_trainers`: needs only the partition book, so a process that joined
// no job splits too (DGL's node_split with an explicit book and rank). The
// rank says the partition, by DGL's layout (the T trainers of partition p
// are ranks p*T .. p*T+T-1), so one process may split for every trainer of
// the job with the book it has; in a job that is the book's own partition.
torch::Tensor split_ids(const torch::Tensor& mask_in, const PartitionBook& book, bool edges, bool force_even,
                        int rank, int num_trainers, const std::optional<torch::Tensor>& trainer_ids_in) {
  const int64_t n = edges ? book.book().num_edges() : book.book().num_nodes();
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
  const int per_part = std::max(1, num_trainers / std::max(1, book.book().num_partitions()));
  client::SplitRank sr{rank / per_part, rank, num_trainers};
  std::span<const uint8_t> bits(mask.data_ptr<uint8_t>(), static_cast<size_t>(n));
  std::vector<int64_t> ids;
  {
    py::gil_scoped_release release;
    ids = unwrap(edges ? client::edge_split(bits, book.book(), sr, so) : client::node_split(bits, book.book(), sr, so));
  }
  return tensor_of(std::move(ids));
}

}  // namespace

void bind_client(py::module_& m) {
  m.def("split_ids", &split_ids, py::arg("mask"), py::arg("book"), py::arg("edges"), py::arg("force_even"),
        py::arg("rank"), py::arg("num_trainers"), py::arg("trainer_ids"));
  // The job's graph as machine 0's main server describes it (client/server_api.h).
  m.def(
      "query_graph_info",
      [](const std::string& ip_config, const std::string& secret_file, double timeout_s) {
        auto info = [&] {
          py::gil_scoped_release release;
          return client::query_graph_info(ip_config, secret_file,
                                          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
        }();
        check(info.status());
        py::dict d;
        d["graph_name"] = info->graph_name;
        d["part_config"] = info->part_config;
        d["num_parts"] = info->num_parts;
        d["num_nodes"] = info->num_nodes;
        d["num_edges"] = info->num_edges;
        return d;
      },
      py::arg("ip_config"), py::arg("secret_file") = "", py::arg("timeout_s") = 30.0);
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
      // The job's partition book (partition_book.h), as this machine's partition sees it.
      .def("partition_book",
           [](Client& c) {
             client::Cluster& cl = c.cluster();
             return PartitionBook(cl.config(), cl.partition_book(), cl.machine_id());
           })
      .def("tensors", &Client::tensors)
      .def("barrier", &Client::barrier, py::arg("name") = "", py::arg("timeout_s") = 600.0)
      .def("degrees", &Client::degrees, py::arg("ids"), py::arg("out"))
      .def("find_edges", &Client::find_edges)
      .def("sample_neighbors", &Client::sample_neighbors, py::arg("seeds"), py::arg("fanout"), py::arg("replace"),
           py::arg("out_edges"), py::arg("prob"), py::arg("rng_seed"),
           py::arg("etype_fanouts") = std::vector<int64_t>{})
      // DGL's KVClient names: every tensor of the job is graph data here.
      .def("data_name_list", &Client::tensors)
      .def("gdata_name_list", &Client::tensors)
      .def("health",
           [](Client& c) {
             const Status st = c.cluster().health();
             return st.is_ok() ? std::string() : st.to_string();
           })
      .def("close", &Client::close, py::arg("shutdown_servers") = false, py::arg("reason") = "",
           py::arg("abort") = false);
}

}  // namespace dgld::python
