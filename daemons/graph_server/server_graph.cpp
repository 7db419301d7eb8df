#include "daemons/graph_server/server_impl.h"

#include <tuple>

namespace dgld::graph_server {

// ---- graph queries and sampling -------------------------------------------

void GraphServer::Impl::on_graph_info(const RequestContext& ctx, Message&&) {
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::GraphInfoReply, fbb, [&](auto& b) {
    return fbs::CreateGraphInfoReply(b, b.CreateString(config.graph_name), config.num_nodes, config.num_edges,
                                     opts.machine_id(), config.num_parts, opts.server_id, part->num_inner_nodes(),
                                     part->num_inner_edges(),
                                     b.CreateString(std::filesystem::absolute(opts.part_config).string()));
  }));
}

void GraphServer::Impl::on_degrees(const RequestContext& ctx, Message&& m) {
  const bool out = m.as<fbs::Degrees>()->out();
  auto ids = id_blob(m, 0, "node ids", opts.max_ids_per_request);
  if (!ids.is_ok()) return ctx.reply_error(ids.status());
  const AdjacencyView& adj = out ? part->out_edges() : inner_in;
  std::vector<int64_t> deg(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    auto local = local_node((*ids)[i]);
    if (!local.is_ok()) return ctx.reply_error(local.status());
    deg[i] = adj.degree(*local);
  }
  flatbuffers::FlatBufferBuilder fbb;
  OutMessage reply =
      finish(fbs::MessageKind::DegreesReply, fbb, [](auto& b) { return fbs::CreateDegreesReply(b); });
  reply.blobs.push_back(OutBlob::from_vector(std::move(deg)));
  ctx.reply(std::move(reply));
}

void GraphServer::Impl::on_find_edges(const RequestContext& ctx, Message&& m) {
  auto ids = id_blob(m, 0, "edge ids", opts.max_ids_per_request);
  if (!ids.is_ok()) return ctx.reply_error(ids.status());
  std::vector<int64_t> src(ids->size()), dst(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    const int64_t eid = (*ids)[i];
    if (eid < edge_range.start || eid >= edge_range.end) {
      return ctx.reply_error(invalid_argument("edge id " + std::to_string(eid) + " is not owned by machine " +
                                              std::to_string(opts.machine_id()) + " (owns [" +
                                              std::to_string(edge_range.start) + ", " +
                                              std::to_string(edge_range.end) + "))"));
    }
    std::tie(src[i], dst[i]) = part->inner_edge_ends(eid - edge_range.start);
  }
  flatbuffers::FlatBufferBuilder fbb;
  OutMessage reply =
      finish(fbs::MessageKind::FindEdgesReply, fbb, [](auto& b) { return fbs::CreateFindEdgesReply(b); });
  reply.blobs.push_back(OutBlob::from_vector(std::move(src)));
  reply.blobs.push_back(OutBlob::from_vector(std::move(dst)));
  ctx.reply(std::move(reply));
}

