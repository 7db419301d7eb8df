#include "common/client/data_loader.h"

#include <sys/resource.h>
#include <unistd.h>

#include "common/buffer_pool.h"
#include "common/client/row_cache.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/client/cluster.h"
#include "common/logging.h"
#include "common/net/io_threads.h"
#include "common/net/rpc_client.h"
#include "common/client/local_partition.h"
#include "common/sampling/random.h"
#include "common/shm/shared_tensor.h"
#include "schemas/rpc_generated.h"
#include "schemas/sampler_generated.h"

namespace dgld::client {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

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

// "host:port" -> (host, port).
Result<std::pair<std::string, uint16_t>> split_endpoint(const std::string& ep) {
  const auto colon = ep.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return invalid_argument("sampler endpoint '" + ep + "' is not host:port");
  }
  try {
    size_t used = 0;
    const std::string p = ep.substr(colon + 1);
    const long port = std::stol(p, &used);
    if (used != p.size() || port < 1 || port > 65535) throw std::invalid_argument(p);
    return std::make_pair(ep.substr(0, colon), static_cast<uint16_t>(port));
  } catch (const std::exception&) {
    return invalid_argument("sampler endpoint '" + ep + "' has no valid port");
  }
}

}  // namespace

// ---------------------------------------------------------------- BatchBuilder

BatchBuilder::BatchBuilder(Cluster& cluster, BatchSpec spec, ThreadPool* pool,
                           std::shared_ptr<BufferPool> buffers)
    : spec_(std::move(spec)),
      buffers_(buffers ? std::move(buffers) : std::make_shared<BufferPool>()),
      source_(std::make_unique<DistNeighborSource>(cluster, DistSampleOptions{.pool = pool})),
      sampler_(spec_.fanouts, spec_.replace),
      cluster_(&cluster) {
  if (!spec_.etype_fanouts.empty()) sampler_.set_etype_fanouts(spec_.etype_fanouts);
}

Result<std::vector<DistTensor>> open_typed_features(Cluster& cluster, const std::string& feature) {
  const GraphTypeInfo& types = cluster.config().types;
  std::vector<DistTensor> out;
  for (int t = 0; t < types.num_ntypes(); ++t) {
    const std::string name = types.ntypes[t] + "/" + feature;
    auto tensor = DistTensor::open(cluster, name);
    if (!tensor.is_ok() && tensor.status().code() == StatusCode::not_found) continue;  // a featureless type
    if (!tensor.is_ok()) return tensor.status();
    if (tensor->dtype() != DType::float32 || tensor->shape().size() != 2) {
      return invalid_argument("feature tensor '" + name + "' must be a float32 matrix, is " +
                              dtype_name(tensor->dtype()));
    }
    out.push_back(std::move(*tensor));
  }
  return out;
}

Result<std::vector<TypedRows>> pull_typed_rows(Cluster& cluster, const std::vector<DistTensor>& tensors,
                                               std::span<const int64_t> ids) {
  const RangePartitionBook& book = cluster.partition_book();
  std::vector<int> slot(static_cast<size_t>(std::max(1, book.num_ntypes())), -1);
  std::vector<TypedRows> out;
  for (const DistTensor& t : tensors) {
    slot[static_cast<size_t>(t.ntype())] = static_cast<int>(out.size());
    TypedRows r;
    r.ntype = t.ntype();
    r.dim = t.shape()[1];
    out.push_back(std::move(r));
  }
  std::vector<std::vector<int64_t>> type_ids(out.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int type = book.node_type(ids[i]);
    if (type < 0) return invalid_argument("node id " + std::to_string(ids[i]) + " is not a node of the graph");
    const int s = slot[static_cast<size_t>(type)];
    if (s < 0) continue;
    out[static_cast<size_t>(s)].index.push_back(static_cast<int64_t>(i));
    type_ids[static_cast<size_t>(s)].push_back(ids[i]);
  }
  for (size_t s = 0; s < out.size(); ++s) {
    out[s].rows.resize(type_ids[s].size() * static_cast<size_t>(out[s].dim));
    DGLD_RETURN_IF_ERROR(tensors[s].pull_into(type_ids[s], out[s].rows.data()));
  }
  // Types with no node among the ids are left out.
  out.erase(std::remove_if(out.begin(), out.end(), [](const TypedRows& r) { return r.index.empty(); }), out.end());
  return out;
}

