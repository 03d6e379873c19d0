// File: easyscale/worker/est_context.h
//
// The state of one EasyScaleThread (EST): everything that makes logical worker
// `id` of an N-worker data-parallel job compute what it would compute on a GPU
// of its own. It moves between physical workers at step boundaries, by hand-over
// through a checkpoint. The micro-batch gradient is part of the EST only within
// a step; at a step boundary it has been folded into the aggregate.
//
// Serialised (little-endian): u32 id | u64 aug_counter | u64 dropout_counter |
// u64 epoch | u64 position | u32 buffer count | tensors (shape, values).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "easyscale/worker/philox.h"
#include "easyscale/worker/serialize.h"
#include "easyscale/worker/tensor.h"

namespace easyscale {

struct EstContext {
  int id = 0;
  // RNG streams: Philox counters; keys derive from (job seed, id, stream).
  uint64_t aug_counter = 0;
  uint64_t dropout_counter = 0;
  // Sampler cursor in this EST's shard of the epoch's global permutation.
  uint64_t epoch = 0;
  uint64_t position = 0;
  // Per-EST model buffers (BatchNorm running statistics), in model order.
  std::vector<Tensor> buffers;

  void Save(ByteWriter& w) const;
  // `buffers` must already hold tensors of the model's shapes.
  Status Load(ByteReader& r);
};

// Fresh context of EST `id`.
EstContext InitialEstContext(int id, std::vector<Tensor> initial_buffers);

// Stream keys of one EST.
PhiloxKey AugmentationKey(uint64_t seed, int est);
PhiloxKey DropoutKey(uint64_t seed, int est);

}  // namespace easyscale
