#include "easyscale/common/control_protocol.h"

#include <openssl/crypto.h>

#include <array>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/est_assignment.h"
#include "easyscale/common/json_fields.h"

namespace easyscale {
namespace {

constexpr std::array<WorkerState, 6> kStates = {WorkerState::kStarting,  WorkerState::kRestoring,
                                                WorkerState::kRunning,   WorkerState::kCheckpointed,
                                                WorkerState::kSucceeded, WorkerState::kFailed};

Status CheckApiVersion(FieldReader& r) {
  std::string version;
  r.String("apiVersion", &version, true);
  if (r.ok() && version != kControlApiVersion) {
    return absl::FailedPreconditionError("apiVersion: unsupported \"" + version + "\", want \"" +
                                         kControlApiVersion + "\"");
  }
  return r.status();
}

// A SHA-256 in lowercase hex, or nothing.
bool IsDigestOrEmpty(const std::string& s) {
  return s.empty() ||
         (s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos);
}

}  // namespace

const char* ToString(WorkerState s) {
  switch (s) {
    case WorkerState::kStarting:
      return "Starting";
    case WorkerState::kRestoring:
      return "Restoring";
    case WorkerState::kRunning:
      return "Running";
    case WorkerState::kCheckpointed:
      return "Checkpointed";
    case WorkerState::kSucceeded:
      return "Succeeded";
    case WorkerState::kFailed:
      return "Failed";
  }
  return "Unknown";
}

const char* ToString(RestoreFrom f) {
  switch (f) {
    case RestoreFrom::kFresh:
      return "Fresh";
    case RestoreFrom::kPeers:
      return "Peers";
    case RestoreFrom::kDurable:
      return "Durable";
  }
  return "Unknown";
}

std::string BearerToken(const std::string& token) { return "Bearer " + token; }

std::string TokenFromAuthorization(const std::string& header) {
  constexpr std::string_view kScheme = "Bearer ";
  if (header.size() <= kScheme.size() || header.compare(0, kScheme.size(), kScheme) != 0) return "";
  return header.substr(kScheme.size());
}

bool AuthorizedBy(const std::string& header, const std::string& token) {
  const std::string given = TokenFromAuthorization(header);
  return !token.empty() && given.size() == token.size() &&
         CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
}

const char* ToString(WorkerAction a) {
  switch (a) {
    case WorkerAction::kRun:
      return "Run";
    case WorkerAction::kWait:
      return "Wait";
    case WorkerAction::kCheckpointAndStop:
      return "CheckpointAndStop";
  }
  return "Unknown";
}

nlohmann::json ToJson(const RestorePlan& p) {
  nlohmann::json sources = nlohmann::json::array();
  for (const StateSource& s : p.sources) sources.push_back({{"pod", s.pod}, {"url", s.url}});
  return {{"from", ToString(p.from)}, {"step", p.step}, {"sources", sources}};
}

StatusOr<RestorePlan> ParseRestorePlan(const nlohmann::json& j) {
  RestorePlan plan;
  RestorePlan* p = &plan;
  FieldReader r(j, "restore");
  std::string from;
  r.Enum("from", &from, {"Fresh", "Peers", "Durable"}, true);
  for (RestoreFrom f : {RestoreFrom::kFresh, RestoreFrom::kPeers, RestoreFrom::kDurable}) {
    if (from == ToString(f)) p->from = f;
  }
  r.Int("step", &p->step, false, 0);
  const nlohmann::json* sources = j.contains("sources") ? &j["sources"] : nullptr;
  if (sources != nullptr && !sources->is_array()) r.Fail("sources", "must be a list");
  for (size_t i = 0; r.ok() && sources != nullptr && i < sources->size(); ++i) {
    FieldReader sr((*sources)[i], absl::StrCat("restore.sources[", i, "]"));
    StateSource s;
    sr.String("pod", &s.pod, true);
    sr.String("url", &s.url, true);
    if (sr.ok() && s.url.rfind("http://", 0) != 0) sr.Fail("url", "must start with http://");
    ES_RETURN_IF_ERROR(sr.status());
    p->sources.push_back(std::move(s));
  }
  if (r.ok() && p->from == RestoreFrom::kPeers && p->sources.empty()) {
    r.Fail("sources", "must name at least one worker when from is Peers");
  }
  ES_RETURN_IF_ERROR(r.status());
  return plan;
}

nlohmann::json ToJson(const WorkerAssignment& a) {
  return {{"apiVersion", kControlApiVersion},
          {"job", a.job},
          {"generation", a.generation},
          {"rank", a.rank},
          {"worldSize", a.worldSize},
          {"totalEsts", a.totalEsts},
          {"ests", a.ests},
          {"rendezvous", {{"url", a.rendezvous.url}, {"prefix", a.rendezvous.prefix}}},
          {"restore", ToJson(a.restore)},
          {"checkpointDir", a.checkpointDir},
          {"backend", a.backend},
          {"training", ToJson(a.training)},
          {"output", ToJson(a.output)},
          {"action", ToString(a.action)},
          {"stopAtStep", a.stopAtStep},
          {"certificateEvery", a.certificateEvery}};
}

nlohmann::json ToJson(const WorkerReport& r) {
  nlohmann::json j = {{"apiVersion", kControlApiVersion},
                      {"job", r.job},
                      {"pod", r.pod},
                      {"generation", r.generation},
                      {"rank", r.rank},
                      {"state", ToString(r.state)},
                      {"step", r.step},
                      {"samplesPerSecond", r.samplesPerSecond},
                      {"digest", r.digest},
                      {"testAccuracy", r.testAccuracy},
                      {"output", ToJson(r.output)},
                      {"message", r.message},
                      {"reason", r.reason},
                      {"stateStep", r.stateStep},
                      {"stateUrl", r.stateUrl}};
  if (r.certificate.step > 0) j["certificate"] = ToJson(r.certificate);
  return j;
}

nlohmann::json ToJson(const OutputDigests& d) {
  // A file not written has no field (a digest field, when present, is one).
  nlohmann::json j = {{"path", d.path}};
  if (!d.onnxSha256.empty()) j["onnxSha256"] = d.onnxSha256;
  if (!d.safetensorsSha256.empty()) j["safetensorsSha256"] = d.safetensorsSha256;
  return j;
}

StatusOr<OutputDigests> ParseOutputDigests(const nlohmann::json& j, const std::string& path) {
  OutputDigests d;
  FieldReader r(j, path);
  r.String("path", &d.path);
  r.String("onnxSha256", &d.onnxSha256);
  r.String("safetensorsSha256", &d.safetensorsSha256);
  if (r.ok() && !d.path.empty() && d.path[0] != '/') r.Fail("path", "must be an absolute path");
  for (const auto& [field, value] : {std::pair{"onnxSha256", &d.onnxSha256},
                                     std::pair{"safetensorsSha256", &d.safetensorsSha256}}) {
    if (r.ok() && !IsDigestOrEmpty(*value)) r.Fail(field, "not a SHA-256 in lowercase hex");
  }
  ES_RETURN_IF_ERROR(r.status());
  return d;
}

nlohmann::json ToJson(const Certificate& c) { return {{"step", c.step}, {"digest", c.digest}}; }

StatusOr<Certificate> ParseCertificate(const nlohmann::json& j, const std::string& path) {
  Certificate c;
  FieldReader r(j, path);
  r.Int("step", &c.step, true, 1);
  r.String("digest", &c.digest, true);
  if (r.ok() && (c.digest.empty() || !IsDigestOrEmpty(c.digest))) {
    r.Fail("digest", "not a SHA-256 in lowercase hex");
  }
  ES_RETURN_IF_ERROR(r.status());
  return c;
}

std::string CertificateLine(const Certificate& c) {
  return absl::StrCat("certificate step=", c.step, " digest=", c.digest);
}

StatusOr<Certificate> ParseCertificateLine(const std::string& line) {
  constexpr std::string_view kStep = "certificate step=", kDigest = " digest=";
  const size_t digest_at = line.find(kDigest);
  const std::string step = digest_at == std::string::npos || digest_at < kStep.size()
                               ? ""
                               : line.substr(kStep.size(), digest_at - kStep.size());
  Certificate c;
  if (line.rfind(kStep, 0) != 0 || step.empty() ||
      step.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(step, &c.step) || c.step < 1) {
    return absl::InvalidArgumentError("\"" + line.substr(0, 200) +
                                      "\": not \"certificate step=N digest=HEX\" with N >= 1");
  }
  c.digest = line.substr(digest_at + kDigest.size());
  if (c.digest.empty() || !IsDigestOrEmpty(c.digest)) {
    return absl::InvalidArgumentError("\"" + line.substr(0, 200) +
                                      "\": digest: not a SHA-256 in lowercase hex");
  }
  return c;
}

StatusOr<WorkerAssignment> ParseWorkerAssignment(const nlohmann::json& j) {
  WorkerAssignment a;
  FieldReader r(j, "");
  ES_RETURN_IF_ERROR(CheckApiVersion(r));
  r.String("job", &a.job, true);
  r.Int("generation", &a.generation, true, 0);
  r.Int("worldSize", &a.worldSize, true, 1, kMaxWorldSize);
  r.Int("rank", &a.rank, true, 0, a.worldSize - 1);
  r.Int("totalEsts", &a.totalEsts, true, 1, kMaxTotalEsts);
  r.IntList("ests", &a.ests, true, 0, a.totalEsts - 1);
  r.String("checkpointDir", &a.checkpointDir);
  r.Int("stopAtStep", &a.stopAtStep, false, 0);
  r.Int("certificateEvery", &a.certificateEvery, false, 0);
  r.Enum("backend", &a.backend, {"cpu", "cuda"});
  std::string action = ToString(a.action);
  r.Enum("action", &action, {"Run", "Wait", "CheckpointAndStop"});
  for (WorkerAction act :
       {WorkerAction::kRun, WorkerAction::kWait, WorkerAction::kCheckpointAndStop}) {
    if (action == ToString(act)) a.action = act;
  }
  if (const nlohmann::json* rv = r.Object("rendezvous", true)) {
    FieldReader rr(*rv, "rendezvous");
    rr.String("url", &a.rendezvous.url, a.worldSize > 1);
    rr.String("prefix", &a.rendezvous.prefix, true);
    if (rr.ok() && !a.rendezvous.url.empty() && a.rendezvous.url.rfind("http://", 0) != 0) {
      rr.Fail("url", "must start with http://");
    }
    ES_RETURN_IF_ERROR(rr.status());
  }
  if (const nlohmann::json* p = r.Object("restore")) {
    ES_ASSIGN_OR_RETURN(a.restore, ParseRestorePlan(*p));
  }
  if (const nlohmann::json* t = r.Object("training", true)) {
    ES_ASSIGN_OR_RETURN(a.training, ParseTrainingArgs(*t, "training"));
  }
  if (const nlohmann::json* o = r.Object("output")) {
    ES_ASSIGN_OR_RETURN(a.output, ParseOutputSpec(*o, "output"));
  }
  ES_RETURN_IF_ERROR(r.status());
  if (a.ests.empty()) return absl::InvalidArgumentError("ests: must not be empty");
  for (size_t i = 1; i < a.ests.size(); ++i) {
    if (a.ests[i - 1] >= a.ests[i]) return absl::InvalidArgumentError("ests: ids must ascend");
  }
  return a;
}

StatusOr<WorkerReport> ParseWorkerReport(const nlohmann::json& j) {
  WorkerReport rep;
  FieldReader r(j, "");
  ES_RETURN_IF_ERROR(CheckApiVersion(r));
  r.String("job", &rep.job, true);
  r.String("pod", &rep.pod);
  r.Int("generation", &rep.generation, true, 0);
  r.Int("rank", &rep.rank, true, 0);
  std::string state;
  std::vector<std::string> names;
  for (WorkerState s : kStates) names.push_back(ToString(s));
  r.Enum("state", &state, names, true);
  for (WorkerState s : kStates) {
    if (state == ToString(s)) rep.state = s;
  }
  r.Int("step", &rep.step, false, 0);
  r.Double("samplesPerSecond", &rep.samplesPerSecond, false, 0.0);
  r.String("digest", &rep.digest);
  r.Double("testAccuracy", &rep.testAccuracy, false, -1.0, 1.0);
  r.String("message", &rep.message);
  r.String("reason", &rep.reason);
  r.Int("stateStep", &rep.stateStep, false, -1);
  r.String("stateUrl", &rep.stateUrl);
  if (const nlohmann::json* o = r.Object("output")) {
    ES_ASSIGN_OR_RETURN(rep.output, ParseOutputDigests(*o, "output"));
  }
  if (const nlohmann::json* c = r.Object("certificate")) {
    ES_ASSIGN_OR_RETURN(rep.certificate, ParseCertificate(*c, "certificate"));
  }
  ES_RETURN_IF_ERROR(r.status());
  if (!rep.stateUrl.empty() && rep.stateUrl.rfind("http://", 0) != 0) {
    return absl::InvalidArgumentError("stateUrl: must start with http://");
  }
  return rep;
}

}  // namespace easyscale