Result<std::unique_ptr<BatchBuilder>> BatchBuilder::create(Cluster& cluster, BatchSpec spec,
                                                           ThreadPool* pool, std::shared_ptr<BufferPool> buffers) {
  if (spec.fanouts.empty()) return invalid_argument("BatchBuilder: no fanouts");
  for (int64_t f : spec.fanouts) {
    if (f < -1) return invalid_argument("BatchBuilder: fanout " + std::to_string(f) + " < -1");
  }
  const bool hetero = cluster.config().types.present();
  if (!spec.etype_fanouts.empty() && !hetero) {
    return invalid_argument("BatchBuilder: per-edge-type fanouts, but graph '" + cluster.config().graph_name +
                            "' is homogeneous");
  }
  std::unique_ptr<BatchBuilder> b(new BatchBuilder(cluster, spec, pool, std::move(buffers)));
  DistGraph g(cluster);
  if (hetero && !spec.feature.empty()) {
    DGLD_ASSIGN_OR_RETURN(b->typed_feature_, open_typed_features(cluster, spec.feature));
  } else if (!spec.feature.empty()) {
    DGLD_ASSIGN_OR_RETURN(DistTensor t, g.ndata(spec.feature));
    if (t.dtype() != DType::float32) {
      return invalid_argument("feature tensor '" + t.name() + "' is " + dtype_name(t.dtype()) +
                              ", not float32");
    }
    if (spec.feature_cache_bytes > 0) {
      DGLD_ASSIGN_OR_RETURN(auto cache, build_halo_row_cache(cluster, t, spec.feature_cache_bytes));
      t.set_row_cache(std::move(cache));
    }
    b->feature_ = std::move(t);
  }
  if (!spec.label.empty()) {
    DGLD_ASSIGN_OR_RETURN(DistTensor t, g.ndata(spec.label));
    if (t.dtype() != DType::int64 || t.row_bytes() != sizeof(int64_t)) {
      return invalid_argument("label tensor '" + t.name() + "' must be int64 with one value per node");
    }
    b->label_ = std::move(t);
  }
  return b;
}

Result<Batch> BatchBuilder::sample(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                                   const EdgePairSet* exclude) const {
  Batch out;
  out.batch_id = batch_id;
  const auto t0 = Clock::now();
  auto mb = sampler_.sample(*source_, seeds, rng_seed, exclude);
  if (!mb.is_ok()) return mb.status().with_context("batch " + std::to_string(batch_id));
  out.mini_batch = std::move(*mb);
  out.timings.sample_s = seconds_since(t0);
  out.feature_dim = feature_dim();
  return out;
}

int64_t BatchBuilder::feature_dim() const {
  return feature_ ? static_cast<int64_t>(feature_->row_bytes() / sizeof(float)) : 0;
}

Status BatchBuilder::fetch(Batch& out, int skip_features_of) const {
  if (skip_features_of >= cluster_->num_machines()) {
    return invalid_argument("batch " + std::to_string(out.batch_id) + ": skip_features_of machine " +
                            std::to_string(skip_features_of) + " does not exist");
  }
  const auto t1 = Clock::now();
  if (!typed_feature_.empty()) {
    if (skip_features_of >= 0) {
      return invalid_argument("batch " + std::to_string(out.batch_id) +
                              ": heterogeneous batches are not made by sampler-workers yet");
    }
    auto rows = pull_typed_rows(*cluster_, typed_feature_, out.mini_batch.input_nodes);
    if (!rows.is_ok()) return rows.status().with_context("features of batch " + std::to_string(out.batch_id));
    out.typed_features = std::move(*rows);
  }
  if (feature_) {
    std::span<const int64_t> rows = out.mini_batch.input_nodes;
    std::vector<int64_t> others;  // input nodes the skipped machine does not own
    if (skip_features_of >= 0) {
      const IdRange r = cluster_->partition_book().node_range(skip_features_of);
      for (int64_t v : rows) {
        if (v < r.start || v >= r.end) others.push_back(v);
      }
      rows = others;
      out.features_skipped_machine = skip_features_of;
    }
    out.features = buffers_->take(rows.size() * static_cast<size_t>(out.feature_dim));
    out.features_pool = buffers_;
    if (Status st = feature_->pull_unique_into(rows, out.features.data()); !st.is_ok()) {
      return st.with_context("features of batch " + std::to_string(out.batch_id));
    }
  }
  if (label_) {
    auto l = label_->pull_as<int64_t>(out.mini_batch.seeds);
    if (!l.is_ok()) return l.status().with_context("labels of batch " + std::to_string(out.batch_id));
    out.labels = std::move(*l);
  }
  out.timings.fetch_s = seconds_since(t1);
  return Status::ok();
}

