#include "daemons/graph_server/server_impl.h"

namespace dgld::graph_server {

// ---- KVStore ---------------------------------------------------------------

void GraphServer::Impl::on_pull(const RequestContext& ctx, Message&& m) {
  const auto* req = m.as<fbs::KvPull>();
  const std::string tname = req->name() ? req->name()->str() : "";
  auto t = tensors->find(tname);
  if (!t.is_ok()) return ctx.reply_error(t.status());
  auto ids = id_blob(m, 0, "ids", opts.max_ids_per_request);
  if (!ids.is_ok()) return ctx.reply_error(ids.status());
  const std::shared_ptr<ServedTensor>& tensor = *t;
  auto local = local_rows(*tensor, *ids, "pull");
  if (!local.is_ok()) return ctx.reply_error(local.status());
  // Runs of consecutive rows big enough go out straight from shared memory
  // (the tensor stays alive until written); small scattered rows are cheaper
  // to gather into one buffer than to hand the kernel piece by piece
  // (measured: 400-byte pieces halve the bandwidth).
  const size_t rb = tensor->row_bytes();
  const auto* base = static_cast<const uint8_t*>(tensor->storage->data());
  auto pieces = std::make_shared<std::vector<net::OutPiece>>();
  for (size_t i = 0; i < local->size();) {
    size_t j = i + 1;
    while (j < local->size() && (*local)[j] == (*local)[j - 1] + 1) ++j;
    pieces->push_back({base + static_cast<size_t>((*local)[i]) * rb, (j - i) * rb});
    i = j;
  }
  OutBlob blob;
  if (!pieces->empty() && local->size() * rb / pieces->size() >= kMinZeroCopyPiece) {
    blob.size = local->size() * rb;
    blob.pieces = std::move(pieces);
    blob.keep_alive = tensor;
  } else {
    uint8_t* out = nullptr;
    blob = bytes_blob(local->size() * rb, &out);
    if (Status st = tensor->storage->gather_rows(*local, out); !st.is_ok()) return ctx.reply_error(st);
  }
  auto shape = tensor->shape();
  std::vector<int64_t> row_shape(shape.begin() + 1, shape.end());
  flatbuffers::FlatBufferBuilder fbb;
  OutMessage reply = finish(fbs::MessageKind::KvPullReply, fbb, [&](auto& b) {
    return fbs::CreateKvPullReply(b, static_cast<uint32_t>(tensor->dtype()), b.CreateVector(row_shape));
  });
  reply.blobs.push_back(std::move(blob));
  ctx.reply(std::move(reply));
}

void GraphServer::Impl::on_push(const RequestContext& ctx, Message&& m) {
  const auto* req = m.as<fbs::KvPush>();
  const std::string tname = req->name() ? req->name()->str() : "";
  auto t = tensors->find(tname);
  if (!t.is_ok()) return ctx.reply_error(t.status());
  ServedTensor& tensor = **t;
  if (req->dtype() != static_cast<uint32_t>(tensor.dtype())) {
    return ctx.reply_error(invalid_argument("push '" + tname + "': rows are " +
                                            dtype_name(static_cast<DType>(req->dtype())) + ", the tensor is " +
                                            dtype_name(tensor.dtype())));
  }
  auto ids = id_blob(m, 0, "ids", opts.max_ids_per_request);
  if (!ids.is_ok()) return ctx.reply_error(ids.status());
  if (m.blobs.size() < 2 || m.blobs[1].size() != ids->size() * tensor.row_bytes()) {
    return ctx.reply_error(invalid_argument(
        "push '" + tname + "': expected " + std::to_string(ids->size()) + " rows of " +
        std::to_string(tensor.row_bytes()) + " bytes in blob 1, got " +
        (m.blobs.size() < 2 ? std::string("no blob") : std::to_string(m.blobs[1].size()) + " bytes")));
  }
  auto local = local_rows(tensor, *ids, "push");
  if (!local.is_ok()) return ctx.reply_error(local.status());
  const std::vector<int64_t>& rows = *local;
  if (Status st = tensor.storage->scatter_rows(rows, m.blobs[1].data()); !st.is_ok()) return ctx.reply_error(st);
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::KvPushReply, fbb,
                   [&](auto& b) { return fbs::CreateKvPushReply(b, static_cast<int64_t>(rows.size())); }));
}

