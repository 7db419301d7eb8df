#include "client/sampler_protocol.h"

#include <cstring>

#include "client/cluster.h"
#include "client/local_partition.h"
#include "common/buffer_pool.h"
#include "common/shm/shared_tensor.h"
#include "schemas/rpc_generated.h"
#include "schemas/sampler_generated.h"

namespace dgld::client {

namespace {

template <typename T>
Status copy_blob(const net::ByteBuffer& b, int64_t count, std::vector<T>& out, const char* what,
                 const std::string& peer) {
  if (count < 0 || b.size() != static_cast<size_t>(count) * sizeof(T)) {
    return protocol_error("SampleBatchReply from " + peer + ": " + what + " has " +
                          std::to_string(b.size()) + " bytes, expected " +
                          std::to_string(count) + " x " + std::to_string(sizeof(T)));
  }
  out.resize(static_cast<size_t>(count));
  if (count > 0) std::memcpy(out.data(), b.data(), b.size());
  return Status::ok();
}

}  // namespace

net::OutMessage encode_sample_batch(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                                    const BatchSpec& spec, int skip_features_of, const std::string& reply_slot) {
  flatbuffers::FlatBufferBuilder fbb;
  auto sampling = write_sampling_spec(fbb, spec.sampling);
  auto feature = fbb.CreateString(spec.feature);
  auto label = fbb.CreateString(spec.label);
  auto slot = reply_slot.empty() ? flatbuffers::Offset<flatbuffers::String>() : fbb.CreateString(reply_slot);
  fbb.Finish(fbs::CreateSampleBatch(fbb, batch_id, sampling, rng_seed, feature, label, skip_features_of, slot));
  net::OutMessage m(fbs::MessageKind::SampleBatch, fbb);
  m.blobs.push_back(net::OutBlob::copy_of(seeds.data(), seeds.size_bytes()));
  return m;
}

net::OutMessage encode_prepare(const BatchSpec& spec) {
  flatbuffers::FlatBufferBuilder fbb;
  auto sampling = write_sampling_spec(fbb, spec.sampling);
  auto feature = fbb.CreateString(spec.feature);
  auto label = fbb.CreateString(spec.label);
  fbb.Finish(fbs::CreateSampleBatch(fbb, -1, sampling, 0, feature, label, -1, 0, /*prepare=*/true));
  net::OutMessage m(fbs::MessageKind::SampleBatch, fbb);
  m.blobs.push_back(net::OutBlob{});
  return m;
}

net::OutMessage encode_prepare_reply() {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateSampleBatchReply(fbb, -1));
  return net::OutMessage(fbs::MessageKind::SampleBatchReply, fbb);
}

Result<SampleBatchRequest> decode_sample_batch(const net::Message& m, const std::string& peer) {
  const auto* req = m.as<fbs::SampleBatch>();
  const std::string where = "SampleBatch from " + peer;
  if (m.blobs.size() != 1 || m.blobs[0].size() % sizeof(int64_t) != 0) {
    return invalid_argument(where + ": blob 0 must hold the int64 seed ids");
  }
  SampleBatchRequest out;
  out.batch_id = req->batch_id();
  out.seeds.resize(m.blobs[0].size() / sizeof(int64_t));
  if (!out.seeds.empty()) std::memcpy(out.seeds.data(), m.blobs[0].data(), m.blobs[0].size());
  out.rng_seed = req->rng_seed();
  DGLD_ASSIGN_OR_RETURN(out.spec.sampling, read_sampling_spec(req->spec(), where));
  out.spec.feature = req->feature() ? req->feature()->str() : "";
  out.spec.label = req->label() ? req->label()->str() : "";
  out.skip_features_of = req->skip_features_of();
  out.reply_slot = req->reply_slot() ? req->reply_slot()->str() : "";
  out.prepare = req->prepare();
  if (out.prepare && !out.seeds.empty()) return invalid_argument(where + ": a prepare request carries no seeds");
  return out;
}