Status BatchBuilder::fetch_into(const Batch& batch, float* rows, int64_t* labels) const {
  if (feature_) {
    if (Status st = feature_->pull_unique_into(batch.mini_batch.input_nodes, rows); !st.is_ok()) {
      return st.with_context("features of batch " + std::to_string(batch.batch_id));
    }
  }
  if (label_) {
    if (Status st = label_->pull_into(batch.mini_batch.seeds, labels); !st.is_ok()) {
      return st.with_context("labels of batch " + std::to_string(batch.batch_id));
    }
  }
  return Status::ok();
}

Result<Batch> BatchBuilder::build(int64_t batch_id, std::span<const int64_t> seeds,
                                  uint64_t rng_seed, int skip_features_of) const {
  if (skip_features_of >= cluster_->num_machines()) {
    return invalid_argument("batch " + std::to_string(batch_id) + ": skip_features_of machine " +
                            std::to_string(skip_features_of) + " does not exist");
  }
  DGLD_ASSIGN_OR_RETURN(Batch out, sample(batch_id, seeds, rng_seed));
  DGLD_RETURN_IF_ERROR(fetch(out, skip_features_of));
  return out;
}

std::pair<uint64_t, uint64_t> BatchBuilder::feature_cache_hits_misses() const {
  if (!feature_ || !feature_->row_cache()) return {0, 0};
  return {feature_->row_cache()->hits(), feature_->row_cache()->misses()};
}

// ---------------------------------------------------------------- wire

uint64_t batch_rng_seed(uint64_t seed, int epoch, int64_t batch_id) {
  return derive_seed(derive_seed(seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(batch_id));
}

net::OutMessage encode_sample_batch(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                                    const BatchSpec& spec, int skip_features_of, const std::string& reply_slot) {
  flatbuffers::FlatBufferBuilder fbb;
  auto fanouts = fbb.CreateVector(spec.fanouts);
  auto feature = fbb.CreateString(spec.feature);
  auto label = fbb.CreateString(spec.label);
  auto slot = reply_slot.empty() ? flatbuffers::Offset<flatbuffers::String>() : fbb.CreateString(reply_slot);
  fbb.Finish(fbs::CreateSampleBatch(fbb, batch_id, fanouts, spec.replace, rng_seed, feature, label,
                                    skip_features_of, slot));
  net::OutMessage m(fbs::MessageKind::SampleBatch, fbb);
  m.blobs.push_back(net::OutBlob::copy_of(seeds.data(), seeds.size_bytes()));
  return m;
}

namespace {

net::OutMessage sample_batch_reply_header(const Batch& batch, bool in_slot, int64_t slot_bytes_needed) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fbs::SampledBlock>> offs;
  for (const Block& b : batch.mini_batch.blocks) {
    offs.push_back(fbs::CreateSampledBlock(fbb, b.num_dst(), b.num_src(), b.num_edges()));
  }
  auto vec = fbb.CreateVector(offs);
  fbb.Finish(fbs::CreateSampleBatchReply(
      fbb, batch.batch_id, vec, batch.feature_dim,
      static_cast<int64_t>(batch.timings.sample_s * 1e9), static_cast<int64_t>(batch.timings.fetch_s * 1e9),
      batch.features_skipped_machine, in_slot, slot_bytes_needed));
  return net::OutMessage(fbs::MessageKind::SampleBatchReply, fbb);
}

// A slot always has room for one label per seed (zeros when there are none).
BatchShape shape_of(const Batch& batch, bool has_labels) {
  BatchShape shape;
  for (const Block& b : batch.mini_batch.blocks) shape.blocks.push_back({b.num_dst(), b.num_src(), b.num_edges()});
  shape.feature_dim = batch.feature_dim;
  shape.has_labels = has_labels;
  return shape;
}

}  // namespace