void GraphServer::Impl::on_create(const RequestContext& ctx, Message&& m) {
  if (!opts.is_main()) {
    return ctx.reply_error(invalid_argument(name() + " is a backup server: send KvCreate to server 0 of machine " +
                                            std::to_string(opts.machine_id())));
  }
  const auto* r = m.as<fbs::KvCreate>();
  TensorSpec spec;
  spec.name = r->name() ? r->name()->str() : "";
  spec.dtype = static_cast<DType>(r->dtype());
  if (r->shape()) spec.shape.assign(r->shape()->begin(), r->shape()->end());
  spec.policy = r->policy() == fbs::PartPolicy::Edge ? PartPolicy::edge : PartPolicy::node;
  spec.init = static_cast<InitKind>(r->init());
  spec.init_a = r->init_a();
  spec.init_b = r->init_b();
  spec.seed = static_cast<uint64_t>(r->seed());
  spec.persistent = r->persistent();
  // A heterogeneous graph's "<ntype>/..." tensor has one row per node of the type.
  const bool edge = spec.policy == PartPolicy::edge;
  const int type = edge ? edge_tensor_type(config, spec.name) : node_tensor_type(config, spec.name);
  const int64_t total = type >= 0 ? (edge ? config.types.etype_count[type] : config.types.ntype_count[type])
                                  : (edge ? config.num_edges : config.num_nodes);
  if (!spec.shape.empty() && spec.shape[0] != total) {
    return ctx.reply_error(invalid_argument(
        "create '" + spec.name + "': dim 0 is " + std::to_string(spec.shape[0]) + " but the graph has " +
        std::to_string(total) + (edge ? " edges" : " nodes") +
        (type < 0 ? "" : " of type '" + (edge ? config.types.etypes[type] : config.types.ntypes[type]) + "'")));
  }
  // This machine's rows of it, against the cap.
  const IdRange range = edge ? edge_tensor_range(config, opts.machine_id(), spec.name)
                             : node_tensor_range(config, opts.machine_id(), spec.name);
  double bytes = static_cast<double>(range.end - range.start) * static_cast<double>(dtype_size(spec.dtype));
  for (size_t i = 1; i < spec.shape.size(); ++i) bytes *= static_cast<double>(std::max<int64_t>(spec.shape[i], 0));
  if (bytes > static_cast<double>(opts.max_tensor_bytes)) {
    return ctx.reply_error(resource_exhausted("create '" + spec.name + "': " + std::to_string(bytes / (1 << 20)) +
                                              " MiB on machine " + std::to_string(opts.machine_id()) +
                                              ", over the cap of " + std::to_string(opts.max_tensor_bytes >> 20) +
                                              " MiB (--max-tensor-bytes)"));
  }
  auto created = tensors->create(spec);
  if (!created.is_ok()) return ctx.reply_error(created.status());
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::KvCreateReply, fbb,
                   [&](auto& b) { return fbs::CreateKvCreateReply(b, *created); }));
}

void GraphServer::Impl::on_delete(const RequestContext& ctx, Message&& m) {
  if (!opts.is_main()) {
    return ctx.reply_error(invalid_argument(name() + " is a backup server: send KvDelete to server 0 of machine " +
                                            std::to_string(opts.machine_id())));
  }
  const auto* r = m.as<fbs::KvDelete>();
  if (Status st = tensors->remove(r->name() ? r->name()->str() : ""); !st.is_ok()) return ctx.reply_error(st);
  flatbuffers::FlatBufferBuilder fbb;
  ctx.reply(finish(fbs::MessageKind::KvDeleteReply, fbb, [](auto& b) { return fbs::CreateKvDeleteReply(b); }));
}

void GraphServer::Impl::on_list(const RequestContext& ctx, Message&&) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fbs::TensorInfo>> infos;
  for (const auto& t : tensors->list()) {
    auto shape = t->shape();
    infos.push_back(fbs::CreateTensorInfo(fbb, fbb.CreateString(t->name), static_cast<uint32_t>(t->dtype()),
                                          fbb.CreateVector(shape),
                                          t->policy == PartPolicy::edge ? fbs::PartPolicy::Edge : fbs::PartPolicy::Node,
                                          t->persistent, fbb.CreateString(tensors->segment_for(t->name, t->policy))));
  }
  auto vec = fbb.CreateVector(infos);
  ctx.reply(finish(fbs::MessageKind::KvListReply, fbb, [&](auto& b) { return fbs::CreateKvListReply(b, vec); }));
}

}  // namespace dgld::graph_server