void GraphServer::Impl::on_sample(const RequestContext& ctx, Message&& m) {
  const auto* req = m.as<fbs::SampleNeighbors>();
  auto parsed = read_sampling_spec(req->spec(), "SampleNeighbors from " + ctx.peer());
  if (!parsed.is_ok()) return ctx.reply_error(parsed.status());
  const SamplingSpec& spec = *parsed;
  if (spec.num_layers() != 1) {
    return ctx.reply_error(invalid_argument("sample_neighbors: a request samples one layer, this one has " +
                                            std::to_string(spec.num_layers())));
  }
  auto seeds = id_blob(m, 0, "seed ids", opts.max_ids_per_request);
  if (!seeds.is_ok()) return ctx.reply_error(seeds.status());
  const int64_t fanout = spec.fanouts[0];
  if (fanout > INT32_MAX) {
    return ctx.reply_error(invalid_argument("sample_neighbors: fanout " + std::to_string(fanout) + " is out of range"));
  }
  // With replacement each seed gives `fanout` edges whatever its degree: the
  // reply (two int64 ids per edge) is capped like an id list.
  if (spec.replace && fanout > 0 && static_cast<uint64_t>(fanout) * seeds->size() > opts.max_ids_per_request) {
    return ctx.reply_error(resource_exhausted(
        "sample_neighbors: fanout " + std::to_string(fanout) + " with replacement for " +
        std::to_string(seeds->size()) + " seeds is over the cap of " + std::to_string(opts.max_ids_per_request) +
        " sampled edges per request (--max-ids-per-request)"));
  }
  std::vector<int64_t> rows(seeds->size());
  for (size_t i = 0; i < seeds->size(); ++i) {
    auto local = local_node((*seeds)[i]);
    if (!local.is_ok()) return ctx.reply_error(local.status().with_context("sample_neighbors"));
    rows[i] = *local;
  }
  SampleOptions so;
  so.fanout = fanout;
  so.replace = spec.replace;
  so.rng_seed = static_cast<uint64_t>(req->seed());
  SampleExtras extras;
  extras.stream_keys = *seeds;
  const bool typed = !spec.etype_fanouts.empty();
  if (typed) {
    const auto num_etypes = static_cast<size_t>(config.types.num_etypes());
    if (part->edge_types().empty()) {
      return ctx.reply_error(invalid_argument("sample_neighbors: per-edge-type fanouts, but graph '" +
                                              config.graph_name + "' has no edge types (it is homogeneous)"));
    }
    if (spec.etype_fanouts[0].size() != num_etypes) {
      return ctx.reply_error(invalid_argument("sample_neighbors: " + std::to_string(spec.etype_fanouts[0].size()) +
                                              " per-edge-type fanouts for " + std::to_string(num_etypes) +
                                              " edge types"));
    }
    so.etype_fanouts = spec.etype_fanouts[0];
    extras.etypes = part->edge_types().first(inner_in.indices.size());
  }
  // Seeds are spread over the sampling threads when they are free (one
  // request at a time; others meanwhile run on their I/O thread alone). The
  // per-seed random streams make the result the same either way.
  extras.pool = sample_pool.get();
  const AdjacencyView& adj = spec.out_edges ? part->out_edges() : inner_in;
  std::vector<float> csc_weights;
  if (!spec.prob.empty()) {
    auto t = tensors->find(spec.prob);
    if (!t.is_ok()) return ctx.reply_error(t.status().with_context("sample_neighbors prob"));
    if ((*t)->policy != PartPolicy::edge) {
      return ctx.reply_error(invalid_argument("sample_neighbors prob '" + spec.prob + "' is not an edge tensor"));
    }
    // The tensor's rows are in edge id order, the sampler's positions in CSC order.
    auto w = part->edge_weights(spec.prob, (*t)->dtype(), (*t)->storage->data(), (*t)->num_rows(), (*t)->row_bytes(),
                                &csc_weights);
    if (!w.is_ok()) return ctx.reply_error(w.status());
    extras.weights = *w;
  }
  std::vector<int64_t> counts;
  extras.seed_counts = &counts;
  auto edges = sample_neighbors(adj, rows, so, extras);
  if (!edges.is_ok()) return ctx.reply_error(edges.status());
  // The kernel reports (neighbour, seed). The seeds are the request's, so the
  // reply carries each seed's edge count instead of a seed id per edge.
  if (Status st = map_to_global(edges->src, part->node_global_ids()); !st.is_ok()) return ctx.reply_error(st);
  flatbuffers::FlatBufferBuilder fbb;
  OutMessage reply = finish(fbs::MessageKind::SampleNeighborsReply, fbb,
                            [](auto& b) { return fbs::CreateSampleNeighborsReply(b); });
  reply.blobs.push_back(OutBlob::from_vector(std::move(edges->src)));
  reply.blobs.push_back(OutBlob::from_vector(std::move(edges->eid)));
  reply.blobs.push_back(OutBlob::from_vector(std::move(counts)));
  if (typed) reply.blobs.push_back(OutBlob::from_vector(std::move(edges->etype)));
  ctx.reply(std::move(reply));
}

}  // namespace dgld::graph_server
