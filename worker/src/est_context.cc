#include "easyscale/worker/est_context.h"

#include "easyscale/common/checks.h"

namespace easyscale {

void EstContext::Save(ByteWriter& w) const {
  w.U32(static_cast<uint32_t>(id));
  w.U64(aug_counter);
  w.U64(dropout_counter);
  w.U64(epoch);
  w.U64(position);
  w.U32(static_cast<uint32_t>(buffers.size()));
  for (const Tensor& t : buffers) w.TensorValue(t);
}

Status EstContext::Load(ByteReader& r) {
  uint32_t file_id, nbuf;
  ES_RETURN_IF_ERROR(r.U32(&file_id, "est.id"));
  if (static_cast<int>(file_id) != id) {
    return absl::DataLossError(absl::StrCat("EST context holds EST ", file_id, ", want ", id));
  }
  ES_RETURN_IF_ERROR(r.U64(&aug_counter, "est.aug_counter"));
  ES_RETURN_IF_ERROR(r.U64(&dropout_counter, "est.dropout_counter"));
  ES_RETURN_IF_ERROR(r.U64(&epoch, "est.epoch"));
  ES_RETURN_IF_ERROR(r.U64(&position, "est.position"));
  ES_RETURN_IF_ERROR(r.U32(&nbuf, "est.buffer_count"));
  if (nbuf != buffers.size()) {
    return absl::DataLossError(
        absl::StrCat("EST context has ", nbuf, " buffers, the model ", buffers.size()));
  }
  for (Tensor& t : buffers) ES_RETURN_IF_ERROR(r.TensorInto(&t, "est.buffer"));
  return absl::OkStatus();
}

EstContext InitialEstContext(int id, std::vector<Tensor> initial_buffers) {
  EstContext c;
  c.id = id;
  c.buffers = std::move(initial_buffers);
  return c;
}

PhiloxKey AugmentationKey(uint64_t seed, int est) {
  return DeriveKey(seed, 0xA0000000ull + static_cast<uint64_t>(est));
}
PhiloxKey DropoutKey(uint64_t seed, int est) {
  return DeriveKey(seed, 0xD0000000ull + static_cast<uint64_t>(est));
}

}  // namespace easyscale