net::OutMessage encode_slot_batch_reply(const Batch& batch) {
  return sample_batch_reply_header(batch, /*in_slot=*/true, 0);
}

Result<BatchLayout> write_blocks_to_slot(const Batch& batch, std::byte* slot, size_t slot_bytes) {
  DGLD_ASSIGN_OR_RETURN(BatchLayout l, batch_slot_layout(shape_of(batch, /*has_labels=*/true)));
  if (l.total > slot_bytes) return l;
  auto put = [&](size_t off, const std::vector<int64_t>& v) {
    if (!v.empty()) std::memcpy(slot + off, v.data(), v.size() * sizeof(int64_t));
  };
  for (size_t i = 0; i < batch.mini_batch.blocks.size(); ++i) {
    const Block& b = batch.mini_batch.blocks[i];
    put(l.blocks[i].dst_nodes, b.dst_nodes);
    put(l.blocks[i].src_nodes, b.src_nodes);
    put(l.blocks[i].indptr, b.indptr);
    put(l.blocks[i].indices, b.indices);
    put(l.blocks[i].eids, b.eids);
  }
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
  return m;
}

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
  if (num_blocks == 0 || m.blobs.size() != (in_slot ? 0 : 5 * num_blocks + 2) || r->feature_dim() < 0) {
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
  BatchShape shape;
  shape.feature_dim = out.feature_dim;
  shape.has_labels = true;
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
    out.labels.resize(mb.seeds.size());
    if (!mb.seeds.empty()) {
      std::memcpy(out.labels.data(), slot->data() + layout.labels, mb.seeds.size() * sizeof(int64_t));
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

// ---------------------------------------------------------------- DistDataLoader

struct DistDataLoader::Impl {
  Cluster* cluster = nullptr;
  DataLoaderOptions o;
  std::vector<int64_t> train_ids;
  std::unique_ptr<BatchBuilder> builder;  // the trainer's own
  // Feature buffers of every batch, recycled by the consumer (prefetch
  // batches plus the ones being made and consumed).
  std::shared_ptr<BufferPool> buffers;
  std::unique_ptr<net::IoThreads> io;
  struct Remote {
    std::string endpoint;
    std::shared_ptr<net::RpcClient> client;
    bool alive = true;
    std::shared_ptr<BatchSlots> slots;  // null: batches come in the replies
    std::shared_ptr<std::atomic<bool>> slots_refused = std::make_shared<std::atomic<bool>>(false);
  };
  std::vector<Remote> remotes;

  struct Task {
    int64_t batch_id = -1;
    int epoch = -1;
    uint64_t generation = 0;  // which start_epoch() it belongs to
    std::shared_ptr<const std::vector<int64_t>> order;
  };

  mutable std::mutex mu;
  std::condition_variable cv;
  int epoch = -1;
  uint64_t generation = 0;                            // bumped by every start_epoch()
  std::shared_ptr<const std::vector<int64_t>> order;  // this epoch's seeds, permuted
  std::set<int64_t> todo;                             // batch ids not handed out
  int in_flight = 0;
  std::map<int64_t, Batch> ready;
  int64_t next_id = 0;  // deterministic: the next batch id to yield
  int64_t delivered = 0;
  std::optional<Status> fatal;
  bool stop = false;
  int live = 0;
  DataLoaderStats stats;
  std::vector<std::thread> threads;

  int64_t num_batches() const {
    const int64_t n = static_cast<int64_t>(train_ids.size()), bs = o.batch_size;
    return o.drop_last ? n / bs : (n + bs - 1) / bs;
  }

  std::span<const int64_t> seeds_of(const Task& t) const {
    const int64_t n = static_cast<int64_t>(t.order->size());
    const int64_t b = t.batch_id * o.batch_size;
    return std::span<const int64_t>(*t.order).subspan(static_cast<size_t>(b),
                                                       static_cast<size_t>(std::min(o.batch_size, n - b)));
  }

  // Waits for a batch this thread may make; false when it should exit.
  // `remote` < 0: a trainer thread (works only while no worker is alive).
  bool take(int remote, Task& t) {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      if (stop) return false;
      if (remote >= 0 && !remotes[remote].alive) return false;
      const bool eligible = remote >= 0 || live == 0;
      if (eligible && !todo.empty()) {
        const int64_t first = *todo.begin();
        const bool credit = in_flight + static_cast<int>(ready.size()) < o.prefetch;
        // The batch the consumer waits for is always handed out, so a
        // re-issued early batch cannot be starved by later ready ones.
        if (credit || (o.deterministic && first == next_id)) {
          todo.erase(todo.begin());
          ++in_flight;
          t = Task{first, epoch, generation, order};
          return true;
        }
      }
      cv.wait_for(lk, std::chrono::seconds(1));
    }
  }

  void complete(const Task& t, Batch&& b, int remote) {
    std::lock_guard<std::mutex> lk(mu);
    --in_flight;
    if (t.generation == generation) {
      b.worker = remote;
      ++(remote >= 0 ? stats.batches_by_workers : stats.batches_by_trainer);
      ready.emplace(t.batch_id, std::move(b));
    }
    cv.notify_all();
  }

  void requeue(const Task& t) {
    std::lock_guard<std::mutex> lk(mu);
    --in_flight;
    if (t.generation == generation) {
      todo.insert(t.batch_id);
      ++stats.reissued;
    }
    cv.notify_all();
  }

  void remote_loop(int r) {
    Remote& rem = remotes[r];
    Task t;
    while (take(r, t)) {
      auto seeds = seeds_of(t);
      const int skip = o.local_features_from_shm && !o.spec.feature.empty() ? cluster->machine_id() : -1;
      std::optional<BatchSlots::Lease> slot =
          rem.slots && !rem.slots_refused->load() ? rem.slots->acquire() : std::nullopt;
      auto reply = rem.client->call(encode_sample_batch(t.batch_id, seeds, batch_rng_seed(o.seed, t.epoch, t.batch_id),
                                                        o.spec, skip, slot ? slot->name() : ""),
                                    o.batch_timeout);
      const int64_t needed = reply.is_ok() ? slot_bytes_needed(*reply) : 0;
      Result<Batch> b = reply.is_ok()
                            ? decode_sample_batch_reply(std::move(*reply), rem.endpoint, buffers, slot ? &*slot : nullptr)
                            : Result<Batch>(reply.status());
      const bool in_slot = b.is_ok() && b->slot_features != nullptr;
      if (b.is_ok() && slot && !in_slot) {
        if (needed > 0) {
          slot->grow_to(static_cast<size_t>(needed));  // the next batch in this slot fits
        } else if (!rem.slots_refused->exchange(true)) {
          logger("sampler")->warn("sampler-worker {} cannot write into this trainer's shared memory (another "
                                  "machine?); its batches come through the socket",
                                  rem.endpoint);
        }
      }
      if (b.is_ok() && b->features_skipped_machine != (in_slot ? -1 : skip)) {
        b = protocol_error("sampler-worker " + rem.endpoint + " did not follow skip_features_of");
      }
      if (b.is_ok() && !in_slot) {
        const auto t0 = Clock::now();
        if (Status st = fill_skipped_features(*cluster, o.spec.feature, *b, rem.endpoint); !st.is_ok()) b = st;
        else b->timings.fetch_s += seconds_since(t0);  // the trainer's share of the fetch
      }
      if (b.is_ok() && in_slot && o.spec.label.empty()) b->labels.clear();
      if (b.is_ok() && (b->batch_id != t.batch_id || b->mini_batch.seeds.size() != seeds.size())) {
        b = protocol_error("sampler-worker " + rem.endpoint + " answered batch " +
                           std::to_string(b->batch_id) + " for batch " + std::to_string(t.batch_id));
      }
      if (b.is_ok()) {
        complete(t, std::move(*b), r);
        continue;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        if (rem.alive) {
          rem.alive = false;
          --live;
          stats.live_workers = live;
          if (!stop) logger("sampler")->warn("sampler-worker {} is treated as dead ({}); its batches are re-issued, {} left",
                                  rem.endpoint, b.status().to_string(), live);
        }
      }
      rem.client->close();  // fails this worker's other calls at once
      requeue(t);
      return;
    }
  }

  void local_loop() {
    // Raising a thread's own nice value needs no privilege; should it fail,
    // the thread runs at normal priority, which is only slower.
    if (o.local_thread_nice > 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), o.local_thread_nice);
    Task t;
    while (take(-1, t)) {
      auto b = builder->build(t.batch_id, seeds_of(t), batch_rng_seed(o.seed, t.epoch, t.batch_id));
      if (b.is_ok()) {
        complete(t, std::move(*b), -1);
        continue;
      }
      // The trainer was the last resort: the epoch cannot complete.
      std::lock_guard<std::mutex> lk(mu);
      --in_flight;
      if (t.generation == generation && !fatal) fatal = b.status();
      cv.notify_all();
    }
  }
};