namespace {

// A heterogeneous batch's blocks carry edge types (every block has them, or none).
bool has_etypes(const Batch& batch) {
  for (const Block& b : batch.mini_batch.blocks) {
    if (!b.etypes.empty()) return true;
  }
  return false;
}

net::OutMessage sample_batch_reply_header(const Batch& batch, bool in_slot, int64_t slot_bytes_needed) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fbs::SampledBlock>> offs;
  for (const Block& b : batch.mini_batch.blocks) {
    offs.push_back(fbs::CreateSampledBlock(fbb, b.num_dst(), b.num_src(), b.num_edges()));
  }
  auto vec = fbb.CreateVector(offs);
  const bool etypes = has_etypes(batch);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbs::TypedFeature>>> typed;
  if (!batch.typed_features.empty()) {
    std::vector<flatbuffers::Offset<fbs::TypedFeature>> t;
    for (const TypedRows& r : batch.typed_features) {
      t.push_back(fbs::CreateTypedFeature(fbb, r.ntype, static_cast<int64_t>(r.index.size()), r.dim));
    }
    typed = fbb.CreateVector(t);
  }
  std::vector<flatbuffers::Offset<fbs::PeerTraffic>> peers;
  for (const net::PeerCost& p : batch.traffic.calls.peers) {
    peers.push_back(fbs::CreatePeerTraffic(fbb, p.machine, p.calls, p.bytes_out, p.bytes_in));
  }
  auto peer_vec = fbb.CreateVector(peers);
  const PullRows& rows = batch.traffic.rows;
  fbb.Finish(fbs::CreateSampleBatchReply(
      fbb, batch.batch_id, vec, batch.feature_dim,
      static_cast<int64_t>(batch.timings.sample_s * 1e9), static_cast<int64_t>(batch.timings.fetch_s * 1e9),
      batch.features_skipped_machine, in_slot, slot_bytes_needed, etypes, typed,
      static_cast<int64_t>(batch.timings.sample_cpu_s * 1e9), static_cast<int64_t>(batch.timings.fetch_cpu_s * 1e9),
      peer_vec, rows.local, rows.cached, rows.remote));
  return net::OutMessage(fbs::MessageKind::SampleBatchReply, fbb);
}

// A slot always has room for one label per seed (zeros when there are none).
BatchShape shape_of(const Batch& batch, bool has_labels, const std::vector<TypedRows>& typed) {
  BatchShape shape;
  for (const Block& b : batch.mini_batch.blocks) shape.blocks.push_back({b.num_dst(), b.num_src(), b.num_edges()});
  shape.feature_dim = batch.feature_dim;
  shape.has_labels = has_labels;
  shape.etypes = has_etypes(batch);
  for (const TypedRows& t : typed) shape.typed.push_back({t.ntype, static_cast<int64_t>(t.index.size()), t.dim});
  return shape;
}

}  // namespace

net::OutMessage encode_slot_batch_reply(const Batch& batch) {
  return sample_batch_reply_header(batch, /*in_slot=*/true, 0);
}

Result<BatchLayout> write_blocks_to_slot(const Batch& batch, std::byte* slot, size_t slot_bytes,
                                         const std::vector<TypedRows>& typed) {
  const BatchShape shape = shape_of(batch, /*has_labels=*/true, typed);
  DGLD_ASSIGN_OR_RETURN(BatchLayout l, batch_slot_layout(shape));
  if (l.total > slot_bytes) return l;
  auto put = [&](size_t off, const auto& v) {
    if (!v.empty()) std::memcpy(slot + off, v.data(), v.size() * sizeof(v[0]));
  };
  for (size_t i = 0; i < batch.mini_batch.blocks.size(); ++i) {
    const Block& b = batch.mini_batch.blocks[i];
    put(l.blocks[i].dst_nodes, b.dst_nodes);
    put(l.blocks[i].src_nodes, b.src_nodes);
    put(l.blocks[i].indptr, b.indptr);
    put(l.blocks[i].indices, b.indices);
    put(l.blocks[i].eids, b.eids);
    if (shape.etypes) {
      if (b.etypes.size() != b.indices.size()) {
        return invalid_argument("batch " + std::to_string(batch.batch_id) + ": block " + std::to_string(i) + " has " +
                                std::to_string(b.etypes.size()) + " edge types for " +
                                std::to_string(b.indices.size()) + " edges");
      }
      put(l.blocks[i].etypes, b.etypes);
    }
  }
  for (size_t k = 0; k < typed.size(); ++k) put(l.typed[k].index, typed[k].index);
  return l;
}

