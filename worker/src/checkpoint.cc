#include "easyscale/worker/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_join.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/est_assignment.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/json_fields.h"
#include "easyscale/common/sha256.h"
#include "easyscale/worker/serialize.h"

namespace easyscale {
namespace {

constexpr char kMagic[8] = {'E', 'S', 'C', 'K', 'P', 'T', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 8 + 4 + 4 + 8;
// ReadFile's bounds: LATEST names a folder; any other file of a checkpoint
// (the job state, an EST, the manifest) stays below 1 GiB for the project's models.
constexpr size_t kMaxLatestBytes = 4096;
constexpr size_t kMaxCheckpointFileBytes = size_t{1} << 30;

std::string FolderName(int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "ckpt-%09lld", static_cast<long long>(step));
  return buf;
}

std::string EstFileName(int est) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "est-%05d.esck", est);
  return buf;
}

}  // namespace

std::string EncodeEnvelope(CheckpointKind kind, const std::string& payload) {
  ByteWriter w;
  w.U32(kVersion);
  w.U32(static_cast<uint32_t>(kind));
  w.U64(payload.size());
  std::string out(kMagic, sizeof kMagic);
  out += w.bytes();
  out += payload;
  Sha256 h;
  h.Update(out);
  const auto d = h.Digest();
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return out;
}