DistDataLoader::DistDataLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DistDataLoader::~DistDataLoader() { shutdown(); }

void DistDataLoader::shutdown() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
    impl_->cv.notify_all();
  }
  for (auto& r : impl_->remotes) r.client->close();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->remotes.clear();
  if (impl_->io) impl_->io->stop();
}

Result<std::unique_ptr<DistDataLoader>> DistDataLoader::create(Cluster& cluster,
                                                               std::vector<int64_t> train_ids,
                                                               DataLoaderOptions options) {
  if (options.batch_size < 1) return invalid_argument("DistDataLoader: batch_size must be >= 1");
  if (options.prefetch < 1) return invalid_argument("DistDataLoader: prefetch must be >= 1");
  if (options.local_threads < 1) return invalid_argument("DistDataLoader: local_threads must be >= 1");
  if (cluster.config().types.present() && !options.samplers.empty()) {
    return invalid_argument("DistDataLoader: sampler-workers do not make heterogeneous batches yet (graph '" +
                            cluster.config().graph_name + "'); run without sampler-workers (--num-samplers 0)");
  }
  auto impl = std::make_unique<Impl>();
  impl->cluster = &cluster;
  impl->o = std::move(options);
  impl->buffers = std::make_shared<BufferPool>(static_cast<size_t>(impl->o.prefetch) + 4);
  impl->train_ids = std::move(train_ids);
  DGLD_ASSIGN_OR_RETURN(impl->builder, BatchBuilder::create(cluster, impl->o.spec, impl->o.pool, impl->buffers));
  if (!impl->o.samplers.empty()) {
    impl->io = std::make_unique<net::IoThreads>(1);
    net::ConnectOptions co;
    co.timeout = impl->o.connect_timeout;
    co.secret = cluster.secret();
    for (const std::string& ep : impl->o.samplers) {
      DGLD_ASSIGN_OR_RETURN(auto hp, split_endpoint(ep));
      auto c = net::RpcClient::connect(impl->io->context(), hp.first, hp.second, "sampler-worker " + ep, co);
      if (!c.is_ok()) return c.status();
      impl->remotes.push_back(Impl::Remote{ep, std::move(*c), true});
    }
  }
  impl->live = static_cast<int>(impl->remotes.size());
  impl->stats.live_workers = impl->live;
  Impl* p = impl.get();
  std::unique_ptr<DistDataLoader> loader(new DistDataLoader(std::move(impl)));
  const int per_worker = std::max(1, p->o.prefetch);
  if (p->o.shared_memory_batches) {
    // Slots for the batches in flight, ready and being trained on; the first
    // batch of each slot comes through the socket and sizes it.
    static std::atomic<int> loaders{0};
    const int loader = loaders++;
    for (int r = 0; r < static_cast<int>(p->remotes.size()); ++r) {
      auto slots = BatchSlots::create(p->cluster->job_id(), p->cluster->machine_id(),
                                      std::to_string(::getpid()) + "." + std::to_string(loader) + "." + std::to_string(r),
                                      p->o.prefetch + 2, size_t{4} << 20);
      if (!slots.is_ok()) {
        logger("sampler")->warn("no shared-memory batch slots for sampler-worker {} ({}); its batches come through "
                                "the socket",
                                p->remotes[r].endpoint, slots.status().to_string());
        continue;
      }
      p->remotes[r].slots = std::move(*slots);
    }
  }
  for (int r = 0; r < static_cast<int>(p->remotes.size()); ++r) {
    for (int k = 0; k < per_worker; ++k) p->threads.emplace_back([p, r] { p->remote_loop(r); });
  }
  for (int k = 0; k < p->o.local_threads; ++k) p->threads.emplace_back([p] { p->local_loop(); });
  return loader;
}