int64_t slot_bytes_needed(const net::Message& m) {
  if (m.kind() != static_cast<uint16_t>(fbs::MessageKind::SampleBatchReply)) return 0;
  if (!net::verify_payload<fbs::SampleBatchReply>(m, "SampleBatchReply").is_ok()) return 0;
  return std::max<int64_t>(0, m.as<fbs::SampleBatchReply>()->slot_bytes_needed());
}

net::OutMessage encode_sample_batch_reply(Batch&& batch, int64_t slot_bytes_needed) {
  net::OutMessage m = sample_batch_reply_header(batch, /*in_slot=*/false, slot_bytes_needed);
  for (Block& b : batch.mini_batch.blocks) {
    m.blobs.push_back(net::OutBlob::from_vector(std::move(b.dst_nodes)));
    m.blobs.push_back(net::OutBlob::from_vector(std::move(b.src_nodes)));
    m.blobs.push_back(net::OutBlob::from_vector(std::move(b.indptr)));
    m.blobs.push_back(net::OutBlob::from_vector(std::move(b.indices)));
    m.blobs.push_back(net::OutBlob::from_vector(std::move(b.eids)));
  }
  m.blobs.push_back(net::OutBlob::from_vector(std::move(batch.features)));
  m.blobs.push_back(net::OutBlob::from_vector(std::move(batch.labels)));
  if (has_etypes(batch)) {
    for (Block& b : batch.mini_batch.blocks) m.blobs.push_back(net::OutBlob::from_vector(std::move(b.etypes)));
  }
  for (TypedRows& r : batch.typed_features) {
    m.blobs.push_back(net::OutBlob::from_vector(std::move(r.index)));
    m.blobs.push_back(net::OutBlob::from_vector(std::move(r.rows)));
  }
  return m;
}

namespace {

// Positions of a type's rows in the input nodes: ascending, in range.
Status check_typed_positions(const TypedRows& t, size_t num_inputs, const std::string& peer) {
  for (size_t k = 0; k < t.index.size(); ++k) {
    if (t.index[k] < 0 || t.index[k] >= static_cast<int64_t>(num_inputs) || (k > 0 && t.index[k] <= t.index[k - 1])) {
      return protocol_error("SampleBatchReply from " + peer + ": typed feature positions are not ascending "
                            "positions of the input nodes");
    }
  }
  return Status::ok();
}

Status check_etypes(const Block& b, const std::string& peer) {
  for (int32_t t : b.etypes) {
    if (t < 0) return protocol_error("SampleBatchReply from " + peer + ": a negative edge type");
  }
  return Status::ok();
}

// A heterogeneous batch written into a slot: each block's edge types and the
// typed rows, copied out of it.
Status typed_parts_from_slot(const BatchShape& shape, const BatchLayout& layout, const std::byte* slot,
                             const std::string& peer, Batch& out) {
  auto& mb = out.mini_batch;
  if (shape.etypes) {
    for (size_t i = 0; i < mb.blocks.size(); ++i) {
      Block& b = mb.blocks[i];
      b.etypes.resize(b.indices.size());
      if (!b.etypes.empty()) std::memcpy(b.etypes.data(), slot + layout.blocks[i].etypes, b.etypes.size() * 4);
      DGLD_RETURN_IF_ERROR(check_etypes(b, peer));
    }
  }
  for (size_t k = 0; k < shape.typed.size(); ++k) {
    const auto& s = shape.typed[k];
    TypedRows t;
    t.ntype = s.ntype;
    t.dim = s.dim;
    t.index.resize(static_cast<size_t>(s.count));
    if (s.count > 0) std::memcpy(t.index.data(), slot + layout.typed[k].index, t.index.size() * sizeof(int64_t));
    DGLD_RETURN_IF_ERROR(check_typed_positions(t, mb.input_nodes.size(), peer));
    t.rows.resize(static_cast<size_t>(s.count * s.dim));
    if (!t.rows.empty()) std::memcpy(t.rows.data(), slot + layout.typed[k].rows, t.rows.size() * sizeof(float));
    out.typed_features.push_back(std::move(t));
  }
  return Status::ok();
}

// A heterogeneous batch's edge types (one int32 array per block, checked
// against the types the config lists) and typed feature rows (positions in
// the input nodes, ascending, and their rows), from blob `at` on.
Status decode_typed_parts(const fbs::SampleBatchReply& r, const net::Message& m, size_t at, const std::string& peer,
                          Batch& out) {
  auto& mb = out.mini_batch;
  if (r.etypes()) {
    for (size_t i = 0; i < mb.blocks.size(); ++i, ++at) {
      Block& b = mb.blocks[i];
      DGLD_RETURN_IF_ERROR(copy_blob(m.blobs[at], static_cast<int64_t>(b.indices.size()), b.etypes, "etypes", peer));
      DGLD_RETURN_IF_ERROR(check_etypes(b, peer));
    }
  }
  if (!r.typed_features()) return Status::ok();
  const auto rows = static_cast<int64_t>(mb.input_nodes.size());
  for (const fbs::TypedFeature* f : *r.typed_features()) {
    TypedRows t;
    t.ntype = f->ntype();
    t.dim = f->dim();
    if (t.ntype < 0 || t.dim < 0 || f->count() < 0 || f->count() > rows) {
      return protocol_error("SampleBatchReply from " + peer + ": typed feature rows with bad sizes");
    }
    DGLD_RETURN_IF_ERROR(copy_blob(m.blobs[at++], f->count(), t.index, "typed feature positions", peer));
    DGLD_RETURN_IF_ERROR(copy_blob(m.blobs[at++], f->count() * t.dim, t.rows, "typed feature rows", peer));
    DGLD_RETURN_IF_ERROR(check_typed_positions(t, mb.input_nodes.size(), peer));
    out.typed_features.push_back(std::move(t));
  }
  return Status::ok();
}

}  // namespace

