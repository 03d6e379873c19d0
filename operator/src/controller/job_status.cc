// JSON form of JobStatus and metav1.Condition helpers.
#include "controller/job_status.h"

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/json_fields.h"
#include "easyscale/operator/kube_time.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

json WorkerJson(const WorkerRecord& w) {
  return {
      {"pod", w.pod}, {"node", w.node}, {"gpuType", w.gpuType}, {"rank", w.rank}, {"ests", w.ests}};
}

Status ReadWorker(const json& j, const std::string& path, WorkerRecord* w) {
  if (!j.is_object()) return absl::InvalidArgumentError(path + ": must be an object");
  FieldReader r(j, path);
  r.String("pod", &w->pod, true);
  r.String("node", &w->node, true);
  r.String("gpuType", &w->gpuType, true);
  r.Int("rank", &w->rank, true, 0);
  r.IntList("ests", &w->ests, true, 0);
  return r.status();
}

Status ReadDrainingList(const json& status, const char* name, std::vector<DrainingRecord>* out) {
  const json list = status.value(name, json::array());
  if (!list.is_array())
    return absl::InvalidArgumentError(absl::StrCat("status.", name, ": must be a list"));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = absl::StrCat("status.", name, "[", i, "]");
    DrainingRecord d;
    ES_RETURN_IF_ERROR(ReadWorker(list[i], path, &d.worker));
    FieldReader dr(list[i], path);
    dr.Int("generation", &d.generation, true, 1);
    dr.Int("worldSize", &d.worldSize, true, 1);
    dr.String("since", &d.since, true);
    ES_RETURN_IF_ERROR(dr.status());
    out->push_back(d);
  }
  return absl::OkStatus();
}

json DrainingJson(const std::vector<DrainingRecord>& records) {
  json out = json::array();
  for (const DrainingRecord& d : records) {
    json j = WorkerJson(d.worker);
    j["generation"] = d.generation;
    j["worldSize"] = d.worldSize;
    j["since"] = d.since;
    out.push_back(j);
  }
  return out;
}

constexpr std::pair<JobPhase, const char*> kPhaseNames[] = {
    {JobPhase::kPending, "Pending"},     {JobPhase::kRunning, "Running"},
    {JobPhase::kScaling, "Scaling"},     {JobPhase::kPreempted, "Preempted"},
    {JobPhase::kSuspended, "Suspended"}, {JobPhase::kSucceeded, "Succeeded"},
    {JobPhase::kFailed, "Failed"}};

}  // namespace

const char* PhaseName(JobPhase phase) {
  for (const auto& [p, name] : kPhaseNames) {
    if (p == phase) return name;
  }
  return "Pending";
}

StatusOr<JobPhase> ParseJobPhase(const std::string& name, const std::string& path) {
  for (const auto& [p, n] : kPhaseNames) {
    if (n == name) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": unknown phase \"", name, "\""));
}

StatusOr<JobStatus> ParseJobStatus(const json& status) {
  JobStatus s;
  if (status.is_null()) return s;
  if (!status.is_object()) return absl::InvalidArgumentError("status: must be an object");
  FieldReader r(status, "status");
  std::string phase;
  r.String("phase", &phase);
  if (!phase.empty()) {
    ES_ASSIGN_OR_RETURN(s.phase, ParseJobPhase(phase, "status.phase"));
  }
  r.Int("observedGeneration", &s.observedGeneration);
  r.Int("generation", &s.generation, false, 0);
  r.Int("runningGeneration", &s.runningGeneration, false, 0);
  r.Int("step", &s.step, false, 0);
  r.Int("preemptions", &s.preemptions, false, 0);
  r.Int("scaleEvents", &s.scaleEvents, false, 0);
  r.String("digest", &s.digest);
  r.Double("testAccuracy", &s.testAccuracy);
  r.String("startTime", &s.startTime);
  r.String("completionTime", &s.completionTime);
  r.Bool("everPreempted", &s.everPreempted);
  r.Int("restarts", &s.restarts, false, 0);
  r.Int("failuresInARow", &s.failuresInARow, false, 0);
  r.String("restartAfter", &s.restartAfter);
  r.Int("failedGeneration", &s.failedGeneration, false, 0);
  r.Int("progressPercentage", &s.progressPercentage, false, 0, 100);
  r.Int("estimatedRemainingSeconds", &s.estimatedRemainingSeconds, false, 0);
  ES_RETURN_IF_ERROR(r.status());
  if (const json* restore = r.Object("restore")) {
    FieldReader rr(*restore, "status.restore");
    rr.Int("generation", &s.restore.generation, true, 1);
    rr.String("since", &s.restore.since);
    ES_RETURN_IF_ERROR(rr.status());
    json plan = *restore;
    plan.erase("generation");
    plan.erase("since");
    StatusOr<RestorePlan> p = ParseRestorePlan(plan);
    if (!p.ok()) return absl::InvalidArgumentError("status." + std::string(p.status().message()));
    s.restore.plan = *p;
  }
  if (const json* output = r.Object("output")) {
    ES_ASSIGN_OR_RETURN(s.output, ParseOutputDigests(*output, "status.output"));
  }
  if (const json* certificate = r.Object("certificate")) {
    ES_ASSIGN_OR_RETURN(s.certificate, ParseCertificate(*certificate, "status.certificate"));
  }
  ES_RETURN_IF_ERROR(r.status());
  if (status.contains("conditions") && status["conditions"].is_array())
    s.conditions = status["conditions"];
  if (status.contains("speed") && status["speed"].is_object()) {
    for (const auto& [type, v] : status["speed"].items()) {
      if (v.is_number() && v.get<double>() > 0) s.speed[type] = v.get<double>();
    }
  }
  const json workers = status.value("workers", json::array());
  for (size_t i = 0; i < workers.size(); ++i) {
    WorkerRecord w;
    ES_RETURN_IF_ERROR(ReadWorker(workers[i], absl::StrCat("status.workers[", i, "]"), &w));
    s.workers.push_back(w);
  }
  ES_RETURN_IF_ERROR(ReadDrainingList(status, "draining", &s.draining));
  ES_RETURN_IF_ERROR(ReadDrainingList(status, "handover", &s.handover));
  return s;
}