int64_t DistDataLoader::num_batches_per_epoch() const { return impl_->num_batches(); }

std::pair<uint64_t, uint64_t> DistDataLoader::feature_cache_hits_misses() const {
  return impl_->builder->feature_cache_hits_misses();
}

void DistDataLoader::start_epoch(int epoch) {
  Impl& s = *impl_;
  auto order = std::make_shared<std::vector<int64_t>>(s.train_ids);
  if (s.o.shuffle && order->size() > 1) {
    StreamRng rng(s.o.seed, 0x5eed0000ull + static_cast<uint64_t>(epoch));
    for (size_t i = order->size() - 1; i > 0; --i) std::swap((*order)[i], (*order)[rng.below(i + 1)]);
  }
  std::lock_guard<std::mutex> lk(s.mu);
  s.epoch = epoch;
  ++s.generation;
  s.order = std::move(order);
  s.ready.clear();
  s.todo.clear();
  for (int64_t b = 0; b < s.num_batches(); ++b) s.todo.insert(b);
  s.next_id = 0;
  s.delivered = 0;
  s.fatal.reset();
  s.cv.notify_all();
}

Result<std::optional<Batch>> DistDataLoader::next() { return next(impl_->o.next_timeout); }

bool DistDataLoader::wait_ready(std::chrono::milliseconds max_wait) {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lk(s.mu);
  return s.cv.wait_for(lk, max_wait, [&] {
    if (s.stop || s.epoch < 0 || s.fatal || s.delivered >= s.num_batches()) return true;
    return s.o.deterministic ? s.ready.count(s.next_id) > 0 : !s.ready.empty();
  });
}