Result<Batch> decode_sample_batch_reply(net::Message&& m, const std::string& peer,
                                        const std::shared_ptr<BufferPool>& buffers, BatchSlots::Lease* slot) {
  if (m.kind() != static_cast<uint16_t>(fbs::MessageKind::SampleBatchReply)) {
    return protocol_error("reply from " + peer + " has kind " + std::to_string(m.kind()) +
                          ", expected SampleBatchReply");
  }
  if (Status st = net::verify_payload<fbs::SampleBatchReply>(m, "SampleBatchReply"); !st.is_ok()) {
    return st.with_context("from " + peer);
  }
  const auto* r = m.as<fbs::SampleBatchReply>();
  const size_t num_blocks = r->blocks() ? r->blocks()->size() : 0;
  const bool in_slot = r->in_slot();
  const bool etypes = r->etypes();
  const size_t num_typed = r->typed_features() ? r->typed_features()->size() : 0;
  const size_t want_blobs = in_slot ? 0 : 5 * num_blocks + 2 + (etypes ? num_blocks : 0) + 2 * num_typed;
  if (num_blocks == 0 || m.blobs.size() != want_blobs || r->feature_dim() < 0) {
    return protocol_error("SampleBatchReply from " + peer + ": " + std::to_string(num_blocks) +
                          " blocks with " + std::to_string(m.blobs.size()) + " blobs" +
                          (in_slot ? " (in a slot: none expected)" : ""));
  }
  if (in_slot && slot == nullptr) {
    return protocol_error("SampleBatchReply from " + peer + " says the batch is in a slot, but none was given");
  }
  Batch out;
  out.batch_id = r->batch_id();
  out.feature_dim = r->feature_dim();
  out.timings.sample_s = static_cast<double>(r->sample_ns()) * 1e-9;
  out.timings.fetch_s = static_cast<double>(r->fetch_ns()) * 1e-9;
  out.timings.sample_cpu_s = static_cast<double>(r->sample_cpu_ns()) * 1e-9;
  out.timings.fetch_cpu_s = static_cast<double>(r->fetch_cpu_ns()) * 1e-9;
  if (r->rpc_peers()) {
    for (const fbs::PeerTraffic* p : *r->rpc_peers()) {
      out.traffic.calls.add(p->machine(), p->calls(), p->bytes_out(), p->bytes_in());
    }
  }
  out.traffic.rows = PullRows{r->rows_local(), r->rows_cached(), r->rows_remote()};
  BatchShape shape;
  shape.feature_dim = out.feature_dim;
  shape.has_labels = true;
  shape.etypes = etypes;
  if (r->typed_features()) {
    for (const fbs::TypedFeature* f : *r->typed_features()) shape.typed.push_back({f->ntype(), f->count(), f->dim()});
  }
  for (size_t i = 0; i < num_blocks; ++i) {
    const auto* info = r->blocks()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const int64_t nd = info->num_dst(), ns = info->num_src(), ne = info->num_edges();
    if (nd < 0 || ns < nd || ne < 0) {
      return protocol_error("SampleBatchReply from " + peer + ": block " + std::to_string(i) +
                            " has bad sizes");
    }
    shape.blocks.push_back({nd, ns, ne});
  }
  BatchLayout layout;
  if (in_slot) {
    auto l = batch_slot_layout(shape);
    if (!l.is_ok()) return protocol_error("SampleBatchReply from " + peer + ": " + l.status().message());
    if (l->total > slot->size()) {
      return protocol_error("SampleBatchReply from " + peer + ": a batch of " + std::to_string(l->total) +
                            " bytes in a slot of " + std::to_string(slot->size()));
    }
    layout = std::move(*l);
  }
  // Array `k` of block i (dst_nodes, src_nodes, indptr, indices, eids), from
  // the blobs or from the slot.
  auto read_array = [&](size_t i, int k, int64_t count, std::vector<int64_t>& into, const char* what) -> Status {
    if (!in_slot) return copy_blob(m.blobs[5 * i + static_cast<size_t>(k)], count, into, what, peer);
    const auto& o = layout.blocks[i];
    const size_t offs[] = {o.dst_nodes, o.src_nodes, o.indptr, o.indices, o.eids};
    into.resize(static_cast<size_t>(count));
    if (count > 0) std::memcpy(into.data(), slot->data() + offs[k], static_cast<size_t>(count) * sizeof(int64_t));
    return Status::ok();
  };
  auto& mb = out.mini_batch;
  mb.blocks.resize(num_blocks);
  for (size_t i = 0; i < num_blocks; ++i) {
    Block& b = mb.blocks[i];
    const int64_t nd = shape.blocks[i].num_dst, ns = shape.blocks[i].num_src, ne = shape.blocks[i].num_edges;
    DGLD_RETURN_IF_ERROR(read_array(i, 0, nd, b.dst_nodes, "dst_nodes"));
    DGLD_RETURN_IF_ERROR(read_array(i, 1, ns, b.src_nodes, "src_nodes"));
    DGLD_RETURN_IF_ERROR(read_array(i, 2, nd + 1, b.indptr, "indptr"));
    DGLD_RETURN_IF_ERROR(read_array(i, 3, ne, b.indices, "indices"));
    DGLD_RETURN_IF_ERROR(read_array(i, 4, ne, b.eids, "eids"));
    bool ok = b.indptr.front() == 0 && b.indptr.back() == ne;
    for (int64_t d = 0; ok && d < nd; ++d) ok = b.indptr[d] <= b.indptr[d + 1];
    for (int64_t k = 0; ok && k < ne; ++k) ok = b.indices[k] >= 0 && b.indices[k] < ns;
    if (!ok) {
      return protocol_error("SampleBatchReply from " + peer + ": block " + std::to_string(i) +
                            " has an invalid CSR");
    }
  }
  mb.seeds = mb.blocks.back().dst_nodes;
  mb.input_nodes = mb.blocks.front().src_nodes;
  const int64_t rows = static_cast<int64_t>(mb.input_nodes.size());
  if (in_slot) {
    // Every row, where the worker wrote it; the slot stays busy while they are used.
    out.from_slot = true;
    out.labels.resize(mb.seeds.size());
    if (!mb.seeds.empty()) {
      std::memcpy(out.labels.data(), slot->data() + layout.labels, mb.seeds.size() * sizeof(int64_t));
    }
    if (etypes || !shape.typed.empty()) {
      // A heterogeneous batch: edge types and typed rows are copied out, the slot is free again.
      DGLD_RETURN_IF_ERROR(typed_parts_from_slot(shape, layout, slot->data(), peer, out));
      return out;
    }
    const size_t features_at = layout.features;
    auto held = std::move(*slot).hold(features_at);
    out.slot_features = std::shared_ptr<const float>(held, reinterpret_cast<const float*>(held.get()));
    return out;
  }
  const size_t fb = m.blobs[5 * num_blocks].size();
  out.features_skipped_machine = r->skipped_features_of();
  if (buffers && fb % sizeof(float) == 0) {  // copy_blob then only copies
    out.features = buffers->take(fb / sizeof(float));
    out.features_pool = buffers;
  }
  if (out.feature_dim == 0) {
    if (fb != 0) return protocol_error("SampleBatchReply from " + peer + ": features without feature_dim");
  } else if (out.features_skipped_machine >= 0) {
    // Only some rows: fill_skipped_features checks their count.
    const size_t row = static_cast<size_t>(out.feature_dim) * sizeof(float);
    if (fb % row != 0 || fb / row > static_cast<size_t>(rows)) {
      return protocol_error("SampleBatchReply from " + peer + ": " + std::to_string(fb) +
                            " bytes of features for " + std::to_string(rows) + " input nodes");
    }
    DGLD_RETURN_IF_ERROR(copy_blob(m.blobs[5 * num_blocks], static_cast<int64_t>(fb / sizeof(float)),
                                   out.features, "features", peer));
  } else {
    DGLD_RETURN_IF_ERROR(copy_blob(m.blobs[5 * num_blocks], rows * out.feature_dim, out.features,
                                   "features", peer));
  }
  const auto& lb = m.blobs[5 * num_blocks + 1];
  if (lb.size() != 0) {
    DGLD_RETURN_IF_ERROR(copy_blob(lb, static_cast<int64_t>(mb.seeds.size()), out.labels, "labels", peer));
  }
  DGLD_RETURN_IF_ERROR(decode_typed_parts(*r, m, 5 * num_blocks + 2, peer, out));
  return out;
}