StatusOr<std::string> DecodeEnvelope(const std::string& bytes, CheckpointKind kind,
                                     const std::string& what) {
  if (bytes.size() < kHeader + 32) {
    return absl::DataLossError(absl::StrCat(what, ": truncated (", bytes.size(), " bytes)"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return absl::DataLossError(what + ": not an EasyScale checkpoint (bad magic)");
  }
  ByteReader r(std::string_view(bytes).substr(8, kHeader - 8), what);
  uint32_t version, file_kind;
  uint64_t size;
  ES_RETURN_IF_ERROR(r.U32(&version, "version"));
  ES_RETURN_IF_ERROR(r.U32(&file_kind, "kind"));
  ES_RETURN_IF_ERROR(r.U64(&size, "payload size"));
  if (version != kVersion) {
    return absl::DataLossError(
        absl::StrCat(what, ": format version ", version, ", this build reads ", kVersion));
  }
  if (file_kind != static_cast<uint32_t>(kind)) {
    return absl::DataLossError(
        absl::StrCat(what, ": holds kind ", file_kind, ", want ", static_cast<uint32_t>(kind)));
  }
  if (bytes.size() != kHeader + size + 32) {
    return absl::DataLossError(absl::StrCat(what, ": truncated or padded (", bytes.size(),
                                            " bytes, header says ", kHeader + size + 32, ")"));
  }
  const std::string want = Sha256Hex(bytes.data(), kHeader + size);
  const std::string have =
      ToHex(reinterpret_cast<const uint8_t*>(bytes.data()) + kHeader + size, 32);
  if (want != have) return absl::DataLossError(what + ": checksum mismatch (corrupt or tampered)");
  return bytes.substr(kHeader, size);
}

namespace {

// What a step folder's MANIFEST.json says.
struct Manifest {
  int total_ests = 0;
  nlohmann::json files;  // file name -> SHA-256 (hex)
};

StatusOr<Manifest> ReadManifest(const std::string& dir) {
  const std::string path = dir + "/MANIFEST.json";
  auto text = ReadFile(path, kMaxCheckpointFileBytes);
  if (absl::IsNotFound(text.status())) {
    return absl::DataLossError(path + ": missing (a save interrupted before its commit)");
  }
  if (!text.ok()) return absl::DataLossError(std::string(text.status().message()));
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  Manifest m;
  FieldReader r(j, "");
  r.Int("totalEsts", &m.total_ests, true, 1, kMaxTotalEsts);
  if (const nlohmann::json* files = r.Object("files", true)) m.files = *files;
  if (!r.ok()) {
    return absl::DataLossError(path + ": malformed: " + std::string(r.status().message()));
  }
  return m;
}

// The payload of `dir`/`name`, once its bytes match the manifest and its envelope is sound.
StatusOr<std::string> ReadVerified(const std::string& dir, const Manifest& manifest,
                                   const std::string& name, CheckpointKind kind) {
  const auto it = manifest.files.find(name);
  if (it == manifest.files.end() || !it->is_string()) {
    return absl::DataLossError(dir + "/MANIFEST.json: files." + name + " missing");
  }
  const std::string path = dir + "/" + name;
  auto bytes = ReadFile(path, kMaxCheckpointFileBytes);
  if (!bytes.ok())
    return absl::DataLossError("checkpoint file " + path + ": " +
                               std::string(bytes.status().message()));
  if (Sha256Hex(bytes->data(), bytes->size()) != it->get<std::string>()) {
    return absl::DataLossError(path + ": does not match its manifest (corrupt or tampered)");
  }
  return DecodeEnvelope(*bytes, kind, path);
}

}  // namespace

std::string CheckpointStore::StepDir(int64_t step) const { return dir_ + "/" + FolderName(step); }

Status CheckpointStore::WriteJob(int64_t step, const std::string& payload) const {
  ES_RETURN_IF_ERROR(MakeDirs(StepDir(step)));
  return WriteFileAtomic(StepDir(step) + "/job.esck",
                         EncodeEnvelope(CheckpointKind::kJob, payload));
}

Status CheckpointStore::WriteEst(int64_t step, int est, const std::string& payload) const {
  ES_RETURN_IF_ERROR(MakeDirs(StepDir(step)));
  return WriteFileAtomic(StepDir(step) + "/" + EstFileName(est),
                         EncodeEnvelope(CheckpointKind::kEst, payload));
}

Status CheckpointStore::Commit(int64_t step, int total_ests) const {
  nlohmann::json files = nlohmann::json::object();
  std::vector<std::string> names = {"job.esck"};
  for (int e = 0; e < total_ests; ++e) names.push_back(EstFileName(e));
  for (const auto& name : names) {
    ES_ASSIGN_OR_RETURN(std::string bytes,
                        ReadFile(StepDir(step) + "/" + name, kMaxCheckpointFileBytes));
    files[name] = Sha256Hex(bytes.data(), bytes.size());
  }
  const nlohmann::json manifest = {
      {"version", kVersion}, {"step", step}, {"totalEsts", total_ests}, {"files", files}};
  ES_RETURN_IF_ERROR(WriteFileAtomic(StepDir(step) + "/MANIFEST.json", manifest.dump(1)));
  ES_RETURN_IF_ERROR(WriteFileAtomic(dir_ + "/LATEST", FolderName(step)));
  // Retention (checkpoint.h): the new checkpoint and the newest committed one before it.
  const std::vector<int64_t> steps = Steps();
  std::optional<int64_t> previous;
  for (int64_t s : steps) {
    if (s < step && Committed(s)) {
      previous = s;
      break;
    }
  }
  for (int64_t s : steps) {
    if (s < step && (!previous || s < *previous)) {
      std::error_code ignored;  // what cannot be removed now is removed by a later commit
      std::filesystem::remove_all(StepDir(s), ignored);
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> CheckpointStore::Steps() const {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = -1;
    const char* end = name.data() + name.size();
    if (name.rfind("ckpt-", 0) != 0 || !entry.is_directory(ec)) continue;
    const auto r = std::from_chars(name.data() + 5, end, step);
    if (r.ec == std::errc() && r.ptr == end && step >= 0 && name == FolderName(step)) {
      steps.push_back(step);
    }
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

bool CheckpointStore::Committed(int64_t step) const {
  std::error_code ec;
  return std::filesystem::exists(StepDir(step) + "/MANIFEST.json", ec);
}

StatusOr<RestorePoint> CheckpointStore::NewestRestorable() const {
  RestorePoint point;
  bool committed = false;
  for (int64_t step : Steps()) {
    const Status intact = Verify(step);
    if (intact.ok()) {
      point.step = step;
      break;
    }
    committed = committed || Committed(step);
    point.skipped.emplace_back(intact.message());
  }
  const auto latest = ReadFile(dir_ + "/LATEST", kMaxLatestBytes);
  if (latest.ok()) {
    committed = true;
    if (!point.step || *latest != FolderName(*point.step)) {
      point.latest = "LATEST names \"" + latest->substr(0, 40) + "\"";
    }
  } else if (!absl::IsNotFound(latest.status())) {
    committed = true;
    point.latest = std::string(latest.status().message());
  } else if (point.step) {
    point.latest = "LATEST is missing";
  }
  if (!point.step && committed) {
    return absl::DataLossError(absl::StrCat(
        "no intact checkpoint in ", dir_, " although checkpoints were committed",
        point.latest.empty() ? "" : " (" + point.latest + ")", ": ",
        point.skipped.empty() ? "no step folder" : absl::StrJoin(point.skipped, "; ")));
  }
  return point;
}

Status CheckpointStore::Verify(int64_t step) const {
  ES_ASSIGN_OR_RETURN(const Manifest m, ReadManifest(StepDir(step)));
  ES_RETURN_IF_ERROR(ReadVerified(StepDir(step), m, "job.esck", CheckpointKind::kJob).status());
  for (int e = 0; e < m.total_ests; ++e) {
    ES_RETURN_IF_ERROR(
        ReadVerified(StepDir(step), m, EstFileName(e), CheckpointKind::kEst).status());
  }
  return absl::OkStatus();
}

StatusOr<std::string> CheckpointStore::ReadJob(int64_t step) const {
  ES_ASSIGN_OR_RETURN(const Manifest m, ReadManifest(StepDir(step)));
  return ReadVerified(StepDir(step), m, "job.esck", CheckpointKind::kJob);
}

StatusOr<std::string> CheckpointStore::ReadEst(int64_t step, int est) const {
  ES_ASSIGN_OR_RETURN(const Manifest m, ReadManifest(StepDir(step)));
  return ReadVerified(StepDir(step), m, EstFileName(est), CheckpointKind::kEst);
}

Status CheckpointStore::Save(const TrainingSnapshot& s, int total_ests) const {
  if (static_cast<int>(s.ests.size()) != total_ests) {
    return absl::InternalError(absl::StrCat("snapshot of step ", s.step, " holds ", s.ests.size(),
                                            " ESTs, the job has ", total_ests));
  }
  for (const auto& [id, context] : s.ests) ES_RETURN_IF_ERROR(WriteEst(s.step, id, context));
  ES_RETURN_IF_ERROR(WriteJob(s.step, s.job));
  return Commit(s.step, total_ests);
}

StatusOr<TrainingSnapshot> CheckpointStore::Load(int64_t step, int total_ests) const {
  TrainingSnapshot s;
  s.step = step;
  ES_ASSIGN_OR_RETURN(s.job, ReadJob(step));
  for (int e = 0; e < total_ests; ++e) {
    ES_ASSIGN_OR_RETURN(std::string context, ReadEst(step, e));
    s.ests.emplace(e, std::move(context));
  }
  return s;
}

}  // namespace easyscale