Result<std::optional<Batch>> DistDataLoader::next(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.stop) return closed_error("DistDataLoader: shut down");
  if (s.epoch < 0) return invalid_argument("DistDataLoader::next before start_epoch");
  if (s.delivered >= s.num_batches()) return std::optional<Batch>();
  for (;;) {
    if (s.fatal) return *s.fatal;
    auto it = s.o.deterministic ? s.ready.find(s.next_id) : s.ready.begin();
    if (it != s.ready.end()) {
      Batch b = std::move(it->second);
      s.ready.erase(it);
      ++s.delivered;
      if (s.o.deterministic) ++s.next_id;
      s.cv.notify_all();
      b.timings.wait_s = seconds_since(t0);
      return std::optional<Batch>(std::move(b));
    }
    if (s.cv.wait_until(lk, deadline) == std::cv_status::timeout && Clock::now() >= deadline) {
      return timeout_error("DistDataLoader: no batch of epoch " + std::to_string(s.epoch) + " within " +
                           std::to_string(timeout.count()) + " ms (next batch " +
                           std::to_string(s.next_id) + ", " + std::to_string(s.live) +
                           " live sampler-workers, " + std::to_string(s.in_flight) + " in flight)");
    }
  }
}

DataLoaderStats DistDataLoader::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->stats;
}

}  // namespace dgld::client
