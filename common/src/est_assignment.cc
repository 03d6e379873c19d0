#include "easyscale/common/est_assignment.h"

#include <cmath>

#include "easyscale/common/checks.h"
#include "easyscale/common/json_fields.h"

namespace easyscale {
namespace {

Status CheckCounts(int ests, int workers) {
  if (ests < 1) return absl::InvalidArgumentError(absl::StrCat("ests must be >= 1, got ", ests));
  if (workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("workers must be >= 1, got ", workers));
  }
  if (workers > ests) {
    return absl::InvalidArgumentError(
        absl::StrCat("workers (", workers, ") must be <= ests (", ests, ")"));
  }
  return absl::OkStatus();
}

EstAssignment FromCounts(int ests, const std::vector<int>& counts) {
  EstAssignment a;
  a.totalEsts = ests;
  int next = 0;
  for (int c : counts) {
    std::vector<int> ids;
    for (int i = 0; i < c; ++i) ids.push_back(next++);
    a.workers.push_back(std::move(ids));
  }
  return a;
}

}  // namespace

int EstAssignment::OwnerOf(int est) const {
  for (int r = 0; r < worldSize(); ++r) {
    for (int e : workers[r]) {
      if (e == est) return r;
    }
  }
  return -1;
}

StatusOr<EstAssignment> AssignContiguous(int ests, int workers) {
  ES_RETURN_IF_ERROR(CheckCounts(ests, workers));
  std::vector<int> counts(workers, ests / workers);
  for (int r = 0; r < ests % workers; ++r) ++counts[r];
  return FromCounts(ests, counts);
}

StatusOr<EstAssignment> AssignBySpeed(int ests, const std::vector<double>& speeds) {
  ES_RETURN_IF_ERROR(CheckCounts(ests, static_cast<int>(speeds.size())));
  for (size_t i = 0; i < speeds.size(); ++i) {
    if (!(speeds[i] > 0.0) || !std::isfinite(speeds[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("speeds[", i, "] must be a positive number, got ", speeds[i]));
    }
  }
  // Greedy water-filling: each extra EST goes where it finishes earliest. This
  // minimises the maximum of count/speed.
  std::vector<int> counts(speeds.size(), 1);
  for (int left = ests - static_cast<int>(speeds.size()); left > 0; --left) {
    size_t best = 0;
    for (size_t i = 1; i < speeds.size(); ++i) {
      if ((counts[i] + 1) / speeds[i] < (counts[best] + 1) / speeds[best]) best = i;
    }
    ++counts[best];
  }
  return FromCounts(ests, counts);
}

Status ValidateAssignment(const EstAssignment& a) {
  if (a.totalEsts < 1) return absl::InvalidArgumentError("totalEsts must be >= 1");
  if (a.workers.empty()) return absl::InvalidArgumentError("workers must not be empty");
  std::vector<int> seen(a.totalEsts, -1);
  for (int r = 0; r < a.worldSize(); ++r) {
    const auto& ids = a.workers[r];
    if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat("workers[", r, "] has no EST"));
    for (size_t i = 0; i < ids.size(); ++i) {
      const int e = ids[i];
      if (e < 0 || e >= a.totalEsts) {
        return absl::InvalidArgumentError(
            absl::StrCat("workers[", r, "]: EST ", e, " out of range [0, ", a.totalEsts, ")"));
      }
      if (i > 0 && ids[i - 1] >= e) {
        return absl::InvalidArgumentError(absl::StrCat("workers[", r, "]: ids must ascend"));
      }
      if (seen[e] >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("EST ", e, " assigned to workers ", seen[e], " and ", r));
      }
      seen[e] = r;
    }
  }
  for (int e = 0; e < a.totalEsts; ++e) {
    if (seen[e] < 0) return absl::InvalidArgumentError(absl::StrCat("EST ", e, " has no worker"));
  }
  return absl::OkStatus();
}

nlohmann::json ToJson(const EstAssignment& a) {
  return {{"totalEsts", a.totalEsts}, {"workers", a.workers}};
}

StatusOr<EstAssignment> ParseEstAssignment(const nlohmann::json& j, const std::string& path) {
  EstAssignment a;
  FieldReader r(j, path);
  r.Int("totalEsts", &a.totalEsts, true, 1, kMaxTotalEsts);
  const auto it = j.is_object() ? j.find("workers") : j.end();
  if (r.ok() && (it == j.end() || !it->is_array())) r.Fail("workers", "must be a list of lists");
  if (!r.ok()) return r.status();
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json wrapper = {{"ids", (*it)[i]}};
    FieldReader wr(wrapper, absl::StrCat(r.FieldPath("workers"), "[", i, "]"));
    std::vector<int> ids;
    wr.IntList("ids", &ids, true, 0, a.totalEsts - 1);
    if (!wr.ok()) return wr.status();
    a.workers.push_back(std::move(ids));
  }
  if (Status s = ValidateAssignment(a); !s.ok()) {
    return absl::InvalidArgumentError(path + ": " + std::string(s.message()));
  }
  return a;
}

}  // namespace easyscale