EstAssignment AssignmentOf(int totalEsts, const std::vector<WorkerRecord>& workers) {
  EstAssignment a;
  a.totalEsts = totalEsts;
  for (const WorkerRecord& w : workers) a.workers.push_back(w.ests);
  return a;
}

json ToJson(const JobStatus& s) {
  json workers = json::array();
  int ests = 0;
  for (const WorkerRecord& w : s.workers) {
    workers.push_back(WorkerJson(w));
    ests += static_cast<int>(w.ests.size());
  }
  json out = {{"phase", PhaseName(s.phase)},
              {"observedGeneration", s.observedGeneration},
              {"generation", s.generation},
              {"runningGeneration", s.runningGeneration},
              {"workers", workers},
              {"draining", DrainingJson(s.draining)},
              {"step", s.step},
              {"preemptions", s.preemptions},
              {"scaleEvents", s.scaleEvents},
              {"speed", s.speed},
              {"conditions", s.conditions},
              {"everPreempted", s.everPreempted},
              {"progressPercentage", s.progressPercentage}};
  // The printer columns: worker count and "a100x2,t4x1".
  std::map<std::string, int> byType;
  for (const WorkerRecord& w : s.workers) ++byType[w.gpuType];
  std::string types;
  for (const auto& [type, n] : byType)
    absl::StrAppend(&types, types.empty() ? "" : ",", type, "x", n);
  out["workerCount"] = static_cast<int>(s.workers.size());
  out["gpuTypes"] = types;
  if (!s.workers.empty()) out["assignment"] = ToJson(AssignmentOf(ests, s.workers));
  if (!s.digest.empty()) out["digest"] = s.digest;
  if (s.testAccuracy >= 0) out["testAccuracy"] = s.testAccuracy;
  if (!s.output.path.empty()) out["output"] = ToJson(s.output);
  if (s.certificate.step > 0) out["certificate"] = ToJson(s.certificate);
  if (!s.startTime.empty()) out["startTime"] = s.startTime;
  if (!s.completionTime.empty()) out["completionTime"] = s.completionTime;
  if (!s.handover.empty()) out["handover"] = DrainingJson(s.handover);
  if (s.restarts > 0) out["restarts"] = s.restarts;
  if (s.failuresInARow > 0) out["failuresInARow"] = s.failuresInARow;
  if (s.failedGeneration > 0) out["failedGeneration"] = s.failedGeneration;
  if (!s.restartAfter.empty()) out["restartAfter"] = s.restartAfter;
  if (s.estimatedRemainingSeconds >= 0) {
    out["estimatedRemainingSeconds"] = s.estimatedRemainingSeconds;
  }
  if (s.restore.generation > 0) {
    json restore = ToJson(s.restore.plan);
    restore["generation"] = s.restore.generation;
    if (!s.restore.since.empty()) restore["since"] = s.restore.since;
    out["restore"] = restore;
  }
  return out;
}

const json* FindCondition(const json& conditions, const std::string& type) {
  for (const json& c : conditions) {
    if (c.is_object() && c.value("type", "") == type) return &c;
  }
  return nullptr;
}

void SetCondition(json& conditions, const std::string& type, bool status, const std::string& reason,
                  const std::string& message, int64_t observedGeneration) {
  if (!conditions.is_array()) conditions = json::array();
  const std::string value = status ? "True" : "False";
  for (json& c : conditions) {
    if (!c.is_object() || c.value("type", "") != type) continue;
    if (c.value("status", "") != value) c["lastTransitionTime"] = NowTime();
    c["status"] = value;
    c["reason"] = reason;
    c["message"] = message;
    c["observedGeneration"] = observedGeneration;
    return;
  }
  conditions.push_back({{"type", type},
                        {"status", value},
                        {"reason", reason},
                        {"message", message},
                        {"observedGeneration", observedGeneration},
                        {"lastTransitionTime", NowTime()}});
}

}  // namespace easyscale::op
