#pragma once
// The sampler protocol (schemas/sampler.fbs): a trainer's SampleBatch
// request to a sampler-worker and the worker's reply, the finished batch,
// sent in blobs or written into a shared-memory slot of the trainer
// (batch_slots.h). Both ends encode and decode here and nowhere else.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/batch_builder.h"
#include "client/batch_slots.h"
#include "common/net/message.h"
#include "common/status.h"

namespace dgld {
class BufferPool;
}

namespace dgld::client {

class Cluster;

// A SampleBatch as the worker reads it.
struct SampleBatchRequest {
  int64_t batch_id = -1;
  std::vector<int64_t> seeds;
  uint64_t rng_seed = 0;
  BatchSpec spec;                  // sampling, feature and label (no cache size: the worker's own)
  int skip_features_of = -1;
  std::string reply_slot;
  bool prepare = false;  // set-up only (encode_prepare): no seeds, an empty reply
};
// invalid_argument naming `peer` for a spec that does not validate or seeds
// that are not whole int64s.
Result<SampleBatchRequest> decode_sample_batch(const net::Message& request, const std::string& peer);

// The SampleBatch / SampleBatchReply messages (schemas/sampler.fbs).
// `reply_slot`: the requester's shared-memory slot to write the batch into
// (batch_slots.h); empty: none.
net::OutMessage encode_sample_batch(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                                    const BatchSpec& spec, int skip_features_of = -1,
                                    const std::string& reply_slot = "");
// A prepare request (SampleBatch.prepare) for `spec`, and its reply.
net::OutMessage encode_prepare(const BatchSpec& spec);
net::OutMessage encode_prepare_reply();
// Moves the batch's arrays into the reply's blobs. `slot_bytes_needed` > 0:
// the request's slot was too small by that much (the batch is sent anyway).
net::OutMessage encode_sample_batch_reply(Batch&& batch, int64_t slot_bytes_needed = 0);
// The reply to a request whose batch was written into its slot: sizes only.
net::OutMessage encode_slot_batch_reply(const Batch& batch);
// Writes the blocks (with their edge types), and leaves room for the rows
// and labels, of `batch` in `slot` (of `slot_bytes`) at the offsets of
// batch_slot_layout(); a heterogeneous batch's typed rows (`typed`: the
// batch's TypedRows with their positions, rows not yet pulled) get their
// positions written and room for their rows. Returns the layout, or the
// bytes needed (layout.total > slot_bytes, nothing written).
Result<BatchLayout> write_blocks_to_slot(const Batch& batch, std::byte* slot, size_t slot_bytes,
                                         const std::vector<TypedRows>& typed = {});
// Checks every size against the reply table; protocol_error naming `peer`.
// Feature rows go into a buffer from `buffers` when given. A reply whose
// batch is in a slot needs the lease of that slot (`slot`): the blocks and
// labels are copied out, the feature rows stay (Batch::slot_features), a
// heterogeneous batch's typed rows are copied out.
Result<Batch> decode_sample_batch_reply(net::Message&& reply, const std::string& peer,
                                        const std::shared_ptr<BufferPool>& buffers = nullptr,
                                        BatchSlots::Lease* slot = nullptr);
// slot_bytes_needed of a reply (0 when absent or not a SampleBatchReply).
int64_t slot_bytes_needed(const net::Message& reply);
// Completes a batch whose features_skipped_machine is the caller's machine:
// the missing rows are copied from the machine's shared memory.
Status fill_skipped_features(Cluster& cluster, const std::string& feature, Batch& batch,
                             const std::string& peer);

}  // namespace dgld::client
