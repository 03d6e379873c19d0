#include "easyscale/worker/snapshot.h"

#include "easyscale/common/checks.h"
#include "easyscale/worker/checkpoint.h"
#include "easyscale/worker/serialize.h"

namespace easyscale {

std::string EncodeSnapshot(const TrainingSnapshot& s) {
  ByteWriter w;
  w.I64(s.step);
  w.Str(s.job);
  w.U32(static_cast<uint32_t>(s.ests.size()));
  for (const auto& [id, context] : s.ests) {
    w.U32(static_cast<uint32_t>(id));
    w.Str(context);
  }
  return EncodeEnvelope(CheckpointKind::kSnapshot, w.bytes());
}

StatusOr<TrainingSnapshot> DecodeSnapshot(const std::string& bytes, const std::string& what) {
  ES_ASSIGN_OR_RETURN(std::string payload, DecodeEnvelope(bytes, CheckpointKind::kSnapshot, what));
  ByteReader r(payload, what);
  TrainingSnapshot s;
  uint32_t count = 0;
  ES_RETURN_IF_ERROR(r.I64(&s.step, "step"));
  ES_RETURN_IF_ERROR(r.Str(&s.job, "job"));
  ES_RETURN_IF_ERROR(r.U32(&count, "EST count"));
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    std::string context;
    ES_RETURN_IF_ERROR(r.U32(&id, "EST id"));
    ES_RETURN_IF_ERROR(r.Str(&context, "EST context"));
    if (!s.ests.emplace(static_cast<int>(id), std::move(context)).second) {
      return absl::DataLossError(absl::StrCat(what, ": EST ", id, " appears twice"));
    }
  }
  if (s.step < 0) return absl::DataLossError(absl::StrCat(what, ": negative step ", s.step));
  if (!r.AtEnd()) return absl::DataLossError(what + ": trailing bytes after the EST contexts");
  return s;
}

}  // namespace easyscale
