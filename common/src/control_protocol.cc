#include "easyscale/common/control_protocol.h"

#include <array>

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

nlohmann::json ToJson(const WorkerAssignment& a) {
  return {{"apiVersion", kControlApiVersion},
          {"job", a.job},
          {"generation", a.generation},
          {"rank", a.rank},
          {"worldSize", a.worldSize},
          {"totalEsts", a.totalEsts},
          {"ests", a.ests},
          {"rendezvous",
           {{"store", a.rendezvous.store},
            {"path", a.rendezvous.path},
            {"host", a.rendezvous.host},
            {"port", a.rendezvous.port},
            {"prefix", a.rendezvous.prefix}}},
          {"checkpointDir", a.checkpointDir},
          {"backend", a.backend},
          {"training", ToJson(a.training)},
          {"action", ToString(a.action)},
          {"stopAtStep", a.stopAtStep}};
}

nlohmann::json ToJson(const WorkerReport& r) {
  return {{"apiVersion", kControlApiVersion},
          {"job", r.job},
          {"pod", r.pod},
          {"generation", r.generation},
          {"rank", r.rank},
          {"state", ToString(r.state)},
          {"step", r.step},
          {"samplesPerSecond", r.samplesPerSecond},
          {"digest", r.digest},
          {"testAccuracy", r.testAccuracy},
          {"message", r.message}};
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
  r.String("checkpointDir", &a.checkpointDir, true);
  r.Int("stopAtStep", &a.stopAtStep, false, 0);
  r.Enum("backend", &a.backend, {"cpu", "cuda"});
  std::string action = ToString(a.action);
  r.Enum("action", &action, {"Run", "Wait", "CheckpointAndStop"});
  for (WorkerAction act :
       {WorkerAction::kRun, WorkerAction::kWait, WorkerAction::kCheckpointAndStop}) {
    if (action == ToString(act)) a.action = act;
  }
  if (const nlohmann::json* rv = r.Object("rendezvous", true)) {
    FieldReader rr(*rv, "rendezvous");
    rr.Enum("store", &a.rendezvous.store, {"file", "tcp"}, true);
    rr.String("path", &a.rendezvous.path);
    rr.String("host", &a.rendezvous.host);
    rr.Int("port", &a.rendezvous.port, false, 0, 65535);
    rr.String("prefix", &a.rendezvous.prefix, true);
    if (rr.ok() && a.rendezvous.store == "file" && a.rendezvous.path.empty()) {
      rr.Fail("path", "is required for store \"file\"");
    }
    if (rr.ok() && a.rendezvous.store == "tcp" &&
        (a.rendezvous.host.empty() || a.rendezvous.port == 0)) {
      rr.Fail("host", "host and port are required for store \"tcp\"");
    }
    ES_RETURN_IF_ERROR(rr.status());
  }
  if (const nlohmann::json* t = r.Object("training", true)) {
    ES_ASSIGN_OR_RETURN(a.training, ParseTrainingArgs(*t, "training"));
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
  ES_RETURN_IF_ERROR(r.status());
  return rep;
}

}  // namespace easyscale
