#include "client/dist_graph.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>

#include "client/cluster.h"
#include "client/local_partition.h"
#include "common/shm/shared_tensor.h"

namespace dgld::client {

namespace {

// Positions of `ids` grouped by owner machine; -1 owner is an error naming the id.
struct Groups {
  std::vector<std::vector<int64_t>> ids;   // [machine] ids in input order
  std::vector<std::vector<size_t>> where;  // [machine] their positions in the input
  std::vector<int> remote;                 // machines other than the caller's with ids
};

// Groups node (or edge) ids by the machine that owns them.
Result<Groups> group_by_owner(const Cluster& c, std::span<const int64_t> ids, bool edge,
                              const char* what) {
  const auto& book = c.partition_book();
  const int me = c.machine_id();
  Groups g;
  g.ids.resize(c.num_machines());
  g.where.resize(c.num_machines());
  for (size_t k = 0; k < ids.size(); ++k) {
    const int m = edge ? book.edge_partition(ids[k]) : book.node_partition(ids[k]);
    if (m < 0) {
      return invalid_argument(std::string(what) + " id " + std::to_string(ids[k]) +
                              " is not in [0, " +
                              std::to_string(edge ? book.num_edges() : book.num_nodes()) + ")");
    }
    g.ids[m].push_back(ids[k]);
    g.where[m].push_back(k);
  }
  for (int m = 0; m < c.num_machines(); ++m) {
    if (m != me && !g.ids[m].empty()) g.remote.push_back(m);
  }
  return g;
}

// Runs fn(m) for every machine with ids, all at once (the caller's machine on this thread).
Status for_each_group(Cluster& c, const Groups& g, const std::function<Status(int)>& fn) {
  std::vector<int> todo = g.remote;
  if (!g.ids[c.machine_id()].empty()) todo.push_back(c.machine_id());
  return c.for_each_machine(todo, fn);
}

// The in-edges of the partition's inner nodes (rows = inner local ids), as the server samples them.
AdjacencyView inner_in_edges(const MappedPartition& p) {
  AdjacencyView v;
  const auto ni = static_cast<size_t>(p.num_inner_nodes());
  v.indptr = p.in_edges().indptr.first(ni + 1);
  const auto ne = static_cast<size_t>(v.indptr[ni]);
  v.indices = p.in_edges().indices.first(ne);
  v.eids = p.in_edges().eids.first(ne);
  return v;
}

}  // namespace

const std::string& DistGraph::graph_name() const { return cluster_->config().graph_name; }
int64_t DistGraph::num_nodes() const { return cluster_->config().num_nodes; }
int64_t DistGraph::num_edges() const { return cluster_->config().num_edges; }
const RangePartitionBook& DistGraph::partition_book() const { return cluster_->partition_book(); }
int DistGraph::rank() const { return cluster_->rank(); }
Status DistGraph::barrier(const std::string& name, std::chrono::milliseconds timeout) {
  return cluster_->barrier(name, timeout);
}

std::string DistGraph::full_name(const std::string& name, bool edge) const {
  if (name.find('/') != std::string::npos) return name;
  return (edge ? cluster_->config().etype : cluster_->config().ntype) + "/" + name;
}

Result<DistTensor> DistGraph::ndata(const std::string& name) const {
  return DistTensor::open(*cluster_, full_name(name, false));
}
Result<DistTensor> DistGraph::edata(const std::string& name) const {
  return DistTensor::open(*cluster_, full_name(name, true));
}

Result<std::vector<int64_t>> DistGraph::degrees(std::span<const int64_t> ids, bool out) const {
  Cluster& c = *cluster_;
  const int me = c.machine_id();
  const auto& book = c.partition_book();
  DGLD_ASSIGN_OR_RETURN(Groups g, group_by_owner(c, ids, false, "node"));
  std::vector<int64_t> deg(ids.size());
  DGLD_RETURN_IF_ERROR(for_each_group(c, g, [&](int m) -> Status {
    if (m == me) {
      const MappedPartition& p = c.local().graph();
      const AdjacencyView& adj = out ? p.out_edges() : p.in_edges();
      const int64_t first = book.node_range(me).start;
      for (size_t i = 0; i < g.ids[m].size(); ++i)
        deg[g.where[m][i]] = adj.degree(g.ids[m][i] - first);
      return Status::ok();
    }
    auto r = c.server_for(m).degrees(g.ids[m], out);
    if (!r.is_ok())
      return r.status().with_context((out ? "out_degrees" : "in_degrees") +
                                     std::string(" on machine ") + std::to_string(m));
    if (r->size() != g.ids[m].size()) {
      return protocol_error(c.server_for(m).peer() + ": " + std::to_string(r->size()) +
                            " degrees for " + std::to_string(g.ids[m].size()) + " nodes");
    }
    for (size_t i = 0; i < r->size(); ++i) deg[g.where[m][i]] = (*r)[i];
    return Status::ok();
  }));
  return deg;
}

Result<std::vector<int64_t>> DistGraph::in_degrees(std::span<const int64_t> ids) const {
  return degrees(ids, false);
}
Result<std::vector<int64_t>> DistGraph::out_degrees(std::span<const int64_t> ids) const {
  return degrees(ids, true);
}

Result<Edges> DistGraph::find_edges(std::span<const int64_t> eids) const {
  Cluster& c = *cluster_;
  const int me = c.machine_id();
  const auto& book = c.partition_book();
  DGLD_ASSIGN_OR_RETURN(Groups g, group_by_owner(c, eids, true, "edge"));
  Edges out;
  out.src.resize(eids.size());
  out.dst.resize(eids.size());
  DGLD_RETURN_IF_ERROR(for_each_group(c, g, [&](int m) -> Status {
    if (m == me) {
      const MappedPartition& p = c.local().graph();
      const int64_t first = book.edge_range(me).start;
      for (size_t i = 0; i < g.ids[m].size(); ++i) {
        std::tie(out.src[g.where[m][i]], out.dst[g.where[m][i]]) = p.inner_edge_ends(g.ids[m][i] - first);
      }
      return Status::ok();
    }
    auto r = c.server_for(m).find_edges(g.ids[m]);
    if (!r.is_ok()) return r.status().with_context("find_edges on machine " + std::to_string(m));
    if (r->src.size() != g.ids[m].size() || r->dst.size() != g.ids[m].size()) {
      return protocol_error(c.server_for(m).peer() + ": find_edges answered " +
                            std::to_string(r->src.size()) + " edges for " +
                            std::to_string(g.ids[m].size()));
    }
    for (size_t i = 0; i < r->src.size(); ++i) {
      out.src[g.where[m][i]] = r->src[i];
      out.dst[g.where[m][i]] = r->dst[i];
    }
    return Status::ok();
  }));
  return out;
}

Result<std::vector<int64_t>> DistGraph::node_split(const std::string& mask_name, bool force_even,
                                                   bool use_trainer_ids) const {
  return split(mask_name, force_even, use_trainer_ids, /*edges=*/false);
}

Result<std::vector<int64_t>> DistGraph::edge_split(const std::string& mask_name, bool force_even) const {
  return split(mask_name, force_even, /*use_trainer_ids=*/false, /*edges=*/true);
}

Result<std::vector<int64_t>> DistGraph::split(const std::string& mask_name, bool force_even, bool use_trainer_ids,
                                              bool edges) const {
  Cluster& c = *cluster_;
  const char* what = edges ? "edge_split" : "node_split";
  const char* unit = edges ? "edge" : "node";
  std::vector<int64_t> all(static_cast<size_t>(edges ? num_edges() : num_nodes()));
  std::iota(all.begin(), all.end(), 0);
  DGLD_ASSIGN_OR_RETURN(DistTensor mask, edges ? edata(mask_name) : ndata(mask_name));
  if (mask.dtype() != DType::uint8 || mask.row_bytes() != 1) {
    return invalid_argument(std::string(what) + ": mask '" + mask.name() + "' must be a uint8 " + unit +
                            " tensor with one value per " + unit);
  }
  std::vector<uint8_t> bits;
  if (!edges && mask.ntype() >= 0) {
    // A heterogeneous graph's per-type mask ("paper/train_mask"): its type's
    // nodes are read, every other node is outside the mask.
    const RangePartitionBook& book = partition_book();
    std::vector<int64_t> typed;
    for (int p = 0; p < book.num_partitions(); ++p) {
      const IdRange r = book.type_range(mask.ntype(), p);
      for (int64_t v = r.start; v < r.end; ++v) typed.push_back(v);
    }
    DGLD_ASSIGN_OR_RETURN(std::vector<uint8_t> typed_bits, mask.pull(typed));
    bits.assign(all.size(), 0);
    for (size_t i = 0; i < typed.size(); ++i) bits[static_cast<size_t>(typed[i])] = typed_bits[i];
  } else {
    DGLD_ASSIGN_OR_RETURN(bits, mask.pull(all));
  }
  std::vector<int64_t> trainer_ids;
  if (use_trainer_ids) {
    DGLD_ASSIGN_OR_RETURN(DistTensor tid, ndata("trainer_id"));
    DGLD_ASSIGN_OR_RETURN(trainer_ids, tid.pull_as<int64_t>(all));
  }
  const int per_machine = std::max(1, c.num_trainers() / c.num_machines());
  if (c.rank() / per_machine != c.machine_id()) {
    return invalid_argument(std::string(what) + ": trainer rank " + std::to_string(c.rank()) +
                            " on machine " + std::to_string(c.machine_id()) +
                            " breaks DGL's layout (machine m runs ranks m*" +
                            std::to_string(per_machine) + " .. m*" + std::to_string(per_machine) +
                            "+" + std::to_string(per_machine - 1) + "); request ranks accordingly");
  }
  SplitRank who{c.machine_id(), c.rank(), c.num_trainers()};
  const SplitOptions so{force_even, trainer_ids};
  return edges ? client::edge_split(std::span<const uint8_t>(bits), partition_book(), who, so)
               : client::node_split(std::span<const uint8_t>(bits), partition_book(), who, so);
}

// ---- DistNeighborSource ----------------------------------------------------

DistNeighborSource::DistNeighborSource(Cluster& cluster, DistSampleOptions options)
    : cluster_(&cluster), options_(std::move(options)) {}

Result<std::span<const float>> DistNeighborSource::local_weights(std::vector<float>* scratch) {
  if (options_.prob.empty()) return std::span<const float>();
  DGLD_ASSIGN_OR_RETURN(shm::SharedTensor * t, cluster_->local().tensor(options_.prob));
  // The tensor's rows are in edge id order, the sampler's positions in CSC order.
  return cluster_->local().graph().edge_weights(options_.prob, t->dtype(), t->data(), t->num_rows(), t->row_bytes(),
                                                scratch);
}

int64_t DistNeighborSource::node_id_range() const { return cluster_->config().num_nodes; }

Result<SampledEdges> DistNeighborSource::sample(std::span<const int64_t> seeds,
                                                const SampleOptions& opt) {
  Cluster& c = *cluster_;
  const int me = c.machine_id();
  const auto& book = c.partition_book();
  // Remote groups first, so they are in flight while the local seeds are sampled.
  SampleRequest req;
  req.spec.fanouts = {opt.fanout};
  if (!opt.etype_fanouts.empty()) req.spec.etype_fanouts = {opt.etype_fanouts};
  req.spec.out_edges = options_.out_edges;
  req.spec.replace = opt.replace;
  req.spec.prob = options_.prob;
  req.seed = opt.rng_seed;
  DGLD_RETURN_IF_ERROR(req.spec.validate());
  const bool typed = !opt.etype_fanouts.empty();
  DGLD_ASSIGN_OR_RETURN(Groups g, group_by_owner(c, seeds, false, "seed"));
  std::vector<net::PendingCall> calls;
  for (int m : g.remote) calls.push_back(c.server_for(m).start_sample(g.ids[m], req));

  // Each machine's edges, grouped by seed in the order of its group.
  struct Part {
    std::span<const int64_t> nbr, eid, counts;
    std::span<const int32_t> etype;
    size_t seed = 0, edge = 0;  // how far the merge has read
  };
  std::vector<Part> parts(c.num_machines());
  std::vector<SampledNeighbors> remote(calls.size());
  SampledEdges local;
  std::vector<int64_t> local_counts;
  Status first;
  if (!g.ids[me].empty()) {
    const MappedPartition& p = c.local().graph();
    const AdjacencyView adj = options_.out_edges ? p.out_edges() : inner_in_edges(p);
    std::vector<int64_t> rows(g.ids[me]);
    for (auto& r : rows) r -= book.node_range(me).start;
    std::vector<float> csc_weights;
    auto weights = local_weights(&csc_weights);
    if (!weights.is_ok()) {
      first = weights.status();
    } else {
      SampleExtras extras{.weights = *weights,
                          .etypes = typed ? p.edge_types().first(adj.indices.size()) : std::span<const int32_t>(),
                          .stream_keys = g.ids[me],
                          .pool = options_.pool,
                          .seed_counts = &local_counts};
      auto e = sample_neighbors(adj, rows, opt, extras);
      if (e.is_ok()) {
        local = std::move(*e);
        first = map_to_global(local.src, p.node_global_ids());
        parts[me] = Part{local.src, local.eid, local_counts, local.etype};
      } else {
        first = e.status();
      }
      first = first.with_context("sample_neighbors on machine " + std::to_string(me) + " (local)");
    }
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    const int m = g.remote[i];
    auto r = c.server_for(m).finish_sample(calls[i], g.ids[m].size(), typed);  // every call is waited for
    if (!first.is_ok()) continue;
    if (!r.is_ok()) {
      first = r.status().with_context("sample_neighbors on machine " + std::to_string(m));
    } else {
      remote[i] = std::move(*r);
      parts[m] = Part{remote[i].nbr(), remote[i].eid(), remote[i].counts, remote[i].etype()};
    }
  }
  DGLD_RETURN_IF_ERROR(first);

  SampledEdges out;
  std::vector<int64_t>& neighbours = options_.out_edges ? out.dst : out.src;
  std::vector<int64_t>& own = options_.out_edges ? out.src : out.dst;
  if (g.remote.empty()) {
    // Every seed is this machine's: its edges are in seed order already and
    // are handed on, not copied (a full neighbourhood's are tens of MB).
    neighbours = std::move(local.src);
    out.eid = std::move(local.eid);
    out.etype = std::move(local.etype);
    own.reserve(out.eid.size());
    for (size_t k = 0; k < seeds.size(); ++k) own.insert(own.end(), static_cast<size_t>(local_counts[k]), seeds[k]);
    return out;
  }
  // Emit in seed order: seed k's run comes from its owner's next count.
  std::vector<int> owner_of(seeds.size());
  for (int m = 0; m < c.num_machines(); ++m) {
    for (size_t w : g.where[m]) owner_of[w] = m;
  }
  size_t total = 0;
  for (const auto& part : parts) total += part.eid.size();
  out.reserve(total);
  for (size_t k = 0; k < seeds.size(); ++k) {
    Part& part = parts[owner_of[k]];
    const auto n = static_cast<size_t>(part.counts[part.seed++]);
    const auto nbr = part.nbr.subspan(part.edge, n), eid = part.eid.subspan(part.edge, n);
    neighbours.insert(neighbours.end(), nbr.begin(), nbr.end());
    out.eid.insert(out.eid.end(), eid.begin(), eid.end());
    if (typed) {
      const auto et = part.etype.subspan(part.edge, n);
      out.etype.insert(out.etype.end(), et.begin(), et.end());
    }
    own.insert(own.end(), n, seeds[k]);
    part.edge += n;
  }
  return out;
}

}  // namespace dgld::client