Status fill_skipped_features(Cluster& cluster, const std::string& feature, Batch& batch,
                             const std::string& peer) {
  const int m = batch.features_skipped_machine;
  if (m < 0) return Status::ok();
  if (m != cluster.machine_id()) {
    return protocol_error("SampleBatchReply from " + peer + " left out the features of machine " +
                          std::to_string(m) + ", not of this machine " + std::to_string(cluster.machine_id()));
  }
  const std::string name =
      feature.find('/') != std::string::npos ? feature : cluster.config().ntype + "/" + feature;
  DGLD_ASSIGN_OR_RETURN(shm::SharedTensor * t, cluster.local().tensor(name));
  const size_t dim = static_cast<size_t>(batch.feature_dim), row = dim * sizeof(float);
  if (t->row_bytes() != row) {
    return invalid_argument("local tensor '" + name + "' has rows of " + std::to_string(t->row_bytes()) +
                            " bytes, the batch from " + peer + " " + std::to_string(row));
  }
  const IdRange r = cluster.partition_book().node_range(m);
  const auto& input = batch.mini_batch.input_nodes;
  const size_t others = batch.features.size() / dim;
  std::vector<float> full =
      batch.features_pool ? batch.features_pool->take(input.size() * dim) : std::vector<float>(input.size() * dim);
  size_t k = 0;
  for (size_t i = 0; i < input.size(); ++i) {
    const int64_t v = input[i];
    if (v >= r.start && v < r.end) {
      std::memcpy(&full[i * dim], t->row(v - r.start), row);
    } else {
      if (k == others) break;
      std::memcpy(&full[i * dim], &batch.features[k * dim], row);
      ++k;
    }
  }
  size_t remote_inputs = 0;
  for (int64_t v : input) remote_inputs += (v < r.start || v >= r.end);
  if (k != others || remote_inputs != others) {
    return protocol_error("SampleBatchReply from " + peer + ": " + std::to_string(others) +
                          " feature rows for " + std::to_string(remote_inputs) + " input nodes of other machines");
  }
  if (batch.features_pool) batch.features_pool->give(std::move(batch.features));
  batch.features = std::move(full);
  batch.features_skipped_machine = -1;
  return Status::ok();
}

}  // namespace dgld::client
